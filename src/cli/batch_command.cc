// `somm batch submit|status|cancel` (commands.h): offline batch jobs over
// REST (/v2/somm/batch) or gRPC (SommControl/OperatorCall, the same paths),
// with a progress bar for --watch.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "batch/batch_jobs.h"
#include "cli/any_client.h"
#include "cli/commands.h"

namespace somm {
namespace {

using nlohmann::json;

std::string Bar(const BatchJobStatus& s) {
  const int width = 30;
  const double share = s.total > 0 ? static_cast<double>(s.Done()) / static_cast<double>(s.total) : 0;
  const int filled = static_cast<int>(share * width);
  std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
  char line[256];
  const double left = s.total - s.Done();
  std::snprintf(line, sizeof line, "%s %5.1f%% %lld/%lld items, %lld failed, %.1f items/s%s", bar.c_str(),
                100 * share, static_cast<long long>(s.Done()), static_cast<long long>(s.total),
                static_cast<long long>(s.failed), s.items_per_s,
                s.items_per_s > 0 && s.state == "RUNNING"
                    ? (", eta " + std::to_string(static_cast<int64_t>(left / s.items_per_s)) + " s").c_str()
                    : "");
  return line;
}

void PrintRow(const BatchJobStatus& s) {
  const std::string target = s.spec.model.empty() ? "task " + s.spec.task : s.spec.model;
  std::printf("%-17s %-10s %-24s %s\n", s.id.c_str(), s.state.c_str(), target.c_str(), Bar(s).c_str());
}

}  // namespace

int RunBatch(const BatchOptions& o) {
  StatusOr<AnyClient> made = AnyClient::Create(o.client);
  if (!made.ok()) {
    std::fprintf(stderr, "error: %s\n", made.status().message().c_str());
    return 2;
  }
  AnyClient& client = *made;
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  };
  std::string id = o.id;
  if (o.action == "submit") {
    if (o.model.empty() == o.task.empty()) {
      std::fprintf(stderr, "error: give one of --model and --task\n");
      return 2;
    }
    // Paths on the server, in this key's batch folder there (relative to
    // it, or absolute inside it): sent as given.
    json body = {{"input", o.input}, {"output", o.output}, {"concurrency", o.concurrency}};
    if (!o.model.empty()) body["model"] = o.model;
    if (!o.version.empty()) body["version"] = o.version;
    if (!o.task.empty()) body["task"] = o.task;
    json params = json::object();
    if (o.min_accuracy >= 0) params["min_accuracy"] = o.min_accuracy;
    if (o.max_cost >= 0) params["max_cost"] = o.max_cost;
    if (!params.empty()) body["parameters"] = params;
    StatusOr<std::string> answer = client.PostBody("/v2/somm/batch", body.dump());
    if (!answer.ok()) return fail(answer.status());
    StatusOr<BatchJobStatus> s = BatchJobStatusFromJson(*answer);
    if (!s.ok()) return fail(s.status());
    if (o.json) std::printf("%s\n", answer->c_str());
    if (!o.wait) {
      std::printf("submitted %s: %lld items\n%s\n", s->id.c_str(), static_cast<long long>(s->total),
                  s->id.c_str());
      return 0;
    }
    id = s->id;
  } else if (o.action == "cancel") {
    StatusOr<std::string> answer = client.PostBody("/v2/somm/batch/" + id + "/cancel", "{}");
    if (!answer.ok()) return fail(answer.status());
    StatusOr<BatchJobStatus> s = BatchJobStatusFromJson(*answer);
    if (!s.ok()) return fail(s.status());
    if (o.json) std::printf("%s\n", answer->c_str());
    PrintRow(*s);
    return 0;
  } else if (id.empty()) {
    StatusOr<std::string> answer = client.GetBody("/v2/somm/batch");
    if (!answer.ok()) return fail(answer.status());
    if (o.json) {
      std::printf("%s\n", answer->c_str());
      return 0;
    }
    const json list = json::parse(*answer, nullptr, false);
    std::printf("%-17s %-10s %-24s %s\n", "JOB", "STATE", "TARGET", "PROGRESS");
    for (const json& row : list.value("jobs", json::array())) {
      StatusOr<BatchJobStatus> s = BatchJobStatusFromJson(row.dump());
      if (s.ok()) PrintRow(*s);
    }
    return 0;
  }
  // One job: once, or until it ends (--watch, submit --wait).
  const bool tty = isatty(fileno(stdout));
  while (true) {
    StatusOr<std::string> answer = client.GetBody("/v2/somm/batch/" + id);
    if (!answer.ok()) return fail(answer.status());
    StatusOr<BatchJobStatus> s = BatchJobStatusFromJson(*answer);
    if (!s.ok()) return fail(s.status());
    const bool over = s->state != "RUNNING" && s->state != "QUEUED";
    if (!(o.watch || o.wait) || over) {
      if (tty && (o.watch || o.wait)) std::printf("\r\033[K");
      if (o.json) {
        std::printf("%s\n", answer->c_str());
      } else {
        PrintRow(*s);
        if (!s->message.empty()) std::printf("  %s\n", s->message.c_str());
        std::printf("  output: %s\n", s->spec.output.c_str());
      }
      return s->state == "FAILED" ? 1 : 0;
    }
    if (tty) {
      std::printf("\r\033[K%s %s", s->id.c_str(), Bar(*s).c_str());
    } else {
      std::printf("%s %s\n", s->id.c_str(), Bar(*s).c_str());
    }
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 250 : 2000));
  }
}

}  // namespace somm
