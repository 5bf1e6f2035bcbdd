// The parts every node starts from (worker_node.h, router_node.h,
// controller_node.h; `somm serve`'s embedded node uses the first group):
// the device and registration flags turned into a device and a sandbox,
// the byte budget's default, batch jobs' folders; and for the cluster's
// nodes the Redis store, the registry of the shared repository, their TLS
// and metrics keys, and a ticker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "auth/guard.h"
#include "batch/batch_jobs.h"
#include "cluster_rpc/worker_pool.h"
#include "common/status.h"
#include "crypto/tls_stream.h"
#include "metrics/prometheus_metrics.h"
#include "node/node_options.h"
#include "pipeline/pipeline_server.h"
#include "redis/redis_cluster_state_store.h"
#include "registry/model_catalog.h"
#include "registry/model_registrar.h"
#include "runtime/backend.h"
#include "runtime/backend_set.h"
#include "sandbox/model_sandbox.h"

namespace somm {

// The --device flag of the serving commands: "auto" (the first GPU when
// libtorch has CUDA and the machine has one, else the CPU), "cpu" or
// "cuda:N".
StatusOr<Device> ParseDeviceFlag(const std::string& text, const Backend& backend);
// The backends a serving process runs models on: one per platform, each
// made through the backend registry when a model first needs it, recording
// background work on `background_pacer` (may be null); the device its
// --device flag names and the hardware configurations variants are
// profiled on, both from the devices of the default platform's backend
// (made now).
struct ProcessBackends {
  BackendSet backends;
  Device device;
  std::vector<HardwareConfig> hardware;
};
StatusOr<ProcessBackends> StartBackends(const std::string& device_flag,
                                        std::shared_ptr<DutyCyclePacer> background_pacer);
// "127.0.0.1" for a wildcard listen address, else the address: what a local
// client dials.
std::string DialHost(const std::string& address);
// The byte budget --max-inflight-bytes asks for (ByteBudget::FromFlag): the
// flag, or by default a quarter of the memory budget (`memory_budget_mb`,
// 0 = half the memory available now, cluster/memory_budget.h's
// DefaultMemoryBudget).
StatusOr<int64_t> InflightBytesBudget(int64_t flag, double memory_budget_mb,
                                      int64_t max_body_bytes);
// The sandbox a server's registry runs registrations in: a confined child
// of this binary (`somm model-sandbox`) under `limits`. Logs what
// confinement applies here.
std::shared_ptr<ModelSandbox> MakeRegistrationSandbox(const RegistrationLimitFlags& limits);
// How `somm serve` and `somm router` set up offline batch jobs: where jobs
// keep their state and where they may read and write (batch/batch_paths.h),
// and the audit log they report to through the guard. `state_dir`: the
// process's own folder (<repo>/.somm, or a router's --state-dir); jobs'
// state goes to <state_dir>/batch[/<sub>], and the batch root defaults to
// <state_dir>/batch-files. `repository` "" = none mounted.
StatusOr<BatchJobs::Options> BatchSetup(const BatchRootFlags& flags, const std::string& state_dir,
                                        const std::string& sub, const std::string& repository,
                                        auth::Guard* guard);

namespace node {

// The repository's pipelines in front of `inner` (a router; docs/pipelines.md),
// as `somm serve` and `somm router` both serve them: read from `repository`
// ("" = none mounted: every call passes through), each step's variants and
// owners from `catalog`, only the folders `only` names (nullopt = all).
// Loaded before it returns.
std::unique_ptr<pipeline::PipelineServer> StartPipelines(
    const std::string& repository, const ModelCatalog& catalog, InferenceServer& inner,
    std::optional<std::vector<std::string>> only = std::nullopt);
// Who owns a name a query gives: the model's owner as `models` says, else
// the pipeline's.
auth::Guard::OwnerLookup OwnerOfModelOrPipeline(auth::Guard::OwnerLookup models,
                                                const pipeline::PipelineServer& pipelines);

// What a node needs of the process that runs it: to wait until it is told
// to stop (returns what told it: "SIGTERM"), and to ask for that itself (a
// controller that lost the leader lease).
struct NodeProcess {
  std::function<const char*()> wait_for_stop;
  std::function<void()> request_stop;
};
// Sets this process up to run a node: logs go to stderr (stdout carries
// only the banner that scripts read) at `log_level`, one line per message in
// `log_format` (node/log_format.h: text or json); SIGTERM and SIGINT are
// blocked in this thread and every thread started from now on, so that only
// the returned process's wait_for_stop (sigwait) sees them; SIGPIPE is
// ignored. request_stop sends SIGTERM to this process. Call it once, before
// any thread starts.
NodeProcess SetUpProcess(const std::string& log_level, const std::string& log_format = "text");
// What --check-args answers: "ok" on stdout and 0, or "somm <command>:
// <why>" on stderr and 2.
int ReportArgs(const char* command, const Status& checked);

// "<hostname>-<port>", or "<hostname>-<pid>" when the port is picked at
// start (0).
std::string DefaultId(const std::string& given, int port);
// The name a process's Redis connections carry (CLIENT SETNAME): its role
// and its id, or its pid when the id is picked later.
std::string RedisClientName(const std::string& role, const std::string& given_id);

// What every cluster process starts with: its backends and device
// (StartBackends), the Redis store and the catalog of the shared repository;
// a router's and a controller's also a registrar (`with_registrar`: a router
// probes registrations, the leader runs their variant jobs; a worker does
// neither).
struct ProcessParts {
  BackendSet backends;
  Device device;
  std::unique_ptr<redis::RedisClusterStateStore> store;
  std::unique_ptr<ModelCatalog> catalog;
  std::unique_ptr<ModelRegistrar> registrar;  // null without with_registrar
};
StatusOr<ProcessParts> StartParts(const std::string& repository, const std::string& device,
                                  const std::string& redis, int lease_ms, bool watch,
                                  const std::string& client_name,
                                  const RegistrationLimitFlags& registration, bool with_registrar,
                                  std::shared_ptr<DutyCyclePacer> background_pacer = nullptr);

// The worker ids and addresses a store's view holds: what a GrpcWorkerPool
// dials.
GrpcWorkerPool::Provider AddressesOf(redis::RedisClusterStateStore& store);
// The leader's control address from the lease holder "id|host:port".
std::string LeaderAddress(const cluster::LeaseStore& lease);

// A cluster process's TLS context (null = plaintext). In a cluster TLS is
// mutual or nothing: the client CA is also what each process checks its
// peers' certificates against, and the certificate is also its client one.
StatusOr<std::shared_ptr<const crypto::TlsServerContext>> ClusterTls(
    const crypto::TlsServerFiles& files);
// The TLS of a worker's or a controller's metrics port: its certificate,
// and no client certificate asked for, so that kubelet's probes (which
// present none) and Prometheus (a bearer key) reach it; null = plaintext.
StatusOr<std::shared_ptr<const crypto::TlsServerContext>> MetricsPortTls(
    const crypto::TlsServerFiles& files);
// Who may read a worker's or a controller's /metrics: with --keys-file, a
// metrics or admin key from it (private models' names are in there);
// without, anyone (loopback only: CheckClusterListenAddress).
StatusOr<std::pair<std::unique_ptr<auth::Guard>, MetricsAccess>> MetricsKeys(
    const std::string& keys_file);
// What every cluster process checks of its --redis before it starts: the
// form, and the password's file or variable.
Status CheckRedisFlag(const std::string& address);
// A worker's and a controller's checks of their own flags: where they may
// listen, their TLS files, their metrics keys, their Redis.
Status CheckServiceArgs(const std::string& address, const crypto::TlsServerFiles& tls,
                        const std::string& keys_file, const std::string& redis);

// A loop that runs `step` every `period` on a thread of its own until
// Stop(); Poke() runs it now.
class Ticker {
 public:
  Ticker(std::chrono::milliseconds period, std::function<void()> step)
      : period_(period), step_(std::move(step)), thread_([this] { Loop(); }) {}
  ~Ticker() { Stop(); }
  void Poke() { cv_.notify_all(); }
  void Stop() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      lock.unlock();
      step_();
      lock.lock();
      cv_.wait_for(lock, period_);
    }
  }
  const std::chrono::milliseconds period_;
  const std::function<void()> step_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace node
}  // namespace somm
