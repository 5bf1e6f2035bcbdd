// CheckTorchArchive: refuses a TorchScript file whose tensor storages do not
// match the records that hold them, before torch::jit::load reads it.
//
// libtorch 1.13 trusts the element count a pickle declares for each storage
// (runtime/torch/pickle_storages.h says why that crashes the process); this
// reads data.pkl and constants.pkl, and for every storage they declare checks
// that its type is known and that numel x element size equals the bytes of
// its record. Errors are InvalidArgument and name the storage and both sizes.
// Reads each storage's record once (the load reads it again; the file is
// then in the page cache).
#pragma once

#include <torch/script.h>

#include <string>

#include "common/status.h"

namespace somm {

Status CheckTorchArchive(const std::string& path);

// After the load: every tensor the module holds (parameters, buffers and
// other attributes, in every submodule) lies inside its storage. The
// unpickler sets a tensor's sizes and strides without checking them against
// its storage, so a file can declare a [2^31, 64] view over 64 KiB, and the
// first read of all of it (a conversion to bf16) runs past the buffer.
Status CheckLoadedTensors(const torch::jit::Module& module);

// After the load: no code of the module (any method or function of its
// compilation unit, sub-blocks included) calls an operator that reaches
// outside the process's memory: aten::from_file (reads any file the process
// can: key files, TLS keys, other tenants' models), aten::save (writes one),
// prim::rpc_* (the network). TorchScript offers them to any model, and a
// served model runs inside its worker (docs/hostile-input.md), so such a model is
// refused wherever it is loaded: at registration's probe and on a worker.
// InvalidArgument naming the operator and the function that calls it.
Status CheckOperators(const torch::jit::Module& module);

}  // namespace somm
