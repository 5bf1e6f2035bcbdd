// bench_cost_queries: task queries one after another over one long-lived
// client, REST or gRPC, each answer's predicted and reported cost as a JSON
// line (bench/cost_agreement.sh drives it, bench/cost_agreement.py reads the
// lines). One client for the whole run, connected before the first query:
// neither protocol's figures carry a process start or a handshake, and no
// process starts between the steps (on a small machine a process start
// evicts the server's caches, and the next few batches then cost several
// times a settled one), so the two protocols are measured alike.
//
// A run is a list of steps, each `--step "TASK BODY N [key=value ...]"`: N
// queries of TASK with the OIP JSON request body in BODY and the values
// (numbers as doubles, true/false as booleans, as `somm infer --param`
// does). Every query asks for the full explanation (somm_explain "full").
// A line: {"i" (the query's index in its step), "step", "variant",
// "hardware", "decision", "batch", "compute_us", "predicted", "reported",
// "measured", "over", "client_us"}; a failed query: {"i", "step", "error"}.
//
// Usage: build/bench/bench_cost_queries --url 127.0.0.1:8001 -i grpc
//          --step "classification/digits digit.json 300 min_accuracy=0.97"
//          [--step ...] [--gap-ms 0] [--out FILE]
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/any_client.h"
#include "frontend/http/oip_json.h"

namespace {

using somm::Parameter;

Parameter ParseValue(const std::string& v) {
  if (v == "true") return true;
  if (v == "false") return false;
  try {
    size_t used = 0;
    const double d = std::stod(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  return v;
}

nlohmann::json ToJson(const Parameter& p) {
  return std::visit([](const auto& v) { return nlohmann::json(v); }, p);
}

}  // namespace

struct Step {
  std::string task;
  somm::InferenceRequest request;
  int queries = 0;
};

// "TASK BODY N [key=value ...]".
somm::StatusOr<Step> ParseStep(const std::string& text) {
  std::istringstream words(text);
  Step step;
  std::string body_file, count;
  if (!(words >> step.task >> body_file >> count)) {
    return somm::InvalidArgument("--step '" + text + "': want TASK BODY N [key=value ...]");
  }
  step.queries = std::atoi(count.c_str());
  std::ifstream in(body_file, std::ios::binary);
  std::stringstream body;
  body << in.rdbuf();
  SOMM_ASSIGN_OR_RETURN(step.request, somm::oip::DecodeInferRequest(body.str(), std::nullopt));
  step.request.parameters["somm_explain"] = std::string("full");
  for (std::string kv; words >> kv;) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return somm::InvalidArgument("--step '" + text + "': " + kv + " is no key=value");
    }
    step.request.parameters[kv.substr(0, eq)] = ParseValue(kv.substr(eq + 1));
  }
  return step;
}

int main(int argc, char** argv) {
  CLI::App app{"Task queries one after another over one client; a JSON line per answer"};
  somm::ClientOptions client_options;
  std::string out_file;
  std::vector<std::string> step_texts;
  double gap_ms = 0;
  bool binary = false;
  app.add_option("--url,-u", client_options.url, "host:port of the server")->required();
  app.add_option("--protocol,-i", client_options.protocol, "http or grpc")
      ->check(CLI::IsMember({"http", "grpc"}));
  app.add_option("--step", step_texts, "\"TASK BODY N [key=value ...]\", in turn")->required();
  app.add_option("--gap-ms", gap_ms, "pause between an answer and the next query");
  app.add_flag("--binary", binary, "REST: binary tensors (default JSON)");
  app.add_option("--out", out_file, "append the lines here (default stdout)");
  CLI11_PARSE(app, argc, argv);

  std::vector<Step> steps;
  for (const std::string& text : step_texts) {
    auto step = ParseStep(text);
    if (!step.ok()) {
      std::fprintf(stderr, "%s\n", step.status().ToString().c_str());
      return 2;
    }
    steps.push_back(std::move(*step));
  }
  auto client = somm::AnyClient::Create(client_options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 2;
  }
  std::ofstream file;
  if (!out_file.empty()) file.open(out_file, std::ios::app);
  std::ostream& out = out_file.empty() ? std::cout : file;

  int failed = 0, sent = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    for (int i = 0; i < steps[s].queries; ++i, ++sent) {
      if (sent > 0 && gap_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
      }
      const auto start = std::chrono::steady_clock::now();
      auto answer = client->InferTask(steps[s].task, steps[s].request, binary);
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      nlohmann::json row = {{"i", i}, {"step", s}};
      if (!answer.ok()) {
        ++failed;
        row["error"] = answer.status().ToString().substr(0, 200);
        out << row.dump() << "\n";
        continue;
      }
      const somm::Parameters& p = answer->parameters;
      auto get = [&p](const char* key) -> nlohmann::json {
        auto it = p.find(key);
        return it == p.end() ? nlohmann::json() : ToJson(it->second);
      };
      row["variant"] = get("somm_variant");
      row["hardware"] = get("somm_hardware");
      row["decision"] = get("somm_decision");
      row["batch"] = get("somm_batch_size");
      row["compute_us"] = get("somm_compute_us");
      row["predicted"] = get("somm_predicted_cost_usd");
      row["reported"] = get("somm_cost_usd");
      row["measured"] = get("somm_measured_cost_usd");
      row["over"] = get("somm_cost_over_reason");
      row["client_us"] = us;
      out << row.dump() << "\n";
    }
  }
  out.flush();
  if (failed > 0) std::fprintf(stderr, "%d of %d queries failed\n", failed, sent);
  return 0;
}
