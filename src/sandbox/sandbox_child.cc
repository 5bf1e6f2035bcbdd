#include "sandbox/sandbox_child.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <new>

#include "sandbox/model_sandbox.h"
#include "sandbox/sandbox_wire.h"

namespace somm {
namespace {

// Writes all of `text` to `fd`.
void WriteAll(int fd, const std::string& text) {
  size_t at = 0;
  while (at < text.size()) {
    const ssize_t n = write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

Status RunVariants(const std::string& request_json, const BackendSet& backends, int answer_fd,
                   std::vector<std::string>* warnings) {
  SOMM_ASSIGN_OR_RETURN(VariantJobRequest request, sandbox_wire::DecodeVariantJob(request_json));
  SOMM_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(request.model_dir));
  if (config.name != request.config.name) {
    return InvalidArgument(request.model_dir + " holds model '" + config.name + "', not '" +
                           request.config.name + "'");
  }
  SOMM_ASSIGN_OR_RETURN(Backend* const backend, backends.For(config.platform));
  SOMM_ASSIGN_OR_RETURN(
      VariantSet set,
      GenerateAndProfile(config, request.version, request.model_dir, *backend, request.options,
                         [answer_fd](const VariantProgress& p) {
                           WriteAll(answer_fd, sandbox_wire::ProgressLine(p));
                         }));
  *warnings = std::move(set.warnings);
  return Status::Ok();
}

}  // namespace

int RunModelSandboxChild(const std::vector<std::string>& args, const BackendSet& backends) {
  if (args.size() != 2 || (args[0] != sandbox_wire::kProbe && args[0] != sandbox_wire::kVariants)) {
    std::fprintf(stderr, "usage: somm %s probe|variants REQUEST (started by the server only)\n",
                 sandbox_wire::kCommand);
    return 2;
  }
  // The answer keeps its own descriptor; the model's prints go to stderr.
  const int answer_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (answer_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return 2;
  Status status;
  std::vector<std::string> warnings;
  bool out_of_memory = false;
  int64_t peak_memory_bytes = 0;
  try {
    if (args[0] == sandbox_wire::kProbe) {
      StatusOr<ProbeRequest> request = sandbox_wire::DecodeProbe(args[1]);
      // The platform's backend is made before the mark: what it takes is the
      // runtime's, not the model's (a failure is the probe's to report).
      if (request.ok()) {
        if (const auto config = LoadModelConfig(request->model_dir); config.ok()) {
          (void)backends.For(config->platform);
        }
      }
      // What the load and the run add to this process, which holds nothing
      // else of the server's: what one served instance will cost.
      const PeakMemoryMark mark = PeakMemoryMark::Begin();
      status = request.ok() ? ProbeWithBackend(*request, backends) : request.status();
      peak_memory_bytes = mark.AddedBytes();
    } else {
      status = RunVariants(args[1], backends, answer_fd, &warnings);
    }
    out_of_memory = !status.ok() && sandbox_wire::LooksLikeOutOfMemory(status.message());
  } catch (const std::bad_alloc&) {
    status = ResourceExhausted("out of memory");
    out_of_memory = true;
  } catch (const std::exception& e) {
    status = Internal(e.what());
    out_of_memory = sandbox_wire::LooksLikeOutOfMemory(e.what());
  }
  WriteAll(answer_fd, sandbox_wire::ResultLine(status, out_of_memory, warnings, peak_memory_bytes));
  close(answer_fd);
  return 0;
}

}  // namespace somm
