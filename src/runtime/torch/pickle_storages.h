// ScanPickleStorages: the tensor storages a TorchScript archive's pickle
// (data.pkl, constants.pkl) declares, read without running the pickle.
//
// Why: libtorch 1.13 sizes a loaded storage by the element count its pickle
// declares, not by the bytes its record holds, so a model file that declares
// 2^31 floats over a 64 KiB record loads, and the first full read of that
// storage (saving a variant, a conversion) runs past the buffer and crashes
// the process. CheckTorchArchive (torch_archive_check.h) compares each
// declaration with its record before torch::jit::load sees the file.
//
// Contract: walks the pickle's opcodes with a model of the stack that is
// exact for the pushes a persistent id is built from (strings, globals,
// integers, memo gets, tuples) and conservative for the rest; calls
// `storage` once per persistent id ('storage', <module.XStorage>, key,
// location, numel). Refuses (InvalidArgument, naming the offset) a pickle
// that is malformed: unknown or text-only opcodes, a truncated argument, a
// stack or mark underflow, a persistent id of another form, no STOP. Never
// reads past `pickle`; memory is bounded by the pickle's size. Pure; no
// libtorch (the fuzz target links it alone).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace somm {

struct PickledStorage {
  std::string type;      // "FloatStorage", ... (the global's name in module torch)
  std::string key;       // the record under <archive>/data/ or constants/
  std::string location;  // "cpu", "cuda:0"
  int64_t numel = 0;
};

Status ScanPickleStorages(std::string_view pickle,
                          const std::function<Status(const PickledStorage&)>& storage);

// Bytes per element of a storage type ("FloatStorage" -> 4); 0 = unknown.
int64_t StorageItemSize(std::string_view type);

}  // namespace somm
