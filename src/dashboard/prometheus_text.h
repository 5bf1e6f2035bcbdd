// ParsePrometheusText: the samples of a Prometheus text exposition (format
// 0.0.4), as /metrics serves it. The operator's view (operator_api.h) reads
// somm's own counters through it, so that what the dashboard shows is, by
// construction, what a Prometheus scrape of the same process would see.
//
// Comments (# HELP, # TYPE) are skipped; a timestamp after the value is
// ignored. A line that does not parse is an error naming the line.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace somm::dashboard {

struct PromSample {
  std::string name;  // "somm_inference_request_duration_seconds_bucket"
  std::map<std::string, std::string> labels;
  double value = 0;
};

StatusOr<std::vector<PromSample>> ParsePrometheusText(std::string_view text);

}  // namespace somm::dashboard
