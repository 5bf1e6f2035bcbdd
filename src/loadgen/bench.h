// `somm bench`: a load generator for Open Inference Protocol servers, in the
// spirit of Triton's perf_analyzer. It drives somm, Triton, KServe or a bare
// JSON-only OIP server (it needs only POST /v2/models/{m}/infer and
// GET /v2/health/ready; metadata only for synthetic inputs).
//
// One run measures one or more load points:
//   closed   --concurrency N, or a sweep --concurrency-range START:END[:STEP]
//            (see schedule.h: STEP multiplies, +STEP adds)
//   poisson  --request-rate R: seeded exponential inter-arrival times
//   trace    --trace FILE: one pass over a CSV trace (see trace.h)
// Closed and Poisson points warm up (discarded), then measure windows until
// the last 3 agree within --stability-pct on throughput and p99
// (stability.h), or --max-windows is reached; the row reports the last 3
// windows. A Poisson run with --duration instead measures exactly that long
// (split into windows, all reported). A trace is replayed once, after a
// closed-loop warm-up of each model it names; its row covers the whole
// replay, and it can also write every query (--query-log-file) and a per-second
// timeline (--timeline-file) as CSV (query_log.h); a replay prints its origin on
// the wall clock ("trace: origin unix_s=S.mmm", for tools that line the logs
// up with samples taken elsewhere) and a progress line every 10 s. Latency
// conventions: measurement.h. Report formats: report.h.
//
// RunBench returns the process exit code: 0 when the run completed (even if
// queries failed: errors are part of the result), 1 for bad options or a
// server that cannot be reached or refuses the first probe query.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "loadgen/bench_client.h"
#include "loadgen/report.h"
#include "common/status.h"

namespace somm::loadgen {

struct BenchOptions {
  std::string model;                   // required; a trace row's model wins
  std::string url = "127.0.0.1:8000";  // host:port of the server
  std::string protocol = "http";       // http | grpc

  // The load: at most one of the next four; none means --concurrency 1.
  int concurrency = 0;            // closed loop
  std::string concurrency_range;  // closed-loop sweep
  double request_rate = 0;        // Poisson, queries per second
  std::string trace;              // trace CSV path

  double duration_s = 0;  // Poisson only: measure exactly this long (0 = until stable)
  double warmup_s = 2;    // load before measuring, discarded
  double window_s = 3;    // one measurement window
  double stability_pct = 10;
  int max_windows = 10;
  double slo_ms = 0;  // latency SLO of every query (0 = none; a trace row's own wins)
  // Also send slo_ms with every query, as its latency_slo_ms parameter, so
  // that the server selects, admits and sheds by it (somm's model-less
  // parameter); without it the SLO only judges the answers.
  bool send_slo = false;

  std::string input;       // OIP REST request body (.json); "" = synthetic from metadata
  // A file whose bytes fill the model's one BYTES input, one element per
  // sample (an encoded image for a pipeline); sent binary on REST, as JSON
  // strings cannot carry arbitrary bytes. "" = none.
  std::string input_bytes;
  int64_t batch_size = 1;  // samples per query
  bool binary = false;     // REST: binary tensor extension (the default is JSON)
  // Every query's API key ("" = SOMM_API_KEY, if set) and, for gRPC, TLS
  // toward the server (docs/security.md).
  std::string api_key;
  crypto::TlsClientFiles tls;
  int senders = 64;        // open-loop sender threads (one connection each)
  uint64_t seed = 1;       // Poisson schedule and synthetic inputs
  double time_scale = 1;   // trace: replay X times faster (offsets divided by X)

  std::string label;      // names the target in the report; "" = the URL
  std::string json_path;  // write the JSON report here; "" = none
  // Trace only (query_log.h): every query, and per (second, model) counts.
  std::string query_log_path;  // "" = none
  std::string timeline_path;   // "" = none
};

// Checks the options alone (no I/O): InvalidArgument naming the flag.
Status ValidateBenchOptions(const BenchOptions& options);

// Runs the measurement against whatever `factory` connects to, printing one
// progress line per window to `progress`. The seam for tests.
StatusOr<BenchReport> MeasureBench(const BenchOptions& options, ClientFactory& factory,
                                   std::ostream& progress);

// The subcommand: validate, connect, measure, print the table to stdout,
// write --json-file.
int RunBench(const BenchOptions& options);

}  // namespace somm::loadgen
