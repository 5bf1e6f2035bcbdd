// The JSON form of task discovery (api/task_description.h), as REST
// serves it: GET /v2/tasks answers {"tasks": [<task>, ...]} and
// GET /v2/tasks/{task} one <task>:
//   {"task": "classification/digits",
//    "signature": {"inputs": [{"name", "datatype", "shape"}], "outputs": [...],
//                  "batched": true},        shapes per sample
//    "models": [{"name", "versions": ["1"], "accuracy"?, "usable_variants",
//                "mismatch"?}],
//    "usable_variants": 6,
//    "accuracy": {"min"?, "max"?}, "latency_ms_batch1": {"min"?, "max"?}}
// A figure that is not known is left out.
//
// Pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "api/task_description.h"

namespace somm::oip {

std::string EncodeTask(const TaskDescription& task);
std::string EncodeTaskList(const std::vector<TaskDescription>& tasks);
// INVALID_ARGUMENT naming what is wrong.
StatusOr<TaskDescription> DecodeTask(const std::string& json);
StatusOr<std::vector<TaskDescription>> DecodeTaskList(const std::string& json);

}  // namespace somm::oip
