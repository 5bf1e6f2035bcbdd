#include "common/env.h"

namespace somm {
namespace {

class RealEnv : public Env {
 public:
  const Clock& clock() const override { return Clock::Real(); }
  int64_t AvailableMemoryBytes() const override { return somm::AvailableMemoryBytes(); }
  int64_t ResidentBytes() const override { return somm::ResidentBytes(); }
  CpuFeatures DetectCpuFeatures() const override { return somm::DetectCpuFeatures(); }
  StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv) const override {
    return somm::RunProcess(argv);
  }
};

}  // namespace

const Env& Env::Default() {
  static const RealEnv* env = new RealEnv();  // never destroyed: used until exit
  return *env;
}

}  // namespace somm
