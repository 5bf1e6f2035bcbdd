// `somm register`, `somm variants` and `somm decisions`: the model-less
// commands, thin over AnyClient; formatting lives in model_less_format.
#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/any_client.h"
#include "cli/commands.h"
#include "cli/model_less_format.h"
#include "cli/registration_input.h"

namespace somm {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  return 1;
}

void PrintStatus(const RegistrationStatus& s) {
  std::printf("model %s: %s", s.name.c_str(), VariantsSummary(s).c_str());
  if (s.state != "READY" && !s.phase.empty()) std::printf(" (%s)", s.phase.c_str());
  std::printf("\n");
  if (!s.message.empty()) std::printf("%s\n", s.message.c_str());
  if (!s.variants.empty() || !s.skipped.empty()) std::printf("%s", VariantTable(s).c_str());
}

bool Finished(const RegistrationStatus& s) { return s.state == "READY" || s.state == "FAILED"; }

// Polls until generation finishes, redrawing one progress line on stderr.
int WaitForVariants(AnyClient& client, const std::string& name, int poll_ms) {
  std::string drawn;  // the line on screen
  while (true) {
    StatusOr<RegistrationStatus> status = client.GetVariants(name);
    if (!status.ok()) {
      if (!drawn.empty()) std::fprintf(stderr, "\n");
      return Fail(status.status());
    }
    // Redrawn only on change, so that a log of stderr stays short; spaces
    // blank the rest of a longer previous line.
    const std::string line = ProgressLine(*status);
    if (line != drawn) {
      const int blank =
          static_cast<int>(drawn.size() > line.size() ? drawn.size() - line.size() : 0);
      std::fprintf(stderr, "\r%s%*s", line.c_str(), blank, "");
      std::fflush(stderr);
      drawn = line;
    }
    if (Finished(*status)) {
      std::fprintf(stderr, "\n");
      PrintStatus(*status);
      return status->state == "READY" ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

}  // namespace

int RunRegister(const RegisterOptions& o) {
  StatusOr<RegistrationRequest> request = BuildRegistration(o);
  if (!request.ok()) return Fail(request.status());
  StatusOr<AnyClient> client = AnyClient::Create(o.client);
  if (!client.ok()) return Fail(client.status());
  const Status registered = client->Register(*request);
  if (!registered.ok()) return Fail(registered);
  std::printf("registered %s for task %s (%zu bytes", o.name.c_str(), o.task.c_str(),
              request->model_bytes.size());
  if (request->validation_count > 0) {
    std::printf(", %lld validation samples", static_cast<long long>(request->validation_count));
  }
  std::printf("); generating variants in the background\n");
  std::fflush(stdout);
  if (!o.wait) {
    std::printf("follow it with: somm variants %s\n", o.name.c_str());
    return 0;
  }
  return WaitForVariants(*client, o.name, o.poll_ms);
}

int RunVariants(const VariantsOptions& o) {
  StatusOr<AnyClient> client = AnyClient::Create(o.client);
  if (!client.ok()) return Fail(client.status());
  StatusOr<RegistrationStatus> status = client->GetVariants(o.name);
  if (!status.ok()) return Fail(status.status());
  PrintStatus(*status);
  return 0;
}

int RunDecisions(const DecisionsOptions& o) {
  StatusOr<AnyClient> client = AnyClient::Create(o.client);
  if (!client.ok()) return Fail(client.status());
  StatusOr<std::vector<DecisionRecord>> decisions =
      client->RecentDecisions(static_cast<size_t>(o.limit));
  if (!decisions.ok()) return Fail(decisions.status());
  std::printf("%s", DecisionTable(*decisions).c_str());
  return 0;
}

}  // namespace somm
