// Trace: the queries a trace-replay run sends, parsed from CSV.
//
// Format: plain comma-separated values (no quoting), a header row, then one
// query per row. Columns, in any order:
//   timestamp_ms    required; arrival offset from the start of the replay in
//                   milliseconds (fractions allowed), non-decreasing
//   model           optional; overrides the model named on the command line
//   task            optional; sent as request parameter "task"
//   latency_slo_ms  optional; sent as request parameter "latency_slo_ms" and
//                   used as this query's SLO for attainment
//   min_accuracy    optional; sent as request parameter "min_accuracy"
//   max_cost        optional; sent as request parameter "max_cost"
// An empty cell means "not given". Blank lines and CRLF line ends are
// accepted. Unknown columns are rejected (a misspelt SLO column would
// otherwise be dropped without a word).
//
// Every error is InvalidArgument naming the source, the line and, for a bad
// cell, the column: "t.csv:7: column 3 (latency_slo_ms): 'fast' is not a number".
//
// Thread-safety: pure function; a Trace is a value.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace somm::loadgen {

struct TraceQuery {
  double timestamp_ms = 0;
  std::string model;  // "" = the command line's model
  std::string task;   // "" = none
  std::optional<double> latency_slo_ms;
  std::optional<double> min_accuracy;
  std::optional<double> max_cost;
  int line = 0;  // 1-based line in the source, for messages
};

struct Trace {
  std::vector<TraceQuery> queries;  // in file order, timestamps non-decreasing
};

// `source` names the text in error messages (usually the file path).
StatusOr<Trace> ParseTraceCsv(std::string_view text, std::string_view source);

// Reads and parses a file.
StatusOr<Trace> LoadTraceCsv(const std::string& path);

}  // namespace somm::loadgen
