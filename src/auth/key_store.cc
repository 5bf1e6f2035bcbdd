#include "auth/key_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "crypto/digest.h"

namespace somm::auth {
namespace fs = std::filesystem;
namespace {

constexpr size_t kIdHexDigits = 16;
constexpr size_t kSecretBytes = 32;
constexpr char kKeyPrefix[] = "somm_";

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return !s.empty();
}

std::string HashOf(std::string_view id, std::string_view secret) {
  std::string material(id);
  material += ':';
  material += secret;
  return crypto::Sha256Hex(material);
}

// Splits "somm_<id>_<secret>"; false when the text has another shape.
bool SplitKey(std::string_view key, std::string_view* id, std::string_view* secret) {
  const std::string_view prefix(kKeyPrefix);
  if (key.size() != prefix.size() + kIdHexDigits + 1 + 2 * kSecretBytes) return false;
  if (key.substr(0, prefix.size()) != prefix) return false;
  *id = key.substr(prefix.size(), kIdHexDigits);
  if (key[prefix.size() + kIdHexDigits] != '_') return false;
  *secret = key.substr(prefix.size() + kIdHexDigits + 1);
  return IsHex(*id) && IsHex(*secret);
}

// An exclusive flock on "<path>.lock" for one read-modify-write.
class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

StatusOr<std::string> ReadWhole(const std::string& path, bool* missing) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    *missing = !fs::exists(path, ec);
    if (*missing) return std::string();
    return Unavailable("cannot read the key file " + path);
  }
  *missing = false;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kUser:
      return "user";
    case Role::kMetrics:
      return "metrics";
  }
  return "unknown";
}

StatusOr<Role> ParseRole(std::string_view name) {
  if (name == "admin") return Role::kAdmin;
  if (name == "user") return Role::kUser;
  if (name == "metrics") return Role::kMetrics;
  return InvalidArgument("unknown role '" + std::string(name) + "' (use admin, user or metrics)");
}

Status CheckTenantName(std::string_view tenant) {
  if (tenant.empty() || tenant.size() > 64 ||
      tenant.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
          std::string_view::npos) {
    return InvalidArgument("tenant '" + std::string(tenant) +
                           "' must be 1-64 letters, digits, '-', '_' or '.'");
  }
  return Status::Ok();
}

StatusOr<std::vector<KeyRecord>> ParseKeyFile(const std::string& text, const std::string& source) {
  std::vector<KeyRecord> out;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    KeyRecord r;
    std::string role, state;
    if (!(fields >> r.id >> r.tenant >> role >> r.created_unix >> state >> r.hash)) {
      return InvalidArgument(source + ":" + std::to_string(number) +
                             ": expected '<id> <tenant> <role> <created_unix> active|revoked "
                             "<sha256>'");
    }
    StatusOr<Role> parsed = ParseRole(role);
    if (!parsed.ok())
      return InvalidArgument(source + ":" + std::to_string(number) + ": " +
                             parsed.status().message());
    r.role = *parsed;
    if (state != "active" && state != "revoked") {
      return InvalidArgument(source + ":" + std::to_string(number) + ": state '" + state +
                             "' is neither active nor revoked");
    }
    r.revoked = state == "revoked";
    if (r.id.size() != kIdHexDigits || !IsHex(r.id) || r.hash.size() != 64 || !IsHex(r.hash)) {
      return InvalidArgument(source + ":" + std::to_string(number) + ": malformed id or hash");
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string RenderKeyFile(const std::vector<KeyRecord>& records) {
  std::string out =
      "# somm API keys (somm keys create|list|revoke); hashes only, never a key.\n"
      "# <id> <tenant> <role> <created_unix> active|revoked <sha256(id:secret)>\n";
  for (const KeyRecord& r : records) {
    out += r.id + " " + r.tenant + " " + RoleName(r.role) + " " + std::to_string(r.created_unix) +
           " " + (r.revoked ? "revoked" : "active") + " " + r.hash + "\n";
  }
  return out;
}

KeyStore::KeyStore(std::string path) : path_(std::move(path)) {}

std::string KeyStore::DefaultPath(const std::string& repository) {
  return (fs::path(repository) / ".somm" / "keys").string();
}

StatusOr<std::vector<KeyRecord>> KeyStore::List() const {
  bool missing = false;
  SOMM_ASSIGN_OR_RETURN(std::string text, ReadWhole(path_, &missing));
  return ParseKeyFile(text, path_);
}

Status KeyStore::Update(const std::function<Status(std::vector<KeyRecord>&)>& change) {
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  if (ec)
    return Unavailable("cannot create " + fs::path(path_).parent_path().string() + ": " +
                       ec.message());
  FileLock lock(path_);
  if (!lock.ok()) return Unavailable("cannot lock " + path_ + ".lock");
  SOMM_ASSIGN_OR_RETURN(std::vector<KeyRecord> records, List());
  SOMM_RETURN_IF_ERROR(change(records));
  const std::string temp = path_ + ".tmp." + std::to_string(::getpid());
  {
    const int fd = ::open(temp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return Unavailable("cannot write " + temp);
    const std::string text = RenderKeyFile(records);
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const bool synced = ::fsync(fd) == 0;
    ::close(fd);
    if (!written || !synced) {
      ::unlink(temp.c_str());
      return Unavailable("cannot write " + temp);
    }
  }
  fs::rename(temp, path_, ec);
  if (ec) return Unavailable("cannot replace " + path_ + ": " + ec.message());
  return Status::Ok();
}

StatusOr<NewKey> KeyStore::Create(const std::string& tenant, Role role) {
  SOMM_RETURN_IF_ERROR(CheckTenantName(tenant));
  SOMM_ASSIGN_OR_RETURN(std::string id_bytes, crypto::RandomBytes(kIdHexDigits / 2));
  SOMM_ASSIGN_OR_RETURN(std::string secret_bytes, crypto::RandomBytes(kSecretBytes));
  NewKey out;
  out.record.id = crypto::Hex(id_bytes);
  out.record.tenant = tenant;
  out.record.role = role;
  out.record.created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  const std::string secret = crypto::Hex(secret_bytes);
  out.record.hash = HashOf(out.record.id, secret);
  out.key = kKeyPrefix + out.record.id + "_" + secret;
  SOMM_RETURN_IF_ERROR(Update([&](std::vector<KeyRecord>& records) {
    for (const KeyRecord& r : records) {
      // 64 random bits: a clash is a broken generator, not bad luck.
      if (r.id == out.record.id) return Internal("key id clash; the random generator is suspect");
    }
    records.push_back(out.record);
    return Status::Ok();
  }));
  return out;
}

Status KeyStore::Revoke(const std::string& id) {
  return Update([&](std::vector<KeyRecord>& records) {
    for (KeyRecord& r : records) {
      if (r.id == id) {
        r.revoked = true;
        return Status::Ok();
      }
    }
    return NotFound("no key with id '" + id + "' in " + path_);
  });
}

void KeyStore::Refresh() {
  struct stat st {};
  FileSignature now;
  if (::stat(path_.c_str(), &st) == 0) {
    now.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    now.size = st.st_size;
    now.inode = st.st_ino;
  }
  {
    MutexLock lock(&mu_);
    if (now == seen_) return;
  }
  std::map<std::string, KeyRecord> fresh;
  StatusOr<std::vector<KeyRecord>> records = List();
  // An unreadable or malformed file admits nobody: failing closed is the
  // safe side, and `somm keys list` names the problem.
  if (records.ok()) {
    for (KeyRecord& r : *records) fresh[r.id] = std::move(r);
  }
  MutexLock lock(&mu_);
  by_id_ = std::move(fresh);
  seen_ = now;
}

StatusOr<KeyRecord> KeyStore::Verify(std::string_view key) {
  std::string_view id, secret;
  if (!SplitKey(key, &id, &secret)) return Unauthenticated("invalid API key");
  Refresh();
  const std::string hash = HashOf(id, secret);
  MutexLock lock(&mu_);
  auto it = by_id_.find(std::string(id));
  if (it == by_id_.end() || !crypto::ConstantTimeEquals(it->second.hash, hash)) {
    return Unauthenticated("invalid API key");
  }
  if (it->second.revoked) return Unauthenticated("API key " + it->second.id + " has been revoked");
  return it->second;
}

}  // namespace somm::auth
