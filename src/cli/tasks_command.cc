// `somm tasks [TASK]`: task discovery as a table (one row per task) or, for
// one task, its signature, its models and the ranges its variants offer.
#include <cstdio>
#include <string>

#include "cli/any_client.h"
#include "cli/commands.h"
#include "common/tensor.h"

namespace somm {
namespace {

std::string Range(const std::optional<double>& lo, const std::optional<double>& hi, const char* fmt) {
  if (!lo || !hi) return "-";
  char a[32], b[32];
  std::snprintf(a, sizeof a, fmt, *lo);
  std::snprintf(b, sizeof b, fmt, *hi);
  return std::string(a) + " - " + b;
}

std::string Specs(const std::vector<TensorSpec>& specs, bool batched) {
  std::string out;
  for (const TensorSpec& s : specs) {
    Shape shape = s.shape;
    if (batched) shape.insert(shape.begin(), -1);
    out += (out.empty() ? "" : ", ") + s.name + " " + DataTypeName(s.datatype) + " " +
           ShapeToString(shape);
  }
  return out;
}

void PrintOne(const TaskDescription& d) {
  std::printf("task %s\n  inputs:  %s\n  outputs: %s\n", d.task.c_str(),
              Specs(d.signature.inputs, d.signature.batched).c_str(),
              Specs(d.signature.outputs, d.signature.batched).c_str());
  std::printf("  accuracy %s, batch-1 latency %s ms, %d usable variants\n",
              Range(d.min_accuracy, d.max_accuracy, "%.4f").c_str(),
              Range(d.min_latency_ms, d.max_latency_ms, "%.3f").c_str(), d.usable_variants);
  std::printf("  %-24s %-10s %-9s %s\n", "MODEL", "VERSIONS", "ACCURACY", "USABLE VARIANTS");
  for (const TaskModel& m : d.models) {
    std::string versions;
    for (const std::string& v : m.versions) versions += (versions.empty() ? "" : ",") + v;
    char acc[32] = "-";
    if (m.accuracy) std::snprintf(acc, sizeof acc, "%.4f", *m.accuracy);
    std::printf("  %-24s %-10s %-9s %d%s\n", m.name.c_str(), versions.c_str(), acc,
                m.usable_variants,
                m.mismatch.empty() ? "" : ("  (signature differs: " + m.mismatch + ")").c_str());
  }
}

}  // namespace

int RunTasks(const TasksOptions& o) {
  StatusOr<AnyClient> client = AnyClient::Create(o.client);
  if (!client.ok()) {
    std::fprintf(stderr, "error: %s\n", client.status().ToString().c_str());
    return 1;
  }
  StatusOr<std::vector<TaskDescription>> tasks = client->Tasks(o.task);
  if (!tasks.ok()) {
    std::fprintf(stderr, "error: %s\n", tasks.status().ToString().c_str());
    return 1;
  }
  if (!o.task.empty()) {
    for (const TaskDescription& d : *tasks) PrintOne(d);
    return 0;
  }
  std::printf("%-28s %-7s %-17s %-17s %s\n", "TASK", "MODELS", "ACCURACY", "LATENCY MS (B=1)",
              "INPUTS");
  for (const TaskDescription& d : *tasks) {
    std::printf("%-28s %-7zu %-17s %-17s %s\n", d.task.c_str(), d.models.size(),
                Range(d.min_accuracy, d.max_accuracy, "%.4f").c_str(),
                Range(d.min_latency_ms, d.max_latency_ms, "%.3f").c_str(),
                Specs(d.signature.inputs, d.signature.batched).c_str());
  }
  return 0;
}

}  // namespace somm
