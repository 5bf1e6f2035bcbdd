#include "repository/repository_poller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

namespace somm {
namespace {

namespace fs = std::filesystem;

// "size:time" of a file, "" when it is not there.
std::string FileStamp(const fs::path& file) {
  std::error_code ec;
  const auto size = fs::file_size(file, ec);
  if (ec) return "";
  const auto time = fs::last_write_time(file, ec);
  if (ec) return "";
  return std::to_string(size) + ":" + std::to_string(time.time_since_epoch().count());
}

// The files directly in a version folder, each "name:size:time", sorted.
// Every file counts, whichever platform's model file it is (the repository
// layer knows none: runtime/backend_registry.h names them); the
// subfolders (validation data) do not.
std::string VersionStamp(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    if (!f.is_regular_file(ec)) continue;
    const std::string stamp = FileStamp(f.path());
    if (!stamp.empty()) files.push_back(f.path().filename().string() + ":" + stamp);
  }
  std::sort(files.begin(), files.end());
  std::string out;
  for (const std::string& f : files) out += (out.empty() ? "" : ",") + f;
  return out;
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

RepositorySnapshot ScanRepository(const std::string& repository) {
  RepositorySnapshot out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(repository, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || !entry.is_directory(ec)) continue;
    const std::string config = FileStamp(entry.path() / "model.yaml");
    if (config.empty()) continue;  // not a model folder (yet)
    std::vector<std::string> versions;
    std::error_code vec;
    for (const auto& v : fs::directory_iterator(entry.path(), vec)) {
      const std::string dir = v.path().filename().string();
      if (!AllDigits(dir) || !v.is_directory(vec)) continue;
      versions.push_back(dir + "=" + VersionStamp(v.path()));
    }
    std::sort(versions.begin(), versions.end());
    std::string print = "model.yaml=" + config;
    for (const std::string& v : versions) print += " " + v;
    out[name] = std::move(print);
  }
  return out;
}

RepositoryChanges DiffRepository(const RepositorySnapshot& before, const RepositorySnapshot& after) {
  RepositoryChanges c;
  for (const auto& [name, print] : after) {
    auto it = before.find(name);
    if (it == before.end()) {
      c.added.push_back(name);
    } else if (it->second != print) {
      c.changed.push_back(name);
    }
  }
  for (const auto& [name, print] : before) {
    if (after.count(name) == 0) c.removed.push_back(name);
  }
  return c;
}

RepositoryPoller::RepositoryPoller(RepositoryPollerOptions options)
    : options_(std::move(options)), last_(ScanRepository(options_.repository)) {
  thread_ = std::thread([this] { Run(); });
}

RepositoryPoller::~RepositoryPoller() { Stop(); }

void RepositoryPoller::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RepositoryPoller::Run() {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, options_.period, [this] { return stop_; })) {
    lock.unlock();
    PollOnce();
    lock.lock();
  }
}

void RepositoryPoller::PollOnce() {
  if (options_.active && !options_.active()) {
    // A standby: keep the baseline current, so that it acts on what changes
    // after it takes over, not on what its predecessor already did.
    last_ = ScanRepository(options_.repository);
    return;
  }
  RepositorySnapshot now = ScanRepository(options_.repository);
  const RepositoryChanges changes = DiffRepository(last_, now);
  last_ = std::move(now);
  auto act = [](const char* what, const std::string& model, const Status& s) {
    if (s.ok()) {
      spdlog::info("repository poll: {} {}", what, model);
    } else {
      spdlog::warn("repository poll: {} {} failed (what served keeps serving): {}", what, model,
                   s.message());
    }
  };
  for (const std::string& m : changes.added) act("loaded new model", m, options_.load(m));
  for (const std::string& m : changes.changed) act("reloaded changed model", m, options_.load(m));
  for (const std::string& m : changes.removed) {
    const Status s = options_.unload(m);
    if (s.code() != StatusCode::kNotFound) act("unloaded removed model", m, s);
  }
}

}  // namespace somm
