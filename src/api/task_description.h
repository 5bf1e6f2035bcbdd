// TaskDescription: what a model-less client needs to know about one task
// (`task/dataset`) to query it without knowing which model will serve it:
// the signature every model of the task shares, the models registered for
// it, and the accuracy and batch-1 latency ranges its usable variants offer.
// GET /v2/tasks[/{task}], somm.SommControl/ListTasks and DescribeTask, and
// `somm tasks` show it; registry/task_catalog.h builds it.
//
// Plain values; no I/O, no threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "repository/model_config.h"

namespace somm {

// A task's inputs and outputs. Shapes are per sample (model.yaml's
// convention): a query adds a leading batch dimension when `batched`.
struct TaskSignature {
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  bool batched = false;
};

// One model registered for a task.
struct TaskModel {
  std::string name;
  std::vector<std::string> versions;  // published, ascending
  std::optional<double> accuracy;     // model.yaml's figure; unset = unknown
  int usable_variants = 0;            // profiled and usable, latest version
  // Set when the model's signature differs from the task's (a repository
  // written by hand): the task's queries never reach it.
  std::string mismatch;
};

struct TaskDescription {
  std::string task;
  TaskSignature signature;
  std::vector<TaskModel> models;  // by name
  // Over the usable variants of every matching model's latest version (a
  // version without profiles counts as its as-registered self, with
  // model.yaml's accuracy and no latency). Unset = nothing known.
  std::optional<double> min_accuracy;
  std::optional<double> max_accuracy;
  // Profiled latency of one sample, over every hardware profiled.
  std::optional<double> min_latency_ms;
  std::optional<double> max_latency_ms;
  int usable_variants = 0;
};

}  // namespace somm
