// `somm rollout MODEL ...`: starts, steps, promotes or rolls back a model's
// canary through REST or gRPC, or shows it (commands.h).
#include <cstdio>
#include <ctime>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/any_client.h"
#include "cli/commands.h"
#include "rollout/rollout.h"

namespace somm {
namespace {

using nlohmann::json;

std::string Clock(int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

void PrintWindow(const char* side, int64_t version, const VersionWindow& w) {
  std::printf("  %-7s v%-4lld %6lld answered %4lld failed  mean %7.3f ms", side,
              static_cast<long long>(version), static_cast<long long>(w.answered),
              static_cast<long long>(w.failed), w.MeanLatencyMs());
  if (w.accuracy) std::printf("  held-out top-1 %.4f", *w.accuracy);
  if (w.compared > 0) {
    std::printf("  %lld of %lld mirrored answers differ", static_cast<long long>(w.disagreed),
                static_cast<long long>(w.compared));
  }
  std::printf("\n");
}

void Print(const RolloutView& v) {
  const Rollout& r = v.rollout;
  std::printf("model %s: %s canary of version %lld against version %lld: %s, %d%%%s\n",
              r.model.c_str(), ModeName(r.mode), static_cast<long long>(r.canary_version),
              static_cast<long long>(r.stable_version), StateName(r.state), r.percent,
              r.automatic ? "" : " (manual)");
  std::printf("this step (since %s UTC):\n", Clock(r.step_started_unix_ms).c_str());
  PrintWindow("stable", r.stable_version, v.stable);
  PrintWindow("canary", r.canary_version, v.canary);
  std::printf("now: %s\nhistory:\n", r.reason.c_str());
  for (const RolloutEvent& e : r.history) {
    std::printf("  %s  %-11s %3d%%  %s\n", Clock(e.unix_ms).c_str(), e.event.c_str(), e.percent,
                e.reason.c_str());
  }
}

// The change the flags ask for, as REST's body ("" = none: show it).
StatusOr<std::string> ChangeOf(const RolloutOptions& o) {
  const int changes = (o.version.empty() ? 0 : 1) + (o.promote ? 1 : 0) + (o.rollback ? 1 : 0) +
                      (o.set_percent >= 0 ? 1 : 0);
  if (changes > 1) {
    return InvalidArgument("give one of --model-version, --promote, --rollback and --set-percent");
  }
  if (!o.bounds.empty() && o.version.empty()) {
    return InvalidArgument("--bounds goes with --model-version (the canary it starts)");
  }
  json j = json::object();
  if (!o.reason.empty()) j["reason"] = o.reason;
  if (o.promote) {
    j["action"] = "promote";
  } else if (o.rollback) {
    j["action"] = "rollback";
  } else if (o.set_percent >= 0) {
    j["action"] = "set";
    j["percent"] = o.set_percent;
  } else if (!o.version.empty()) {
    j["version"] = o.version;
    if (o.percent >= 0) j["percent"] = o.percent;
    if (o.shadow) j["mode"] = "shadow";
    if (o.manual) j["automatic"] = false;
    if (!o.bounds.empty()) {
      json bounds = json::parse(o.bounds, nullptr, /*allow_exceptions=*/false);
      if (bounds.is_discarded() || !bounds.is_object()) {
        return InvalidArgument("--bounds must be a JSON object, for example "
                               "'{\"max_latency_ratio\": 2}', got '" + o.bounds + "'");
      }
      j["bounds"] = std::move(bounds);
    }
    if (!o.steps.empty()) {
      json steps = json::array();
      std::stringstream in(o.steps);
      std::string step;
      while (std::getline(in, step, ',')) {
        try {
          size_t used = 0;
          steps.push_back(std::stoi(step, &used));
          if (used != step.size()) throw std::invalid_argument(step);
        } catch (const std::exception&) {
          return InvalidArgument("--steps wants numbers separated by commas, got '" + o.steps + "'");
        }
      }
      j["steps"] = steps;
    }
  } else {
    if (o.percent >= 0 || o.shadow || o.manual || !o.steps.empty()) {
      return InvalidArgument("--percent, --shadow, --manual and --steps go with --model-version");
    }
    return std::string();
  }
  return j.dump();
}

}  // namespace

int RunRollout(const RolloutOptions& o) {
  StatusOr<std::string> change = ChangeOf(o);
  if (!change.ok()) {
    std::fprintf(stderr, "error: %s\n", change.status().message().c_str());
    return 2;
  }
  StatusOr<AnyClient> client = AnyClient::Create(o.client);
  if (!client.ok()) {
    std::fprintf(stderr, "error: %s\n", client.status().ToString().c_str());
    return 1;
  }
  StatusOr<std::string> answer = client->Rollout(o.model, *change);
  if (!answer.ok()) {
    std::fprintf(stderr, "error: %s\n", answer.status().ToString().c_str());
    return 1;
  }
  if (o.json) {
    std::printf("%s\n", answer->c_str());
    return 0;
  }
  StatusOr<RolloutView> view = RolloutViewFromJson(*answer);
  if (!view.ok()) {
    std::fprintf(stderr, "error: the server's answer: %s\n", view.status().message().c_str());
    return 1;
  }
  Print(*view);
  return 0;
}

}  // namespace somm
