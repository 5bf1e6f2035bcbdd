// somm: one binary, one subcommand per job. Flags follow Triton's names where
// Triton has them (--model-repository, --http-port, --grpc-port, --metrics-port).
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"somm: managed, model-less inference serving"};
  app.require_subcommand(1);

  somm::ServeOptions serve;
  auto* serve_cmd = app.add_subcommand("serve", "Serve a model repository over REST and gRPC "
                                                "(Open Inference Protocol v2)");
  serve_cmd->add_option("--model-repository,--repo", serve.model_repository,
                        "Model repository folder")->required();
  serve_cmd->add_option("--address", serve.address, "Address to listen on")->capture_default_str();
  serve_cmd->add_option("--http-port", serve.http_port, "REST port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--grpc-port", serve.grpc_port, "gRPC port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--metrics-port", serve.metrics_port, "Prometheus port (0 = pick a free one)")
      ->capture_default_str()->check(CLI::Range(0, 65535));
  serve_cmd->add_option("--max-body-bytes", serve.max_body_bytes,
                        "Largest REST body or gRPC message accepted")
      ->capture_default_str()->check(CLI::Range(int64_t{1024}, int64_t{1} << 30));
  serve_cmd->add_option("--http-threads", serve.http_threads,
                        "REST worker threads (concurrent keep-alive connections)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  serve_cmd->add_option("--device", serve.device, "auto (a GPU when libtorch has CUDA and one is present), cpu or cuda:N")->capture_default_str();
  serve_cmd->add_option("--log-level", serve.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();

  somm::InferOptions infer;
  auto* infer_cmd = app.add_subcommand("infer", "Send one query and print the result");
  infer_cmd->add_option("model", infer.model, "Model name")->required();
  infer_cmd->add_option("input", infer.input,
                        "A JSON request body (OIP v2) or an image (.png/.jpg) that is "
                        "preprocessed per the model's config")->required()->check(CLI::ExistingFile);
  infer_cmd->add_option("--url,-u", infer.client.url, "host:port of the server")->capture_default_str();
  infer_cmd->add_option("--protocol,-i", infer.client.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));
  infer_cmd->add_option("--model-version", infer.version, "Version (default: latest)");
  infer_cmd->add_option("--top-k", infer.top_k, "Classes to show for classifiers")->capture_default_str();
  infer_cmd->add_flag("--binary", infer.binary, "REST: use the binary tensor data extension");

  somm::ClientOptions models;
  auto* models_cmd = app.add_subcommand("models", "List the server's model repository and status");
  models_cmd->add_option("--url,-u", models.url, "host:port of the server")->capture_default_str();
  models_cmd->add_option("--protocol,-i", models.protocol, "http or grpc")
      ->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));

  CLI11_PARSE(app, argc, argv);
  if (serve_cmd->parsed()) return somm::RunServe(serve);
  if (infer_cmd->parsed()) return somm::RunInfer(infer);
  if (models_cmd->parsed()) return somm::RunModels(models);
  return 1;
}
