#include "common/host_probe.h"

#include <malloc.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace somm {

CpuFeatures ParseCpuFeatures(const std::string& cpuinfo_text) {
  CpuFeatures f;
  std::istringstream lines(cpuinfo_text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(
        line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 1));
    std::string w;
    while (words >> w) {
      if (w == "avx512_bf16") f.avx512_bf16 = true;
      if (w == "amx_bf16") f.amx_bf16 = true;
    }
  }
  return f;
}

CpuFeatures DetectCpuFeatures() {
  std::ifstream in("/proc/cpuinfo");
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return ParseCpuFeatures(text.str());
}

int64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(in >> size_pages >> resident_pages)) return -1;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

void ReleaseFreeMemory() { malloc_trim(0); }

}  // namespace somm
