// bench_grpc_burst: a burst of concurrent maximum-size hostile gRPC
// ModelInfer calls, the gRPC side of bench/rss_burst.py (which samples the
// server's RSS while this runs). Each call carries `--mb` MB of raw FP32
// contents against a shape of [1,64]: well-formed protobuf whose bytes do not
// match the shape, so a server that reads and decodes it answers
// INVALID_ARGUMENT, one that checks the key first UNAUTHENTICATED, one past
// its byte budget RESOURCE_EXHAUSTED.
//
// With `--mb 0` each call opens and sends no message at all: only a server
// that decides from the metadata answers it before its 10 s deadline (the
// time to a refusal from the key alone).
//
// Usage: build/bench_grpc_burst --target host:port [--bodies 4] [--mb 60]
//          [--key somm_...] [--model digits-mlp] [--input pixels]
// Prints one JSON line: {"codes": [...], "seconds": S, "message_mb": M}, the
// gRPC status code of each call, sorted, and the first message of each code
// on stderr.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proto/inference.grpc.pb.h"

int main(int argc, char** argv) {
  std::string target, key, model = "digits-mlp", input = "pixels";
  int bodies = 4;
  double mb = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--target") {
      target = value;
    } else if (flag == "--bodies") {
      bodies = std::atoi(value);
    } else if (flag == "--mb") {
      mb = std::atof(value);
    } else if (flag == "--key") {
      key = value;
    } else if (flag == "--model") {
      model = value;
    } else if (flag == "--input") {
      input = value;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (target.empty() || bodies < 1 || mb < 0) {
    std::fprintf(stderr, "usage: bench_grpc_burst --target host:port [--bodies N] [--mb M] [--key K]\n");
    return 2;
  }
  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* tensor = request.add_inputs();
  tensor->set_name(input);
  tensor->set_datatype("FP32");
  tensor->add_shape(1);
  tensor->add_shape(64);
  request.add_raw_input_contents(std::string(static_cast<size_t>(mb * 1e6) / 4 * 4, '\0'));

  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(1 << 30);
  std::vector<int> codes(static_cast<size_t>(bodies), -1);
  std::map<int, std::string> messages;
  std::mutex mu;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < bodies; ++i) {
    threads.emplace_back([&, i] {
      // A channel each: one connection per call, as concurrent clients are.
      auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
      auto stub = inference::GRPCInferenceService::NewStub(channel);
      grpc::ClientContext context;
      if (!key.empty()) context.AddMetadata("authorization", "Bearer " + key);
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(mb > 0 ? 300 : 10));
      grpc::Status status;
      if (mb > 0) {
        inference::ModelInferResponse response;
        status = stub->ModelInfer(&context, request, &response);
      } else {
        grpc::GenericStub generic(channel);
        grpc::CompletionQueue cq;
        auto call = generic.PrepareCall(&context, "/inference.GRPCInferenceService/ModelInfer", &cq);
        call->StartCall(reinterpret_cast<void*>(1));
        call->Finish(&status, reinterpret_cast<void*>(2));
        void* tag = nullptr;
        bool ok = false;
        while (cq.Next(&tag, &ok) && tag != reinterpret_cast<void*>(2)) {
        }
        cq.Shutdown();
        while (cq.Next(&tag, &ok)) {
        }
      }
      std::lock_guard lock(mu);
      codes[static_cast<size_t>(i)] = status.error_code();
      messages.emplace(status.error_code(), status.error_message());
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& [code, message] : messages) {
    std::fprintf(stderr, "code %d: %s\n", code, message.substr(0, 200).c_str());
  }
  std::sort(codes.begin(), codes.end());
  std::string list;
  for (int code : codes) list += (list.empty() ? "" : ", ") + std::to_string(code);
  std::printf("{\"codes\": [%s], \"seconds\": %.2f, \"message_mb\": %.1f}\n", list.c_str(),
              seconds, static_cast<double>(request.ByteSizeLong()) / 1e6);
  return 0;
}
