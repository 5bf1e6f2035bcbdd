// bench_grpc_load: a gRPC load generator for ModelInfer that costs less CPU
// per call than the server it measures, so that a gRPC throughput measured
// on a shared machine is the server's figure and not the client's
// (bench/wire.sh drives it; `somm bench -i grpc` stays the tool for SLO
// attainment, server-side splits and traces).
//
// How: the request is read once from a KServe v2 JSON body (--input, the
// file `somm bench --input` and wrk send), turned into a ModelInferRequest
// whose tensors go as raw_input_contents, and serialised once; every call
// sends those bytes through a GenericStub (a ByteBuffer shares its slice:
// nothing is built, copied or parsed per call). --concurrency calls stay in
// flight, closed loop (each answer starts the next call), over --channels
// HTTP/2 connections (default 1), on one completion queue polled by the main
// thread alone. Answers are counted and timed, not parsed, except the first
// successful one, which must be a ModelInferResponse with an output.
//
// What it measures: a warm-up (--warmup-s, discarded), then one window
// (--duration-s): the calls that complete inside it, each one's latency
// from its start to its completion, and this process's CPU time over the
// window (getrusage: every thread, gRPC's own included) divided by those
// calls, the client's CPU per request.
//
// Usage: build/bench_grpc_load --target HOST:PORT --model M --input BODY.json
//          [--concurrency C] [--duration-s S] [--warmup-s W] [--channels N]
//          [--key K] [--server-pid PID]
// Prints one JSON object (keys: target, model, concurrency, channels,
// window_s, requests, errors, qps, p50_us, p90_us, p99_us, max_us,
// client_cpu_us_per_request, client_cores_busy, server_cpu_us_per_request,
// request_bytes, response_bytes). With --server-pid, the server's CPU time
// (from /proc/PID/stat, clock ticks) over the same window divided by the
// same calls; null without it. Exit status 0 when every call succeeded, 1 when a call
// failed or none completed (the first error on stderr), 2 for
// a bad command line or input.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "proto/inference.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kModelInfer[] = "/inference.GRPCInferenceService/ModelInfer";

struct LoadOptions {
  std::string target;       // host:port of the gRPC server
  std::string model;        // model_name of every call
  std::string input;        // KServe v2 JSON request body
  std::string key;          // "" = no authorization metadata
  int server_pid = 0;       // 0 = none; else its CPU per request is measured too
  int concurrency = 16;     // calls in flight
  int channels = 1;         // HTTP/2 connections the calls are spread over
  double warmup_s = 1.0;    // discarded before the window
  double duration_s = 5.0;  // the measured window
};

// Appends the values of a (possibly nested) JSON "data" array to `out` as
// little-endian T.
template <typename T>
bool AppendValues(const nlohmann::json& data, std::string* out, size_t* count) {
  if (data.is_array()) {
    for (const auto& item : data) {
      if (!AppendValues<T>(item, out, count)) return false;
    }
    return true;
  }
  T value{};
  if constexpr (std::is_same_v<T, uint8_t>) {
    if (data.is_boolean()) {
      value = data.get<bool>() ? 1 : 0;
    } else if (data.is_number()) {
      value = data.get<uint8_t>();
    } else {
      return false;
    }
  } else {
    if (!data.is_number()) return false;
    value = data.get<T>();
  }
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out->append(bytes, sizeof(T));
  ++*count;
  return true;
}

// The ModelInferRequest for `body`'s inputs, or an error message.
std::optional<std::string> BuildRequest(const nlohmann::json& body, const std::string& model,
                                        inference::ModelInferRequest* request) {
  if (!body.contains("inputs") || !body["inputs"].is_array() || body["inputs"].empty()) {
    return "the body has no \"inputs\" array";
  }
  request->set_model_name(model);
  for (const auto& in : body["inputs"]) {
    if (!in.contains("name") || !in.contains("shape") || !in.contains("datatype") ||
        !in.contains("data")) {
      return "every input needs name, shape, datatype and data";
    }
    auto* tensor = request->add_inputs();
    tensor->set_name(in["name"].get<std::string>());
    const std::string type = in["datatype"].get<std::string>();
    tensor->set_datatype(type);
    size_t elements = 1;
    for (const auto& d : in["shape"]) {
      const int64_t dim = d.get<int64_t>();
      if (dim < 0) return "input " + tensor->name() + ": a negative dimension";
      tensor->add_shape(dim);
      elements *= static_cast<size_t>(dim);
    }
    std::string raw;
    size_t count = 0;
    bool ok = false;
    if (type == "FP32") {
      ok = AppendValues<float>(in["data"], &raw, &count);
    } else if (type == "FP64") {
      ok = AppendValues<double>(in["data"], &raw, &count);
    } else if (type == "INT32") {
      ok = AppendValues<int32_t>(in["data"], &raw, &count);
    } else if (type == "INT64") {
      ok = AppendValues<int64_t>(in["data"], &raw, &count);
    } else if (type == "UINT8" || type == "BOOL") {
      ok = AppendValues<uint8_t>(in["data"], &raw, &count);
    } else {
      return "datatype " + type + " is not supported here";
    }
    if (!ok) return "input " + tensor->name() + ": data that is not " + type;
    if (count != elements) {
      return "input " + tensor->name() + ": " + std::to_string(count) + " values for a shape of " +
             std::to_string(elements);
    }
    request->add_raw_input_contents(std::move(raw));
  }
  return std::nullopt;
}

// CPU seconds (user + system, every thread) process `pid` has used so far,
// from /proc/PID/stat; -1 when it cannot be read.
double ProcessCpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double utime = -1, stime = -1;
  // After the name: state is field 3; utime and stime are fields 14 and 15.
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  if (utime < 0 || stime < 0) return -1;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// One call in flight: its context, answer and status live until it completes.
struct Call {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  grpc::Status status;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  Clock::time_point start;
};

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "bench_grpc_load: %s\nusage: bench_grpc_load --target HOST:PORT --model M "
               "--input BODY.json [--concurrency C] [--duration-s S] [--warmup-s W] "
               "[--channels N] [--key K] [--server-pid PID]\n",
               why.c_str());
  return 2;
}

double Percentile(const std::vector<int64_t>& sorted_ns, double p) {
  if (sorted_ns.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted_ns.size())));
  return static_cast<double>(sorted_ns[std::min(sorted_ns.size(), std::max<size_t>(rank, 1)) - 1]) /
         1e3;
}

}  // namespace

int main(int argc, char** argv) {
  LoadOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage("missing value after " + flag);
    const char* value = argv[++i];
    if (flag == "--target") {
      o.target = value;
    } else if (flag == "--model") {
      o.model = value;
    } else if (flag == "--input") {
      o.input = value;
    } else if (flag == "--key") {
      o.key = value;
    } else if (flag == "--server-pid") {
      o.server_pid = std::atoi(value);
    } else if (flag == "--concurrency") {
      o.concurrency = std::atoi(value);
    } else if (flag == "--channels") {
      o.channels = std::atoi(value);
    } else if (flag == "--warmup-s") {
      o.warmup_s = std::atof(value);
    } else if (flag == "--duration-s") {
      o.duration_s = std::atof(value);
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  if (o.target.empty() || o.model.empty() || o.input.empty()) {
    return Usage("--target, --model and --input are required");
  }
  if (o.concurrency < 1 || o.concurrency > 4096) return Usage("--concurrency must be 1 to 4096");
  if (o.channels < 1 || o.channels > o.concurrency) {
    return Usage("--channels must be 1 to the concurrency");
  }
  if (!(o.duration_s > 0) || !(o.warmup_s >= 0)) return Usage("bad --duration-s or --warmup-s");

  std::ifstream file(o.input, std::ios::binary);
  if (!file) return Usage("cannot read " + o.input);
  std::stringstream text;
  text << file.rdbuf();
  const nlohmann::json body =
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Usage(o.input + " is not JSON");
  inference::ModelInferRequest request;
  std::optional<std::string> error;
  try {
    error = BuildRequest(body, o.model, &request);
  } catch (const nlohmann::json::exception& e) {  // a name or shape of the wrong type
    error = e.what();
  }
  if (error) return Usage(o.input + ": " + *error);
  const std::string serialised = request.SerializeAsString();
  grpc::Slice slice(serialised);
  const grpc::ByteBuffer request_bytes(&slice, 1);

  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  for (int i = 0; i < o.channels; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(256 << 20);
    args.SetMaxReceiveMessageSize(256 << 20);
    // A connection per channel, not one subchannel shared by all of them.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stubs.push_back(std::make_unique<grpc::GenericStub>(
        grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args)));
  }

  grpc::CompletionQueue cq;
  const Clock::time_point t0 = Clock::now();
  const auto to_duration = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const Clock::time_point window_from = t0 + to_duration(o.warmup_s);
  const Clock::time_point window_to = window_from + to_duration(o.duration_s);
  // No call outlives the run by more than this, whatever the server does.
  const auto deadline = std::chrono::system_clock::now() +
                        std::chrono::duration_cast<std::chrono::system_clock::duration>(
                            std::chrono::duration<double>(o.warmup_s + o.duration_s + 30));
  int next_stub = 0;
  const auto start_call = [&] {
    auto call = std::make_unique<Call>();
    call->context.set_deadline(deadline);
    if (!o.key.empty()) call->context.AddMetadata("authorization", "Bearer " + o.key);
    call->start = Clock::now();
    call->reader = stubs[static_cast<size_t>(next_stub)]->PrepareUnaryCall(
        &call->context, kModelInfer, request_bytes, &cq);
    next_stub = (next_stub + 1) % o.channels;
    call->reader->StartCall();
    Call* raw = call.release();  // owned by the queue until its tag comes back
    raw->reader->Finish(&raw->response, &raw->status, raw);
  };

  enum class Phase { kWarmup, kWindow, kDraining } phase = Phase::kWarmup;
  int in_flight = 0;
  int64_t errors = 0, window_errors = 0;
  std::string first_error;
  bool answer_checked = false;
  size_t response_bytes = 0;
  std::vector<int64_t> latencies_ns;
  latencies_ns.reserve(1 << 20);
  Clock::time_point measured_from{}, measured_to{};
  double cpu_from = 0, cpu_to = 0, server_cpu_from = -1, server_cpu_to = -1;
  for (int i = 0; i < o.concurrency; ++i, ++in_flight) start_call();
  while (in_flight > 0) {
    void* tag = nullptr;
    bool ok = false;
    // Every call has a deadline, so the queue cannot wait forever.
    if (!cq.Next(&tag, &ok)) break;
    const Clock::time_point now = Clock::now();
    if (phase == Phase::kWarmup && now >= window_from) {
      phase = Phase::kWindow;
      measured_from = now;
      cpu_from = CpuSeconds();
      if (o.server_pid > 0) server_cpu_from = ProcessCpuSeconds(o.server_pid);
    }
    if (phase == Phase::kWindow && now >= window_to) {
      phase = Phase::kDraining;
      measured_to = now;
      cpu_to = CpuSeconds();
      if (o.server_pid > 0) server_cpu_to = ProcessCpuSeconds(o.server_pid);
    }
    std::unique_ptr<Call> call(static_cast<Call*>(tag));
    --in_flight;
    bool good = ok && call->status.ok();
    if (good && !answer_checked) {
      response_bytes = call->response.Length();  // read before parsing drains it
      inference::ModelInferResponse answer;
      grpc::Status parsed =
          grpc::GenericDeserialize<grpc::ProtoBufferReader, inference::ModelInferResponse>(
              &call->response, &answer);
      if (!parsed.ok() || answer.outputs_size() == 0) {
        good = false;
        if (first_error.empty())
          first_error = "the answer is not a ModelInferResponse with an output";
      } else {
        answer_checked = true;
      }
    } else if (!good && first_error.empty()) {
      first_error =
          "code " + std::to_string(call->status.error_code()) + ": " + call->status.error_message();
    }
    if (!good) ++errors;
    // Counted when it completes inside the window, whenever it started.
    if (phase == Phase::kWindow) {
      if (good) {
        latencies_ns.push_back(
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - call->start).count());
      } else {
        ++window_errors;
      }
    }
    if (phase != Phase::kDraining) {
      start_call();
      ++in_flight;
    }
  }
  cq.Shutdown();
  {
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
    }
  }

  const double window_s = std::chrono::duration<double>(measured_to - measured_from).count();
  const int64_t requests = static_cast<int64_t>(latencies_ns.size());
  std::sort(latencies_ns.begin(), latencies_ns.end());
  const double cpu_s = cpu_to - cpu_from;
  const int64_t answered = requests + window_errors;
  nlohmann::json out = {
      {"tool", "bench_grpc_load"},
      {"target", o.target},
      {"model", o.model},
      {"concurrency", o.concurrency},
      {"channels", o.channels},
      {"window_s", window_s},
      {"requests", requests},
      {"errors", window_errors},
      {"qps", window_s > 0 ? static_cast<double>(requests) / window_s : 0.0},
      {"p50_us", Percentile(latencies_ns, 0.50)},
      {"p90_us", Percentile(latencies_ns, 0.90)},
      {"p99_us", Percentile(latencies_ns, 0.99)},
      {"max_us", latencies_ns.empty() ? 0.0 : static_cast<double>(latencies_ns.back()) / 1e3},
      {"client_cpu_us_per_request",
       answered > 0 ? cpu_s * 1e6 / static_cast<double>(answered) : 0.0},
      {"client_cores_busy", window_s > 0 ? cpu_s / window_s : 0.0},
      {"server_cpu_us_per_request",
       (o.server_pid > 0 && server_cpu_from >= 0 && server_cpu_to >= 0 && answered > 0)
           ? nlohmann::json((server_cpu_to - server_cpu_from) * 1e6 / static_cast<double>(answered))
           : nlohmann::json(nullptr)},
      {"request_bytes", serialised.size()},
      {"response_bytes", response_bytes},
  };
  std::printf("%s\n", out.dump().c_str());
  if (!first_error.empty()) {
    std::fprintf(stderr, "bench_grpc_load: %lld calls failed; the first: %s\n",
                 static_cast<long long>(errors), first_error.c_str());
  }
  return (errors > 0 || requests == 0) ? 1 : 0;
}
