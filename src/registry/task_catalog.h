// Task catalog: the pure functions behind task discovery. From the
// registry's published versions they build each task's description
// (api/task_description.h); they decide whether a model fits its task's
// signature (registration refuses one that does not), and whether a task
// query's inputs fit the task before any model is chosen, so that the error
// a client gets names the task's signature rather than whichever model the
// selector happened to pick.
//
// A task's signature is the one most of its models share (ties: the model
// whose name sorts first), so one hand-written model.yaml that disagrees
// never changes what the task is; that model is listed with its mismatch.
//
// Pure functions of their arguments.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "common/tensor.h"
#include "registry/model_catalog.h"
#include "api/task_description.h"

namespace somm {

TaskSignature SignatureOf(const ModelConfig& config);
bool SameSignature(const TaskSignature& a, const TaskSignature& b);
// "inputs pixels FP32 [-1,64]; outputs logits FP32 [-1,10]" (full shapes).
std::string SignatureToString(const TaskSignature& s);

// One description per task of `versions` (the latest published version of
// each model, as ModelCatalog::All() gives), sorted by task; models without
// a task are left out.
std::vector<TaskDescription> DescribeTasks(const std::vector<VersionPtr>& versions);

// InvalidArgument showing both signatures when `candidate` (registered for
// its task) differs from the signature of the task's models in `existing`;
// OK when the task has no other model yet. A model never conflicts with
// itself (a new version of it may change its signature only if it is the
// task's one model).
Status CheckTaskSignature(const ModelConfig& candidate, const std::vector<VersionPtr>& existing);

// The task and signature alone of `versions` (one task's models, as
// ModelCatalog::ForTask gives): what a task query is checked against.
TaskDescription TaskSignatureOf(const std::string& task, const std::vector<VersionPtr>& versions);

// InvalidArgument naming the task and its signature when `inputs` do not
// fit it (a missing, unknown or mistyped input, or a wrong per-sample shape).
Status CheckTaskInputs(const TaskDescription& task, const std::vector<Tensor>& inputs);

}  // namespace somm
