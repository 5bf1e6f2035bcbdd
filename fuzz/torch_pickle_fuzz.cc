// The storage scan of a TorchScript archive's pickle
// (runtime/torch/pickle_storages.h), run before libtorch reads a model file
// that a registration or the repository brought. Beyond "no crash": every
// storage reported is complete (a type, a key), and a refusal names where.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtime/torch/pickle_storages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view pickle(reinterpret_cast<const char*>(data), size);
  const somm::Status s = somm::ScanPickleStorages(pickle, [](const somm::PickledStorage& st) {
    if (st.type.empty() && st.key.empty()) std::abort();
    return somm::Status::Ok();
  });
  if (!s.ok() && s.message().find("pickle") == std::string_view::npos) std::abort();
  return 0;
}
