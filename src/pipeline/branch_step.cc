#include "pipeline/branch_step.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "pipeline/builtin_steps.h"
#include "pipeline/cascade.h"

namespace somm::pipeline {
namespace {

using SteadyClock = std::chrono::steady_clock;

// What a value may show of itself in an error.
constexpr size_t kMaxValueShown = 64;

std::string Shown(const std::string& value) {
  return value.size() <= kMaxValueShown ? value : value.substr(0, kMaxValueShown) + "...";
}

// One model's query: the model, the rows of the batch it gets (empty:
// all), and its answer.
struct Call {
  size_t model = 0;  // index into step->models
  std::vector<int64_t> rows;
  StatusOr<InferenceResponse> answer = Internal("not answered");
  int64_t us = 0;
};

// Sends every call at once; `finish` runs once, after the last answer.
struct Fan {
  BranchQuery q;
  BranchDone done;
  std::vector<Call> calls;
  std::string head;  // the explanation's start
  std::atomic<size_t> left{0};
};

void Launch(const std::shared_ptr<Fan>& fan, void (*finish)(const std::shared_ptr<Fan>&)) {
  const BoundStep& step = *fan->q.step;
  std::vector<InferenceRequest> requests;
  for (const Call& call : fan->calls) {
    InferenceRequest r = fan->q.base;
    r.model_name = step.models[call.model];
    r.model_version.clear();
    r.task.clear();
    r.inputs.clear();
    r.outputs.clear();  // every output
    const int64_t n = call.rows.empty() ? fan->q.batch : static_cast<int64_t>(call.rows.size());
    for (const Tensor& t : fan->q.inputs) {
      Tensor part;
      if (call.rows.empty()) {
        part = t;
      } else {
        auto gathered = GatherRows(t, call.rows);
        if (!gathered.ok()) return fan->done(gathered.status());
        part = std::move(gathered).value();
      }
      for (const TensorSpec& spec : step.stages[call.model].inputs) {
        if (spec.name == part.name && ElementCount(spec.shape) > 0 &&
            ElementCount(Batched(n, spec.shape)) == ElementCount(part.shape)) {
          part.shape = Batched(n, spec.shape);
        }
      }
      r.inputs.push_back(std::move(part));
    }
    requests.push_back(std::move(r));
  }
  if (fan->q.budget_ms) {
    auto budget = fan->q.budget_ms();
    if (!budget.ok()) return fan->done(budget.status());
    for (auto& r : requests) r.parameters["latency_slo_ms"] = *budget;
  }
  fan->left.store(requests.size());
  const auto t0 = SteadyClock::now();
  for (size_t k = 0; k < requests.size(); ++k) {
    fan->q.inner->Infer(std::move(requests[k]),
                        [fan, k, t0, finish](StatusOr<InferenceResponse> a) {
                          fan->calls[k].answer = std::move(a);
                          fan->calls[k].us = MicrosecondsSince(t0);
                          // The last answer finishes; acq_rel makes every other slot visible to it.
                          if (fan->left.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(fan);
                        });
  }
}

// Each call's answer, or the first error; and the explanation of each.
Status Answers(Fan& fan, std::string* explained) {
  const BoundStep& step = *fan.q.step;
  for (Call& call : fan.calls) {
    const std::string& model = step.models[call.model];
    if (!call.answer.ok()) {
      const Status& s = call.answer.status();
      return Status(s.code(), std::string(StepKindName(step.config.kind)) + " model '" + model +
                                  "': " + s.message());
    }
    *explained +=
        "; " + model + ": model=" + call.answer->model_name + ":" + call.answer->model_version +
        " rows=" +
        std::to_string(call.rows.empty() ? fan.q.batch : static_cast<int64_t>(call.rows.size())) +
        " us=" + std::to_string(call.us);
    if (auto it = call.answer->parameters.find("somm"); it != call.answer->parameters.end()) {
      if (const auto* s = std::get_if<std::string>(&it->second)) *explained += " " + *s;
    }
  }
  return Status::Ok();
}

StatusOr<Tensor*> Output(Call& call, const std::string& name, const std::string& model) {
  for (Tensor& t : call.answer->outputs) {
    if (t.name == name) {
      SOMM_RETURN_IF_ERROR(t.CheckByteSize());
      return &t;
    }
  }
  return Internal("model '" + model + "' gave no output '" + name + "'");
}

void FinishSwitch(const std::shared_ptr<Fan>& fan) {
  const BoundStep& step = *fan->q.step;
  BranchResult result;
  result.explanation = fan->head;
  if (Status s = Answers(*fan, &result.explanation); !s.ok()) return fan->done(s);
  for (const TensorSpec& spec : step.outputs) {
    Tensor merged;
    for (Call& call : fan->calls) {
      auto out = Output(call, spec.name, step.models[call.model]);
      if (!out.ok()) return fan->done(out.status());
      Tensor& t = **out;
      if (call.rows.empty()) {  // the whole batch: as it came
        merged = std::move(t);
        break;
      }
      if (merged.shape.empty()) {
        if (t.shape.empty() || t.shape[0] != static_cast<int64_t>(call.rows.size())) {
          return fan->done(Internal("model '" + step.models[call.model] + "' answered " +
                                    spec.name + " " + ShapeToString(t.shape) + " for " +
                                    std::to_string(call.rows.size()) + " samples"));
        }
        merged.name = t.name;
        merged.datatype = t.datatype;
        merged.shape = t.shape;
        merged.shape[0] = fan->q.batch;
        merged.data.assign(t.data.size() / call.rows.size() * static_cast<size_t>(fan->q.batch),
                           '\0');
      }
      if (Status s = ScatterRows(t, call.rows, &merged); !s.ok()) {
        return fan->done(Internal("model '" + step.models[call.model] + "': " + s.message()));
      }
    }
    result.outputs.push_back(std::move(merged));
  }
  fan->done(std::move(result));
}

// Each sample's value as a case is written.
StatusOr<std::vector<std::string>> SampleValues(const Tensor& t, int64_t batch) {
  std::vector<std::string> values;
  if (t.datatype == DataType::kBytes) {
    SOMM_ASSIGN_OR_RETURN(std::vector<std::string_view> elements, SplitBytes(t));
    for (auto e : elements) values.emplace_back(e);
  } else {
    SOMM_RETURN_IF_ERROR(t.CheckByteSize());
    const size_t size = DataTypeSize(t.datatype);
    for (size_t i = 0; size > 0 && i < t.data.size() / size; ++i) {
      const char* p = t.data.data() + i * size;
      if (t.datatype == DataType::kInt64) {
        int64_t v;
        std::memcpy(&v, p, 8);
        values.push_back(std::to_string(v));
      } else if (t.datatype == DataType::kInt32) {
        int32_t v;
        std::memcpy(&v, p, 4);
        values.push_back(std::to_string(v));
      } else {
        values.push_back(*p ? "true" : "false");
      }
    }
  }
  if (static_cast<int64_t>(values.size()) != batch) {
    return InvalidArgument("input '" + t.name + "' holds " + std::to_string(values.size()) +
                           " values for " + std::to_string(batch) + " samples");
  }
  return values;
}

}  // namespace

std::string ParameterText(const Parameter& p) {
  if (const auto* s = std::get_if<std::string>(&p)) return *s;
  if (const auto* i = std::get_if<int64_t>(&p)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&p)) return *b ? "true" : "false";
  const double d = std::get<double>(p);
  if (d == static_cast<double>(static_cast<int64_t>(d)))
    return std::to_string(static_cast<int64_t>(d));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", d);
  return buf;
}

void RunSwitch(BranchQuery query, BranchDone done) {
  auto fan = std::make_shared<Fan>();
  fan->q = std::move(query);
  fan->done = std::move(done);
  const BoundStep& step = *fan->q.step;
  const SwitchOptions& sw = step.config.switch_;
  std::string cases;
  for (const auto& c : sw.cases) cases += (cases.empty() ? "" : ", ") + c.first;
  auto index_of = [&](const std::string& model) -> StatusOr<size_t> {
    for (size_t k = 0; k < step.models.size(); ++k) {
      if (step.models[k] == model) return k;
    }
    return Internal("switch model '" + model + "' is not bound");
  };
  // The index of the model a value goes to, or why none.
  auto route = [&](const std::string& value, const std::string& what) -> StatusOr<size_t> {
    for (const auto& c : sw.cases) {
      if (c.first == value) return index_of(c.second);
    }
    if (sw.default_model.empty()) {
      return InvalidArgument(what + " is '" + Shown(value) + "', which no case names (cases: " +
                             cases + ") and there is no default");
    }
    return index_of(sw.default_model);
  };
  if (!sw.parameter.empty()) {
    const std::string what = "parameter '" + sw.parameter + "'";
    std::string shown = "(none)";
    StatusOr<size_t> k = Internal("no model");
    if (fan->q.parameter) {
      const std::string value = ParameterText(*fan->q.parameter);
      shown = Shown(value);
      k = route(value, what);
    } else if (!sw.default_model.empty()) {
      k = index_of(sw.default_model);
    } else {
      k = InvalidArgument(what + " is missing (cases: " + cases + ") and there is no default");
    }
    if (!k.ok()) return fan->done(k.status());
    fan->calls.push_back({*k, {}, Internal("not answered"), 0});
    fan->head =
        "switch=parameter:" + sw.parameter + " value=" + shown + " model=" + step.models[*k];
  } else {
    auto values = SampleValues(fan->q.selector, fan->q.batch);
    if (!values.ok()) return fan->done(values.status());
    std::vector<std::vector<int64_t>> rows(step.models.size());
    for (size_t s = 0; s < values->size(); ++s) {
      auto k = route((*values)[s], "sample " + std::to_string(s) + ": input '" + sw.input + "'");
      if (!k.ok()) return fan->done(k.status());
      rows[*k].push_back(static_cast<int64_t>(s));
    }
    fan->head = "switch=input:" + sw.input;
    for (size_t k = 0; k < rows.size(); ++k) {
      if (rows[k].empty()) continue;
      fan->head += " " + step.models[k] + "=" + std::to_string(rows[k].size());
      // One model for every sample: the batch as it is.
      if (static_cast<int64_t>(rows[k].size()) == fan->q.batch) rows[k].clear();
      fan->calls.push_back({k, std::move(rows[k]), Internal("not answered"), 0});
    }
  }
  Launch(fan, FinishSwitch);
}

void RunFanout(BranchQuery query, BranchDone done) {
  auto fan = std::make_shared<Fan>();
  fan->q = std::move(query);
  fan->done = std::move(done);
  const BoundStep& step = *fan->q.step;
  std::string models;
  for (size_t k = 0; k < step.models.size(); ++k) {
    fan->calls.push_back({k, {}, Internal("not answered"), 0});
    models += (k ? "," : "") + step.models[k];
  }
  fan->head = "fanout=" + models + " join=" + JoinName(step.config.fanout.join);
  Launch(fan, [](const std::shared_ptr<Fan>& fan) {
    const BoundStep& step = *fan->q.step;
    BranchResult result;
    result.explanation = fan->head;
    if (Status s = Answers(*fan, &result.explanation); !s.ok()) return fan->done(s);
    const Join join = step.config.fanout.join;
    if (join == Join::kEach) {
      for (Call& call : fan->calls) {
        for (const TensorSpec& spec : step.stages[call.model].outputs) {
          auto out = Output(call, spec.name, step.models[call.model]);
          if (!out.ok()) return fan->done(out.status());
          Tensor t = std::move(**out);
          t.name = step.models[call.model] + "." + spec.name;
          result.outputs.push_back(std::move(t));
        }
      }
      return fan->done(std::move(result));
    }
    const size_t batch = static_cast<size_t>(fan->q.batch);
    for (const TensorSpec& spec : step.outputs) {
      std::vector<const Tensor*> parts;
      for (Call& call : fan->calls) {
        auto out = Output(call, spec.name, step.models[call.model]);
        if (!out.ok()) return fan->done(out.status());
        const Tensor& t = **out;
        if (t.shape.empty() || t.shape[0] != fan->q.batch || t.data.size() % batch != 0) {
          return fan->done(Internal("model '" + step.models[call.model] + "' answered " +
                                    spec.name + " " + ShapeToString(t.shape) + " for " +
                                    std::to_string(batch) + " samples"));
        }
        parts.push_back(&t);
      }
      Tensor joined;
      joined.name = spec.name;
      joined.datatype = parts[0]->datatype;
      joined.shape = Batched(fan->q.batch, spec.shape);
      const size_t row =
          static_cast<size_t>(ElementCount(spec.shape)) * DataTypeSize(joined.datatype);
      if (join == Join::kMean) {
        std::vector<double> sum(row / sizeof(float) * batch, 0);
        for (const Tensor* t : parts) {
          if (t->data.size() != sum.size() * sizeof(float)) {
            return fan->done(
                Internal("the branches answered " + spec.name + " of different sizes"));
          }
          std::vector<float> v(sum.size());
          std::memcpy(v.data(), t->data.data(), t->data.size());
          for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
        }
        std::vector<float> mean(sum.size());
        for (size_t i = 0; i < sum.size(); ++i)
          mean[i] = static_cast<float>(sum[i] / static_cast<double>(parts.size()));
        joined.data.assign(reinterpret_cast<const char*>(mean.data()), mean.size() * sizeof(float));
      } else {
        size_t total = 0;
        for (const Tensor* t : parts) total += t->data.size() / batch;
        if (total != row) {
          return fan->done(Internal("the branches answered " + spec.name + " rows of " +
                                    std::to_string(total) + " bytes together, not " +
                                    std::to_string(row)));
        }
        // The last dimension concatenated: each part's rows of its innermost
        // size, one after another, for every outer index.
        const int64_t inner_rows =
            ElementCount(Batched(fan->q.batch, spec.shape)) / spec.shape.back();
        joined.data.reserve(row * batch);
        for (int64_t r = 0; r < inner_rows; ++r) {
          for (const Tensor* t : parts) {
            const size_t chunk = t->data.size() / static_cast<size_t>(inner_rows);
            joined.data.append(t->data, static_cast<size_t>(r) * chunk, chunk);
          }
        }
      }
      result.outputs.push_back(std::move(joined));
    }
    fan->done(std::move(result));
  });
}

}  // namespace somm::pipeline
