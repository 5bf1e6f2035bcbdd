#include "repository/measured_memory.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace somm {
namespace fs = std::filesystem;

std::string MeasuredMemoryJson(int64_t peak_memory_bytes) {
  return nlohmann::json{{"peak_memory_bytes", peak_memory_bytes},
                        {"measured_by", "registration probe"}}
             .dump() +
         "\n";
}

std::optional<int64_t> ReadMeasuredMemory(const std::string& version_dir) {
  std::ifstream in(fs::path(version_dir) / kMeasuredMemoryFile);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!j.is_object() || !j.contains("peak_memory_bytes") ||
      !j["peak_memory_bytes"].is_number_integer()) {
    return std::nullopt;
  }
  const int64_t bytes = j["peak_memory_bytes"].get<int64_t>();
  return bytes >= 0 ? std::optional<int64_t>(bytes) : std::nullopt;
}

int64_t ChargedMemoryBytes(const std::string& model_file) {
  const std::string version_dir = fs::path(model_file).parent_path().string();
  if (std::optional<int64_t> measured = ReadMeasuredMemory(version_dir)) return *measured;
  std::error_code ec;
  const auto size = fs::file_size(model_file, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

}  // namespace somm
