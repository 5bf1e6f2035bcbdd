#include "repository/platform_names.h"

#include <map>
#include <mutex>

namespace somm {
namespace {

struct Table {
  std::mutex mu;
  std::map<std::string, std::string, std::less<>> canonical;  // name -> platform
};

// Built on first use: backends register from static initialisers, whose
// order against this file's is unspecified.
Table& Names() {
  static Table* table = new Table;
  return *table;
}

}  // namespace

Status AddPlatformNames(const std::string& platform, const std::vector<std::string>& aliases) {
  if (platform.empty()) return InvalidArgument("a platform needs a name");
  Table& t = Names();
  std::lock_guard lock(t.mu);
  std::vector<std::string> names = aliases;
  names.insert(names.begin(), platform);
  for (const std::string& name : names) {
    auto it = t.canonical.find(name);
    if (it != t.canonical.end() && it->second != platform) {
      return FailedPrecondition("platform name '" + name + "' already stands for '" +
                                it->second + "'");
    }
  }
  for (const std::string& name : names) t.canonical[name] = platform;
  return Status::Ok();
}

std::optional<std::string> CanonicalPlatform(std::string_view name) {
  Table& t = Names();
  std::lock_guard lock(t.mu);
  auto it = t.canonical.find(name);
  if (it == t.canonical.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> AcceptedPlatformNames() {
  Table& t = Names();
  std::lock_guard lock(t.mu);
  std::vector<std::string> out;
  for (const auto& [name, platform] : t.canonical) out.push_back(name);
  return out;
}

}  // namespace somm
