#include "pipeline/cascade_step.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>

#include "variants/validation_data.h"

namespace somm::pipeline {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

// What calibration may hold: the validation set's scores, per stage.
constexpr int64_t kMaxCalibrationScores = int64_t{1} << 26;

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Where(const BoundStep& step) {
  return "steps[" + std::to_string(step.config.index_in_file) + "] (step '" + step.config.name +
         "').cascade";
}

Status Field(StatusCode code, const std::string& field, const std::string& problem) {
  return Status(code, "field '" + field + "': " + problem);
}

// A stage's scores for `rows` samples, checked: FP32, rows x classes.
StatusOr<const Tensor*> StageScores(const InferenceResponse& r, const BoundStep& step, size_t k,
                                    int64_t rows) {
  const std::string& name = step.stages[k].outputs[0].name;
  for (const Tensor& t : r.outputs) {
    if (t.name != name) continue;
    if (t.datatype != DataType::kFp32 ||
        t.data.size() != static_cast<size_t>(rows * step.classes) * sizeof(float)) {
      return Internal("stage '" + step.config.cascade.models[k] + "' answered " + name + " as " +
                      DataTypeName(t.datatype) + " " + ShapeToString(t.shape) + " for " +
                      std::to_string(rows) + " samples of " + std::to_string(step.classes) +
                      " classes");
    }
    return &t;
  }
  return Internal("stage '" + step.config.cascade.models[k] + "' gave no output '" + name + "'");
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
  return v;
}

// One query to `inner`, waited for.
StatusOr<InferenceResponse> InferAndWait(InferenceServer& inner, InferenceRequest r,
                                         std::chrono::seconds timeout) {
  auto promise = std::make_shared<std::promise<StatusOr<InferenceResponse>>>();
  auto future = promise->get_future();
  inner.Infer(std::move(r),
              [promise](StatusOr<InferenceResponse> got) { promise->set_value(std::move(got)); });
  if (future.wait_for(timeout) != std::future_status::ready) {
    return DeadlineExceeded("no answer within " + std::to_string(timeout.count()) + " s");
  }
  return future.get();
}

std::string Describe(const BoundStep& step, const CascadeFigures& f, int64_t count,
                     const std::string& source) {
  const CascadeOptions& c = step.config.cascade;
  std::string s = "threshold=" + Fixed(step.threshold, 6) + " confidence=" + ConfidenceName(c.on) +
                  " validation_accuracy=" + Fixed(f.accuracy, 4);
  for (size_t k = 1; k < f.reach.size(); ++k) {
    s += " reached_" + c.models[k] + "=" + Fixed(f.reach[k], 4);
  }
  s += " validation_count=" + std::to_string(count) + " validation=" + source;
  if (c.min_accuracy) {
    s += " min_accuracy=" + Fixed(*c.min_accuracy, 4);
  } else {
    s += " (threshold given)";
  }
  return s;
}

}  // namespace

StatusOr<std::string> CalibrateCascade(InferenceServer& inner, const std::string& repository,
                                       BoundStep* step, std::chrono::seconds timeout) {
  const CascadeOptions& c = step->config.cascade;
  const std::string where = Where(*step);
  const StepSignature& first = step->stages.front();
  const std::string version = first.versions.empty() ? "1" : first.versions.back();
  const std::string source = c.models.front() + "/" + version + "/validation";
  auto loaded = LoadValidationData((fs::path(repository) / source).string());
  if (!loaded.ok()) return Field(StatusCode::kInvalidArgument, where, loaded.status().message());
  if (!loaded->has_value()) {
    if (c.threshold) {
      step->threshold = *c.threshold;
      return "threshold=" + Fixed(*c.threshold, 6) + " confidence=" + ConfidenceName(c.on) +
             " (threshold given; no validation data under " + source + ")";
    }
    return Field(
        StatusCode::kFailedPrecondition, where + ".min_accuracy",
        "no validation data under " + source + " to choose the threshold on (or give threshold:)");
  }
  const ValidationData& data = **loaded;
  if (data.count * step->classes * static_cast<int64_t>(c.models.size()) > kMaxCalibrationScores) {
    return Field(StatusCode::kInvalidArgument, where,
                 source + " holds too many samples to calibrate on");
  }
  const size_t sample_bytes =
      static_cast<size_t>(ElementCount(data.sample_shape)) * DataTypeSize(data.datatype);
  std::vector<std::vector<double>> confidence;
  std::vector<std::vector<bool>> correct(c.models.size());
  for (size_t k = 0; k < c.models.size(); ++k) {
    const StepSignature& sig = step->stages[k];
    const std::string stage = where + ".models[" + std::to_string(k) + "]";
    if (sig.inputs.size() != 1 || sig.inputs[0].name != data.input ||
        sig.inputs[0].datatype != data.datatype ||
        ElementCount(sig.inputs[0].shape) != ElementCount(data.sample_shape)) {
      return Field(StatusCode::kInvalidArgument, stage,
                   "model '" + c.models[k] + "' does not take " + source + " (one input '" +
                       data.input + "', " + DataTypeName(data.datatype) + " " +
                       ShapeToString(data.sample_shape) + ")");
    }
    const int64_t per_query = sig.max_batch_size > 0 ? sig.max_batch_size : 1;
    std::vector<double> conf;
    for (int64_t start = 0; start < data.count; start += per_query) {
      const int64_t n = std::min(per_query, data.count - start);
      InferenceRequest r;
      r.model_name = c.models[k];
      r.id = "cascade-calibration";
      Tensor in;
      in.name = data.input;
      in.datatype = data.datatype;
      in.shape = Batched(n, sig.inputs[0].shape);
      in.data = data.inputs.substr(static_cast<size_t>(start) * sample_bytes,
                                   static_cast<size_t>(n) * sample_bytes);
      r.inputs.push_back(std::move(in));
      r.outputs.push_back({sig.outputs[0].name, {}});
      auto answer = InferAndWait(inner, std::move(r), timeout);
      if (!answer.ok()) {
        return Field(answer.status().code(), stage,
                     "on " + source + ": " + answer.status().message());
      }
      auto scores = StageScores(*answer, *step, k, n);
      if (!scores.ok()) return Field(StatusCode::kInternal, stage, scores.status().message());
      const std::vector<float> logits = Floats(**scores);
      for (int64_t s = 0; s < n; ++s) {
        const int64_t label = data.labels[static_cast<size_t>(start + s)];
        correct[k].push_back(Argmax(logits.data() + s * step->classes, step->classes) == label);
      }
      if (k + 1 < c.models.size()) {
        const auto part = Confidences(c.on, logits.data(), n, step->classes);
        conf.insert(conf.end(), part.begin(), part.end());
      }
    }
    if (k + 1 < c.models.size()) confidence.push_back(std::move(conf));
  }
  step->stage_accuracy.clear();
  for (const auto& right : correct) {
    const auto n = std::count(right.begin(), right.end(), true);
    step->stage_accuracy.push_back(static_cast<double>(n) / static_cast<double>(data.count));
  }
  if (c.threshold) {
    step->threshold = *c.threshold;
    const CascadeFigures f = EvaluateThreshold(confidence, correct, *c.threshold);
    step->validation_accuracy = f.accuracy;
    step->validation_reach = f.reach;
    return Describe(*step, f, data.count, source);
  }
  auto chosen = ChooseThreshold(confidence, correct, *c.min_accuracy);
  if (!chosen.ok()) {
    return Field(chosen.status().code(), where + ".min_accuracy",
                 "on " + source + ", " + chosen.status().message());
  }
  step->threshold = chosen->threshold;
  step->validation_accuracy = chosen->accuracy;
  step->validation_reach = chosen->reach;
  return Describe(*step, *chosen, data.count, source);
}

namespace {

// One query's cascade, from stage to stage.
struct CascadeRun {
  CascadeQuery q;
  std::function<void(StatusOr<CascadeResult>)> done;
  SteadyClock::time_point start = SteadyClock::now();
  Tensor scores;               // [batch, classes...], merged
  std::vector<int64_t> stage;  // per sample: the stage that answered
  std::vector<int64_t> rows;   // the samples the current stage gets
  std::string stages_explained;

  void Fail(const std::string& model, const Status& s) {
    done(Status(s.code(), "cascade stage '" + model + "': " + s.message()));
  }
};

void Finish(const std::shared_ptr<CascadeRun>& run) {
  const BoundStep& step = *run->q.step;
  CascadeResult result;
  Tensor stage;
  stage.name = "stage";
  stage.datatype = DataType::kInt64;
  stage.shape = {run->q.batch, 1};
  stage.data.assign(reinterpret_cast<const char*>(run->stage.data()),
                    run->stage.size() * sizeof(int64_t));
  std::string answered;
  std::vector<int64_t> counts(step.stages.size(), 0);
  for (int64_t k : run->stage) {
    answered += (answered.empty() ? "" : ",") + std::to_string(k);
    ++counts[static_cast<size_t>(k)];
  }
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - run->start);
  std::string models;
  for (const auto& m : step.config.cascade.models) models += (models.empty() ? "" : ",") + m;
  result.explanation = "cascade=" + models + " us=" + std::to_string(us.count()) +
                       " threshold=" + Fixed(step.threshold, 6) +
                       " confidence=" + ConfidenceName(step.config.cascade.on);
  // What the threshold was calibrated to, beside what this query did.
  if (step.validation_accuracy >= 0) {
    result.explanation += " validation_accuracy=" + Fixed(step.validation_accuracy, 4);
    for (size_t k = 1; k < step.validation_reach.size(); ++k) {
      result.explanation += " validation_reached_" + step.config.cascade.models[k] + "=" +
                            Fixed(step.validation_reach[k], 4);
    }
  }
  result.explanation += " answered_by=" + answered;
  int64_t beyond = run->q.batch;
  for (size_t k = 1; k < counts.size(); ++k) {
    beyond -= counts[k - 1];
    result.explanation += " reached_" + step.config.cascade.models[k] + "=" +
                          std::to_string(beyond) + "/" + std::to_string(run->q.batch);
  }
  result.explanation += run->stages_explained;
  result.outputs.push_back(std::move(run->scores));
  result.outputs.push_back(std::move(stage));
  run->done(std::move(result));
}

void RunStage(const std::shared_ptr<CascadeRun>& run, size_t k) {
  const BoundStep& step = *run->q.step;
  const std::string& model = step.config.cascade.models[k];
  InferenceRequest r = run->q.base;
  r.model_name = model;
  r.model_version.clear();
  r.task.clear();
  r.inputs.clear();
  r.outputs = {{step.stages[k].outputs[0].name, {}}};
  if (k < run->q.stage_min_accuracy.size())
    r.parameters["min_accuracy"] = run->q.stage_min_accuracy[k];
  const bool all = k == 0;
  const int64_t n = static_cast<int64_t>(run->rows.size());
  for (const Tensor& t : run->q.inputs) {
    Tensor part;
    if (all) {
      part = t;
    } else {
      auto gathered = GatherRows(t, run->rows);
      if (!gathered.ok()) return run->Fail(model, gathered.status());
      part = std::move(gathered).value();
    }
    // Each stage gets the sample shape it takes (same values, a reshape).
    for (const TensorSpec& spec : step.stages[k].inputs) {
      if (spec.name == part.name && ElementCount(spec.shape) > 0 &&
          ElementCount(Batched(n, spec.shape)) == ElementCount(part.shape)) {
        part.shape = Batched(n, spec.shape);
      }
    }
    r.inputs.push_back(std::move(part));
  }
  if (run->q.budget_ms) {
    auto budget = run->q.budget_ms();
    if (!budget.ok()) return run->done(budget.status());
    r.parameters["latency_slo_ms"] = *budget;
  }
  const auto t0 = SteadyClock::now();
  run->q.inner->Infer(std::move(r), [run, k, n, t0](StatusOr<InferenceResponse> answer) {
    const BoundStep& step = *run->q.step;
    const std::string& model = step.config.cascade.models[k];
    if (!answer.ok()) return run->Fail(model, answer.status());
    auto scores = StageScores(*answer, step, k, n);
    if (!scores.ok()) return run->Fail(model, scores.status());
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - t0);
    run->stages_explained += "; stage" + std::to_string(k) + ": model=" + answer->model_name + ":" +
                             answer->model_version + " rows=" + std::to_string(n) +
                             " us=" + std::to_string(us.count());
    if (auto it = answer->parameters.find("somm"); it != answer->parameters.end()) {
      if (const auto* s = std::get_if<std::string>(&it->second)) run->stages_explained += " " + *s;
    }
    const Tensor& got = **scores;
    for (int64_t row : run->rows) run->stage[static_cast<size_t>(row)] = static_cast<int64_t>(k);
    if (k == 0) {
      run->scores = got;
      run->scores.shape = Batched(run->q.batch, step.outputs[0].shape);
    } else if (Status s = ScatterRows(got, run->rows, &run->scores); !s.ok()) {
      return run->Fail(model, s);
    }
    if (k + 1 == step.stages.size()) return Finish(run);
    const std::vector<float> logits = Floats(got);
    const auto conf = Confidences(step.config.cascade.on, logits.data(), n, step.classes);
    std::vector<int64_t> next;
    for (int64_t i : Escalated(conf, step.threshold))
      next.push_back(run->rows[static_cast<size_t>(i)]);
    if (next.empty()) return Finish(run);
    run->rows = std::move(next);
    RunStage(run, k + 1);
  });
}

}  // namespace

void RunCascade(CascadeQuery query, std::function<void(StatusOr<CascadeResult>)> done) {
  auto run = std::make_shared<CascadeRun>();
  run->q = std::move(query);
  run->done = std::move(done);
  run->stage.assign(static_cast<size_t>(run->q.batch), 0);
  run->rows.resize(static_cast<size_t>(run->q.batch));
  for (int64_t i = 0; i < run->q.batch; ++i) run->rows[static_cast<size_t>(i)] = i;
  RunStage(run, 0);
}

}  // namespace somm::pipeline
