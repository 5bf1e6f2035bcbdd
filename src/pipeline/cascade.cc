#include "pipeline/cascade.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "pipeline/builtin_steps.h"

namespace somm::pipeline {
namespace {

// The answering stage of sample `s` under `threshold`: the first stage
// confident enough, else the last.
size_t AnsweringStage(const std::vector<std::vector<double>>& confidence, size_t s,
                      double threshold) {
  size_t k = 0;
  while (k < confidence.size() && confidence[k][s] < threshold) ++k;
  return k;
}

CascadeFigures Figures(const std::vector<size_t>& stage_of,
                       const std::vector<std::vector<bool>>& correct, double threshold) {
  CascadeFigures f;
  f.threshold = threshold;
  const size_t stages = correct.size();
  const size_t n = stage_of.size();
  f.answered.assign(stages, 0);
  int64_t right = 0;
  for (size_t s = 0; s < n; ++s) {
    ++f.answered[stage_of[s]];
    if (correct[stage_of[s]][s]) ++right;
  }
  f.accuracy = n == 0 ? 0 : static_cast<double>(right) / static_cast<double>(n);
  f.reach.assign(stages, 0);
  int64_t beyond = static_cast<int64_t>(n);
  for (size_t k = 0; k < stages; ++k) {
    f.reach[k] = n == 0 ? 0 : static_cast<double>(beyond) / static_cast<double>(n);
    beyond -= f.answered[k];
  }
  return f;
}

}  // namespace

const char* ConfidenceName(Confidence on) {
  return on == Confidence::kMargin ? "margin" : "top_probability";
}

int64_t Argmax(const float* row, int64_t classes) {
  int64_t best = 0;
  for (int64_t c = 1; c < classes; ++c) {
    if (row[c] > row[best]) best = c;
  }
  return best;
}

std::vector<double> Confidences(Confidence on, const float* logits, int64_t rows, int64_t classes) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(rows, 0)));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * classes;
    double top = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c) top = std::max(top, static_cast<double>(row[c]));
    if (!std::isfinite(top)) {
      out.push_back(0);  // NaN or infinite logits: never confident
      continue;
    }
    double sum = 0, first = 0, second = 0;
    for (int64_t c = 0; c < classes; ++c) {
      const double e = std::exp(static_cast<double>(row[c]) - top);
      sum += e;
      if (e > first) {
        second = first;
        first = e;
      } else if (e > second) {
        second = e;
      }
    }
    // A tie for the top counts as a margin of 0 (the second equals the first).
    const double p1 = first / sum;
    const double conf = on == Confidence::kMargin ? p1 - second / sum : p1;
    out.push_back(std::isfinite(conf) ? conf : 0);
  }
  return out;
}

CascadeFigures EvaluateThreshold(const std::vector<std::vector<double>>& confidence,
                                 const std::vector<std::vector<bool>>& correct, double threshold) {
  const size_t n = correct.empty() ? 0 : correct[0].size();
  std::vector<size_t> stage_of(n);
  for (size_t s = 0; s < n; ++s) stage_of[s] = AnsweringStage(confidence, s, threshold);
  return Figures(stage_of, correct, threshold);
}

StatusOr<CascadeFigures> ChooseThreshold(const std::vector<std::vector<double>>& confidence,
                                         const std::vector<std::vector<bool>>& correct,
                                         double min_accuracy) {
  if (correct.size() < 2 || confidence.size() != correct.size() - 1) {
    return InvalidArgument(
        "a cascade needs two stages or more, and a confidence per stage but the last");
  }
  const size_t n = correct[0].size();
  if (n == 0) return InvalidArgument("no validation samples");
  for (const auto& row : correct) {
    if (row.size() != n) return InvalidArgument("the stages were scored on different samples");
  }
  for (const auto& row : confidence) {
    if (row.size() != n) return InvalidArgument("the stages were scored on different samples");
  }
  // Sweep the threshold up through every confidence: when it passes a
  // stage's confidence in a sample, that stage no longer answers it, and
  // the sample moves on to its next stage not yet passed (or the last).
  struct Event {
    double value;
    size_t stage, sample;
  };
  std::vector<Event> events;
  events.reserve(n * confidence.size());
  for (size_t k = 0; k < confidence.size(); ++k) {
    for (size_t s = 0; s < n; ++s) events.push_back({confidence[k][s], k, s});
  }
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.value < b.value; });
  const size_t last = correct.size() - 1;
  std::vector<size_t> stage_of(n, 0);
  std::vector<std::vector<bool>> passed(confidence.size(), std::vector<bool>(n, false));
  int64_t right = 0;
  for (size_t s = 0; s < n; ++s) right += correct[0][s] ? 1 : 0;
  const auto meets = [&](int64_t r) {
    return static_cast<double>(r) >= min_accuracy * static_cast<double>(n) - 1e-9;
  };
  // Below every confidence, nothing goes on.
  double threshold = std::min(0.0, events.empty() ? 0.0 : events.front().value);
  if (meets(right)) return EvaluateThreshold(confidence, correct, threshold);
  for (size_t e = 0; e < events.size();) {
    const double value = events[e].value;
    for (; e < events.size() && events[e].value == value; ++e) {
      const Event& ev = events[e];
      passed[ev.stage][ev.sample] = true;
      if (stage_of[ev.sample] != ev.stage) continue;
      size_t k = ev.stage + 1;
      while (k < last && passed[k][ev.sample]) ++k;
      right += (correct[k][ev.sample] ? 1 : 0) - (correct[ev.stage][ev.sample] ? 1 : 0);
      stage_of[ev.sample] = k;
    }
    if (!meets(right)) continue;
    // Every confidence up to `value` is now below the threshold, the next
    // one is not: cut halfway between them.
    if (e < events.size()) {
      threshold = value + (events[e].value - value) / 2;
      if (!(threshold > value)) threshold = events[e].value;
    } else {
      threshold = std::nextafter(value, std::numeric_limits<double>::infinity());
    }
    return Figures(stage_of, correct, threshold);
  }
  return FailedPrecondition("no threshold meets min_accuracy " + std::to_string(min_accuracy) +
                            ": sending every sample to the last stage scores " +
                            std::to_string(static_cast<double>(right) / static_cast<double>(n)));
}

std::vector<int64_t> Escalated(const std::vector<double>& confidence, double threshold) {
  std::vector<int64_t> rows;
  for (size_t s = 0; s < confidence.size(); ++s) {
    if (confidence[s] < threshold) rows.push_back(static_cast<int64_t>(s));
  }
  return rows;
}

StatusOr<Tensor> GatherRows(const Tensor& batch, const std::vector<int64_t>& rows) {
  if (batch.shape.empty() || batch.shape[0] < 0)
    return InvalidArgument("a tensor without a batch dimension");
  const int64_t n = batch.shape[0];
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n || (i > 0 && rows[i] <= rows[i - 1])) {
      return InvalidArgument("row indices must ascend within the batch");
    }
  }
  Tensor out;
  out.name = batch.name;
  out.datatype = batch.datatype;
  out.shape = batch.shape;
  out.shape[0] = static_cast<int64_t>(rows.size());
  if (batch.datatype == DataType::kBytes) {
    SOMM_ASSIGN_OR_RETURN(std::vector<std::string_view> elements, SplitBytes(batch));
    if (n == 0 || elements.size() % static_cast<size_t>(n) != 0) {
      return InvalidArgument("BYTES elements do not split into the batch's rows");
    }
    const size_t per_row = elements.size() / static_cast<size_t>(n);
    std::vector<std::string> picked;
    for (int64_t r : rows) {
      for (size_t j = 0; j < per_row; ++j)
        picked.emplace_back(elements[static_cast<size_t>(r) * per_row + j]);
    }
    out.data = JoinBytes(picked);
    return out;
  }
  SOMM_RETURN_IF_ERROR(batch.CheckByteSize());
  const size_t row_bytes = n == 0 ? 0 : batch.data.size() / static_cast<size_t>(n);
  out.data.reserve(row_bytes * rows.size());
  for (int64_t r : rows) out.data.append(batch.data, static_cast<size_t>(r) * row_bytes, row_bytes);
  return out;
}

Status ScatterRows(const Tensor& part, const std::vector<int64_t>& rows, Tensor* into) {
  if (part.datatype != into->datatype || part.datatype == DataType::kBytes) {
    return InvalidArgument("rows of a different datatype");
  }
  SOMM_RETURN_IF_ERROR(part.CheckByteSize());
  SOMM_RETURN_IF_ERROR(into->CheckByteSize());
  if (part.shape.empty() || into->shape.empty() ||
      part.shape[0] != static_cast<int64_t>(rows.size()) || into->shape[0] <= 0) {
    return InvalidArgument("the rows do not match the batch");
  }
  const size_t row_bytes = into->data.size() / static_cast<size_t>(into->shape[0]);
  if (part.data.size() != row_bytes * rows.size()) {
    return InvalidArgument("rows of " +
                           std::to_string(rows.empty() ? 0 : part.data.size() / rows.size()) +
                           " bytes where the batch has rows of " + std::to_string(row_bytes));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= into->shape[0]) return InvalidArgument("a row outside the batch");
    std::memcpy(into->data.data() + static_cast<size_t>(rows[i]) * row_bytes,
                part.data.data() + i * row_bytes, row_bytes);
  }
  return Status::Ok();
}

}  // namespace somm::pipeline
