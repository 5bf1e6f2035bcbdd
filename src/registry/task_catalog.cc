#include "registry/task_catalog.h"

#include <algorithm>
#include <map>
#include <utility>

namespace somm {
namespace {

bool SameSpecs(const std::vector<TensorSpec>& a, const std::vector<TensorSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].datatype != b[i].datatype || a[i].shape != b[i].shape) {
      return false;
    }
  }
  return true;
}

std::string SpecsToString(const std::vector<TensorSpec>& specs, bool batched) {
  std::string out;
  for (const TensorSpec& s : specs) {
    if (!out.empty()) out += ", ";
    Shape shape = s.shape;
    if (batched) shape.insert(shape.begin(), -1);
    out += s.name + " " + DataTypeName(s.datatype) + " " + ShapeToString(shape);
  }
  return out;
}

void Widen(std::optional<double>& lo, std::optional<double>& hi, double value) {
  lo = lo ? std::min(*lo, value) : value;
  hi = hi ? std::max(*hi, value) : value;
}

// The signature most of `versions` share; ties go to the first by name.
TaskSignature MajoritySignature(const std::vector<VersionPtr>& versions) {
  std::vector<std::pair<TaskSignature, int>> seen;
  for (const VersionPtr& v : versions) {
    TaskSignature s = SignatureOf(v->config);
    auto it = std::find_if(seen.begin(), seen.end(),
                           [&](const auto& e) { return SameSignature(e.first, s); });
    if (it == seen.end()) {
      seen.emplace_back(std::move(s), 1);
    } else {
      ++it->second;
    }
  }
  if (seen.empty()) return {};
  // stable: among equal counts the first seen (the first name) wins.
  std::stable_sort(seen.begin(), seen.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return seen.front().first;
}

}  // namespace

TaskSignature SignatureOf(const ModelConfig& config) {
  return TaskSignature{config.inputs, config.outputs, config.max_batch_size > 0};
}

bool SameSignature(const TaskSignature& a, const TaskSignature& b) {
  return a.batched == b.batched && SameSpecs(a.inputs, b.inputs) && SameSpecs(a.outputs, b.outputs);
}

std::string SignatureToString(const TaskSignature& s) {
  return "inputs " + SpecsToString(s.inputs, s.batched) + "; outputs " +
         SpecsToString(s.outputs, s.batched);
}

std::vector<TaskDescription> DescribeTasks(const std::vector<VersionPtr>& versions) {
  std::map<std::string, std::map<std::string, std::vector<VersionPtr>>> by_task;  // task -> model
  for (const VersionPtr& v : versions) {
    if (!v->config.task.empty()) by_task[v->config.task][v->config.name].push_back(v);
  }
  std::vector<TaskDescription> out;
  for (auto& [task, models] : by_task) {
    TaskDescription d;
    d.task = task;
    std::vector<VersionPtr> latest;
    for (auto& [name, vs] : models) {
      std::sort(vs.begin(), vs.end(), [](const VersionPtr& a, const VersionPtr& b) {
        return a->version < b->version;
      });
      latest.push_back(vs.back());
    }
    d.signature = MajoritySignature(latest);
    for (const VersionPtr& v : latest) {
      const auto& vs = models[v->config.name];
      TaskModel m;
      m.name = v->config.name;
      for (const VersionPtr& each : vs) m.versions.push_back(each->version_str);
      m.accuracy = v->config.accuracy.value;
      const TaskSignature own = SignatureOf(v->config);
      if (!SameSignature(own, d.signature)) {
        m.mismatch = SignatureToString(own);
        d.models.push_back(std::move(m));
        continue;
      }
      for (const VariantProfile& p : v->profiles) {
        if (!p.usable) continue;
        ++m.usable_variants;
        const std::optional<double> acc = p.accuracy ? p.accuracy : v->config.accuracy.value;
        if (acc) Widen(d.min_accuracy, d.max_accuracy, *acc);
        for (const HardwareProfile& hp : p.hardware) {
          Widen(d.min_latency_ms, d.max_latency_ms, hp.latency.Predict(1));
        }
      }
      if (v->profiles.empty() && v->config.accuracy.value) {
        Widen(d.min_accuracy, d.max_accuracy, *v->config.accuracy.value);
      }
      d.usable_variants += m.usable_variants;
      d.models.push_back(std::move(m));
    }
    out.push_back(std::move(d));
  }
  return out;
}

Status CheckTaskSignature(const ModelConfig& candidate, const std::vector<VersionPtr>& existing) {
  std::vector<VersionPtr> others;
  for (const VersionPtr& v : existing) {
    if (v->config.task == candidate.task && v->config.name != candidate.name) others.push_back(v);
  }
  if (others.empty()) return Status::Ok();
  const TaskSignature task = MajoritySignature(others);
  const TaskSignature own = SignatureOf(candidate);
  if (SameSignature(task, own)) return Status::Ok();
  return InvalidArgument("model '" + candidate.name + "' does not fit task '" + candidate.task +
                         "': the task's models take " + SignatureToString(task) +
                         " (batched: " + (task.batched ? "yes" : "no") + "), this model takes " +
                         SignatureToString(own) + " (batched: " + (own.batched ? "yes" : "no") +
                         ")");
}

TaskDescription TaskSignatureOf(const std::string& task, const std::vector<VersionPtr>& versions) {
  TaskDescription d;
  d.task = task;
  d.signature = MajoritySignature(versions);
  return d;
}

Status CheckTaskInputs(const TaskDescription& task, const std::vector<Tensor>& inputs) {
  const TaskSignature& s = task.signature;
  auto refuse = [&](const std::string& problem) {
    return InvalidArgument("task '" + task.task + "' takes " + SignatureToString(s) + ": " + problem);
  };
  for (const Tensor& t : inputs) {
    auto spec = std::find_if(s.inputs.begin(), s.inputs.end(),
                             [&](const TensorSpec& x) { return x.name == t.name; });
    if (spec == s.inputs.end()) return refuse("unknown input '" + t.name + "'");
    if (spec->datatype != t.datatype) {
      return refuse("input '" + t.name + "' is " + DataTypeName(t.datatype) + ", not " +
                    DataTypeName(spec->datatype));
    }
    const size_t lead = s.batched ? 1 : 0;
    bool fits = t.shape.size() == spec->shape.size() + lead;
    for (size_t i = 0; fits && i < spec->shape.size(); ++i) {
      fits = spec->shape[i] < 0 || spec->shape[i] == t.shape[i + lead];
    }
    if (!fits) return refuse("input '" + t.name + "' has shape " + ShapeToString(t.shape));
  }
  for (const TensorSpec& spec : s.inputs) {
    const bool given = std::any_of(inputs.begin(), inputs.end(),
                                   [&](const Tensor& t) { return t.name == spec.name; });
    if (!given) return refuse("missing input '" + spec.name + "'");
  }
  return Status::Ok();
}

}  // namespace somm
