// bench_response_params: what the decision parameters cost a digits answer.
// Every response carries the router's explanation (somm_variant,
// somm_reason, somm_cost_usd, ... as router.cc's Finish writes them). This
// times, per response, building that map and encoding the answer for REST
// JSON (oip_json.h) and for gRPC (grpc_codec.h, then protobuf's
// serialization), against the same answer with no parameters and with one
// compact string parameter holding the same explanation. Prints µs per
// response (median of --rounds rounds) and the share the parameters take.
//
// Usage: build/bench/bench_response_params [--rounds R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "frontend/grpc/grpc_codec.h"
#include "frontend/http/oip_json.h"
#include "proto/inference.pb.h"
#include "median_us.h"

namespace {

using somm::bench::MedianUs;

somm::InferenceResponse Answer() {
  somm::InferenceResponse r;
  r.model_name = "digits-mlp";
  r.model_version = "1";
  r.id = "q-000123";
  somm::Tensor logits;
  logits.name = "logits";
  logits.datatype = somm::DataType::kFp32;
  logits.shape = {1, 10};
  std::vector<float> v = {-3.1f, 0.2f, 1.7f, 9.4f, -0.8f, 0.05f, -2.2f, 1.1f, 0.9f, -1.4f};
  logits.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  r.outputs.push_back(std::move(logits));
  return r;
}

// The parameters Router::Finish writes for a query the selector placed.
void AddDecision(somm::Parameters& p) {
  p["somm_queue_us"] = int64_t{41};
  p["somm_compute_us"] = int64_t{12};
  p["somm_server_us"] = int64_t{73};
  p["somm_batch_size"] = int64_t{3};
  p["somm_instance"] = int64_t{0};
  p["somm_variant"] = std::string("digits-mlp:1:ts-fp32");
  p["somm_hardware"] = std::string("cpu1");
  p["somm_device"] = std::string("cpu");
  p["somm_decision"] = std::string("loaded");
  p["somm_predicted_latency_ms"] = 0.052;
  p["somm_latency_ms"] = 0.073;
  p["somm_cost_usd"] = 3.1e-10;
  p["somm_predicted_cost_usd"] = 2.9e-10;
  p["somm_reason"] = std::string(
      "cheapest loaded variant meeting min_accuracy=0.9 latency_slo_ms=5: digits-mlp:1:ts-fp32@cpu1 "
      "predicted 0.052 ms, 2.9e-10 USD");
}

// The same explanation as one string parameter.
void AddCompact(somm::Parameters& p) {
  p["somm"] = std::string(
      "loaded digits-mlp:1:ts-fp32@cpu1 instance=0 batch=3 queue_us=41 compute_us=12 server_us=73 "
      "predicted_ms=0.052 cost_usd=3.1e-10 predicted_cost_usd=2.9e-10; cheapest loaded variant "
      "meeting min_accuracy=0.9 latency_slo_ms=5: digits-mlp:1:ts-fp32@cpu1 predicted 0.052 ms, "
      "2.9e-10 USD");
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--rounds R]\n", argv[0]);
      return 2;
    }
  }
  const int calls = 20000;
  const somm::InferenceResponse base = Answer();
  size_t sink = 0;
  auto rest = [&](void (*add)(somm::Parameters&)) {
    return MedianUs(
        [&] {
          somm::InferenceResponse r = base;
          if (add) add(r.parameters);
          auto body = somm::oip::EncodeInferResponse(r, somm::oip::BinaryOutputs(false));
          sink += body.ok() ? body->body.size() : 0;
        },
        rounds, calls);
  };
  auto grpc = [&](void (*add)(somm::Parameters&)) {
    return MedianUs(
        [&] {
          somm::InferenceResponse r = base;
          if (add) add(r.parameters);
          inference::ModelInferResponse out;
          (void)somm::grpc_codec::EncodeInferResponse(std::move(r), &out);
          sink += out.SerializeAsString().size();
        },
        rounds, calls);
  };
  std::printf("%-10s %14s %14s %14s %12s %12s\n", "wire", "none_us", "decision_us", "compact_us",
              "decision+", "compact+");
  for (const char* wire : {"rest_json", "grpc"}) {
    const bool is_rest = std::strcmp(wire, "rest_json") == 0;
    const double none = is_rest ? rest(nullptr) : grpc(nullptr);
    const double full = is_rest ? rest(AddDecision) : grpc(AddDecision);
    const double compact = is_rest ? rest(AddCompact) : grpc(AddCompact);
    std::printf("%-10s %14.3f %14.3f %14.3f %12.3f %12.3f\n", wire, none, full, compact, full - none,
                compact - none);
  }
  return sink == 0 ? 1 : 0;
}
