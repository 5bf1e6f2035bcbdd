#include "runtime/torch/torch_archive_check.h"

#include <caffe2/serialize/inline_container.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/function_impl.h>

#include <filesystem>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

#include "common/mutex.h"

#include "runtime/torch/pickle_storages.h"

namespace somm {
namespace {

Status CheckPickle(caffe2::serialize::PyTorchStreamReader& reader, const std::string& pickle_name,
                   const std::string& tensor_dir) {
  if (!reader.hasRecord(pickle_name)) return Status::Ok();
  auto [pickle, pickle_size] = reader.getRecord(pickle_name);
  const std::string_view bytes(static_cast<const char*>(pickle.get()), pickle_size);
  Status scanned = ScanPickleStorages(bytes, [&](const PickledStorage& s) -> Status {
    const std::string record = tensor_dir + s.key;
    const int64_t item = StorageItemSize(s.type);
    if (item == 0) return InvalidArgument("storage '" + record + "' has an unknown type '" + s.type + "'");
    if (s.numel < 0 || s.numel > (int64_t{1} << 50) / item) {
      return InvalidArgument("storage '" + record + "' declares " + std::to_string(s.numel) +
                             " elements");
    }
    if (!reader.hasRecord(record)) {
      return InvalidArgument("storage '" + record + "' is declared but the file has no such record");
    }
    const size_t held = std::get<1>(reader.getRecord(record));
    const auto declared = static_cast<size_t>(s.numel * item);
    if (held != declared) {
      return InvalidArgument("storage '" + record + "' declares " + std::to_string(s.numel) + " " +
                             s.type + " elements (" + std::to_string(declared) +
                             " bytes) but its record holds " + std::to_string(held) + " bytes");
    }
    return Status::Ok();
  });
  if (!scanned.ok()) return InvalidArgument(pickle_name + ": " + scanned.message());
  return Status::Ok();
}

Status CheckTensor(const std::string& name, const at::Tensor& t) {
  if (!t.defined() || t.is_sparse() || t.numel() == 0 || !t.has_storage()) return Status::Ok();
  // The furthest element the view reaches, in elements from the storage's start.
  int64_t last = t.storage_offset();
  if (last < 0) return InvalidArgument("tensor '" + name + "' has a negative storage offset");
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t stride = t.stride(d);
    if (stride < 0) return InvalidArgument("tensor '" + name + "' has a negative stride");
    const int64_t extent = t.size(d) - 1;
    if (stride != 0 && extent > (std::numeric_limits<int64_t>::max() - last) / stride) {
      return InvalidArgument("tensor '" + name + "' has a view too large to address");
    }
    last += extent * stride;
  }
  const auto item = static_cast<int64_t>(t.element_size());
  const auto held = static_cast<int64_t>(t.storage().nbytes());
  if (last >= held / item) {
    return InvalidArgument("tensor '" + name + "' of shape " + c10::str(t.sizes()) +
                           " reaches element " + std::to_string(last) + " of a storage of " +
                           std::to_string(held) + " bytes");
  }
  return Status::Ok();
}

}  // namespace

Status CheckLoadedTensors(const torch::jit::Module& module) {
  try {
    for (const auto& attr : module.named_attributes(/*recurse=*/true)) {
      if (attr.value.isTensor()) SOMM_RETURN_IF_ERROR(CheckTensor(attr.name, attr.value.toTensor()));
    }
    return Status::Ok();
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return InvalidArgument("cannot read the model's tensors: " + what);
  }
}

Status CheckTorchArchive(const std::string& path) {
  // A file checked once is not read again while its size and time stay the
  // same: loads on a query's path (cold starts) pay for the check once.
  static Mutex mu;
  static std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> checked
      SOMM_GUARDED_BY(mu);
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  const auto mtime = std::filesystem::last_write_time(path, ec);
  if (!ec) {
    MutexLock lock(&mu);
    auto it = checked.find(path);
    if (it != checked.end() && it->second == std::make_pair(size, mtime)) return Status::Ok();
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    SOMM_RETURN_IF_ERROR(CheckPickle(reader, "data.pkl", "data/"));
    SOMM_RETURN_IF_ERROR(CheckPickle(reader, "constants.pkl", "constants/"));
    if (!ec) {
      MutexLock lock(&mu);
      checked[path] = {size, mtime};
    }
    return Status::Ok();
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
    return InvalidArgument("not a readable TorchScript archive: " + what);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("not a readable TorchScript archive: ") + e.what());
  }
}

// The operators CheckOperators refuses (torch_archive_check.h says why).
constexpr std::string_view kOutsideOperators[] = {"aten::from_file", "aten::save",
                                                  "prim::rpc_async", "prim::rpc_sync",
                                                  "prim::rpc_remote"};

// The first refused operator in `block` or its sub-blocks, or "".
std::string OutsideOperatorIn(const torch::jit::Block& block) {
  for (const torch::jit::Node* node : block.nodes()) {
    const std::string_view kind = node->kind().toQualString();
    for (std::string_view refused : kOutsideOperators) {
      if (kind == refused) return std::string(kind);
    }
    for (const torch::jit::Block* sub : node->blocks()) {
      if (std::string found = OutsideOperatorIn(*sub); !found.empty()) return found;
    }
  }
  return "";
}

Status CheckOperators(const torch::jit::Module& module) {
  // Every function of the compilation unit: each class's methods (the
  // module's and its submodules') and the free functions they call.
  for (torch::jit::Function* function : module._ivalue()->compilation_unit()->get_functions()) {
    torch::jit::GraphFunction* graph_function = torch::jit::tryToGraphFunction(*function);
    if (graph_function == nullptr) continue;
    const std::string found = OutsideOperatorIn(*graph_function->graph()->block());
    if (!found.empty()) {
      return InvalidArgument("its code calls " + found + " (in " +
                             function->qualname().qualifiedName() +
                             "), which reaches files or the network outside the server's "
                             "memory; somm serves no model that does");
    }
  }
  return Status::Ok();
}

}  // namespace somm
