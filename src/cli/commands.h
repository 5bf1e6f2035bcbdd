// The somm subcommands. apps/somm_main.cc parses flags into these Options
// structs (CLI11) and calls Run*; each returns the process exit code.
#pragma once

#include <string>

namespace somm {

struct ServeOptions {
  std::string model_repository;
  std::string address = "0.0.0.0";
  int http_port = 8000;     // 0 = pick a free port and print it
  int grpc_port = 8001;
  int metrics_port = 8002;
  int64_t max_body_bytes = 64 << 20;  // REST bodies and gRPC messages
  int http_threads = 64;
  std::string device = "auto";        // "auto" (GPU if present), "cpu" or "cuda:N"
  std::string log_level = "info";
};
int RunServe(const ServeOptions& options);

struct ClientOptions {
  std::string url = "127.0.0.1:8000";  // host:port of the REST or gRPC endpoint
  std::string protocol = "http";       // http | grpc
};

struct InferOptions {
  ClientOptions client;
  std::string model;
  std::string version;
  std::string input;  // .json (OIP request body) or .png/.jpg/.jpeg
  int top_k = 3;
  bool binary = false;  // REST binary tensor extension
};
int RunInfer(const InferOptions& options);

int RunModels(const ClientOptions& options);

}  // namespace somm
