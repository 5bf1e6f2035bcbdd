// ThreadNames: the names of a process's threads now, as `top -H` shows them
// (/proc/PID/task/*/comm), for tests that check which threads a component
// runs. pid 0: this process. A thread that ends while it is read is skipped;
// a process that is gone has none. Never throws.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace somm::testing {

inline std::vector<std::string> ThreadNames(pid_t pid = 0) {
  const std::filesystem::path tasks =
      pid == 0 ? std::filesystem::path("/proc/self/task")
               : std::filesystem::path("/proc/" + std::to_string(pid) + "/task");
  std::vector<std::string> names;
  // The error_code forms throughout: a range-for's ++ would throw when a
  // step fails (the process exits while its folder is read).
  std::error_code ec;
  for (std::filesystem::directory_iterator it(tasks, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::ifstream comm(it->path() / "comm");
    std::string name;
    if (std::getline(comm, name)) names.push_back(name);
  }
  return names;
}

}  // namespace somm::testing
