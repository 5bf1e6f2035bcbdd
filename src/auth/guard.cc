#include "auth/guard.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <utility>

#include "auth/roles.h"
#include "repository/measured_memory.h"
#include "runtime/backend_registry.h"

namespace somm::auth {
namespace fs = std::filesystem;
namespace {

// The text ModelCatalog::UnknownModel gives; the tenant e2e tests check
// that both answers are the same.
Status UnknownModel(const std::string& name) { return NotFound("unknown model '" + name + "'"); }

bool IsMutation(Operation op);

}  // namespace

bool IsLoopback(const std::string& address) {
  if (address == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

Status CheckClusterListenAddress(const std::string& address, const crypto::TlsServerFiles& tls,
                                 const std::string& keys_file) {
  if (IsLoopback(address)) return Status::Ok();
  if (!tls.enabled() || tls.client_ca_file.empty()) {
    return InvalidArgument(
        "refusing to listen on --address " + address +
        " without mutual TLS: anyone who could reach this port could load and run any tenant's "
        "model, or act as the cluster's controller. Pass --tls-cert, --tls-key and "
        "--tls-client-ca (scripts/make-certs DIR makes a CA and the cluster's certificate) or "
        "listen on loopback (--address 127.0.0.1)");
  }
  if (keys_file.empty()) {
    return InvalidArgument("refusing to serve /metrics on --address " + address +
                           " to anyone: it names every model, private ones too. Pass --keys-file "
                           "(a metrics or admin key, as 'somm keys create --role metrics' makes, "
                           "then reads it)");
  }
  return Status::Ok();
}

namespace {

bool IsMutation(Operation op) {
  return op == Operation::kLoad || op == Operation::kUnload || op == Operation::kRegister ||
         op == Operation::kRollout;
}

bool IsQuery(Operation op) { return op == Operation::kInfer || op == Operation::kTaskInfer; }

// The instance_count of the model in `dir` (its model.yaml; 1 when unset or
// unreadable: what a server loads of it).
int64_t InstancesOf(const fs::path& dir) {
  try {
    const YAML::Node count = YAML::LoadFile((dir / "model.yaml").string())["instance_count"];
    if (count && count.IsScalar()) return std::clamp<int64_t>(count.as<int64_t>(), 1, 64);
  } catch (const YAML::Exception&) {
  }
  return 1;
}

}  // namespace

StatusOr<AuthMode> ParseAuthMode(const std::string& text) {
  if (text == "none") return AuthMode::kNone;
  if (text == "keys") return AuthMode::kKeys;
  return InvalidArgument("--auth must be 'keys' or 'none', got '" + text + "'");
}

Status CheckListenAddress(AuthMode mode, const std::string& address, const std::string& flag) {
  if (mode == AuthMode::kKeys || IsLoopback(address)) return Status::Ok();
  return InvalidArgument(
      "refusing to listen on " + flag + " " + address +
      " without authentication: anyone who can reach it could query, register, load and "
      "unload models. Pass --auth keys (create keys with 'somm keys create --repo DIR "
      "--tenant T --role admin') or listen on loopback (" +
      flag + " 127.0.0.1)");
}

StatusOr<std::unique_ptr<Guard>> Guard::Create(GuardOptions options) {
  const fs::path state(options.state_dir);
  const bool own_state = !options.state_dir.empty();
  if (options.keys_path.empty()) {
    options.keys_path = own_state ? (state / "keys").string() : KeyStore::DefaultPath(options.repository);
  }
  if (options.tenants_path.empty()) {
    options.tenants_path =
        own_state ? (state / "tenants.yaml").string() : DefaultQuotaPath(options.repository);
  }
  if (options.audit_path.empty()) {
    options.audit_path =
        own_state ? (state / "audit.log").string() : AuditLog::DefaultPath(options.repository);
  }
  if (options.clock == nullptr) options.clock = &Clock::Real();
  SOMM_ASSIGN_OR_RETURN(QuotaConfig quotas, LoadQuotaConfig(options.tenants_path));
  return std::unique_ptr<Guard>(new Guard(std::move(options), std::move(quotas)));
}

StatusOr<std::unique_ptr<Guard>> Guard::ForServer(const std::string& auth_flag,
                                                  const std::string& address,
                                                  const std::string& repository,
                                                  const std::string& keys_file,
                                                  const std::string& state_dir) {
  SOMM_ASSIGN_OR_RETURN(AuthMode mode, ParseAuthMode(auth_flag));
  SOMM_RETURN_IF_ERROR(CheckListenAddress(mode, address, "--address"));
  GuardOptions o;
  o.mode = mode;
  o.repository = repository;
  o.state_dir = state_dir;
  o.keys_path = keys_file;
  SOMM_ASSIGN_OR_RETURN(std::unique_ptr<Guard> guard, Create(std::move(o)));
  if (mode == AuthMode::kKeys) {
    // Not fatal (keys may be created while it runs), but worth saying.
    StatusOr<std::vector<KeyRecord>> keys = guard->keys_.List();
    if (!keys.ok()) {
      spdlog::warn("API keys: {}", keys.status().message());
    } else if (keys->empty()) {
      spdlog::warn(
          "--auth keys, but {} holds no key yet: every call but the health probes is "
          "refused until 'somm keys create' makes one",
          guard->keys_.path());
    } else {
      spdlog::info("API keys: {} key(s) in {}", keys->size(), guard->keys_.path());
    }
  }
  return guard;
}

Status Guard::AdmitMetrics(const std::string& authorization) {
  return Admit(CallInfo{Operation::kMetrics, "", authorization, false, 0}).status;
}

Guard::Guard(GuardOptions options, QuotaConfig quotas)
    : options_(std::move(options)),
      keys_(options_.keys_path),
      quotas_(std::move(quotas), *options_.clock),
      audit_(options_.audit_path) {}

Admission Guard::Admit(const CallInfo& call) {
  Admission a = Decide(call);
  if (!a.status.ok()) AuditRefusal(a.caller, call.op, OperationName(call.op), call.model, a.status);
  return a;
}

void Guard::AuditRefusal(const Caller& caller, Operation op, const char* action,
                         std::string_view target, const Status& refusal) {
  // Who tried what, and why not: every call refused for its key or its
  // role, wherever it was refused (a frontend's early check or here), and
  // every refused repository change. Callers with no valid key are audited
  // at a bounded rate (anyone can send those), and what was left out is
  // counted in the next record.
  const bool for_key_or_role = refusal.code() == StatusCode::kUnauthenticated ||
                               refusal.code() == StatusCode::kPermissionDenied;
  if (!for_key_or_role && !IsMutation(op)) return;
  if (!caller.authenticated && !AdmitAnonymousRecord()) return;
  audit_.Record({caller.key_id, caller.tenant, action, std::string(target),
                 StatusCodeName(refusal.code()), refusal.message()});
}

bool Guard::AdmitAnonymousRecord() {
  int64_t suppressed = 0;
  {
    MutexLock lock(&anonymous_mu_);
    const double now_s =
        std::chrono::duration<double>(options_.clock->Now().time_since_epoch()).count();
    anonymous_tokens_ = std::min(kAnonymousAuditBurst,
                                 anonymous_tokens_ + (now_s - anonymous_refill_s_) * kAnonymousAuditPerS);
    anonymous_refill_s_ = now_s;
    if (anonymous_tokens_ < 1) {
      ++anonymous_suppressed_;
      return false;
    }
    anonymous_tokens_ -= 1;
    suppressed = std::exchange(anonymous_suppressed_, 0);
  }
  if (suppressed > 0) {
    audit_.Record({"", "", "refused_unauthenticated", "", "suppressed",
                   std::to_string(suppressed) +
                       " refused call(s) without a valid key were not recorded one by one "
                       "(at most " + std::to_string(static_cast<int>(kAnonymousAuditPerS)) +
                       " a second are)"});
  }
  return true;
}

StatusOr<KeyRecord> Guard::KeyOf(std::string_view auth) {
  if (auth.empty()) {
    return Unauthenticated(
        "missing API key: send 'Authorization: Bearer <key>' (keys are made with 'somm keys "
        "create')");
  }
  constexpr std::string_view kBearer = "bearer ";
  if (auth.size() <= kBearer.size() ||
      strncasecmp(auth.data(), kBearer.data(), kBearer.size()) != 0) {
    return Unauthenticated("the Authorization value must be 'Bearer <key>'");
  }
  auth.remove_prefix(kBearer.size());
  while (!auth.empty() && auth.front() == ' ') auth.remove_prefix(1);
  return keys_.Verify(auth);
}

namespace {

Status RoleRefusal(const Caller& caller, Role role, Operation op) {
  return PermissionDenied("API key " + caller.key_id + " has role '" + RoleName(role) +
                          "', which may not call " + OperationName(op));
}

}  // namespace

StatusOr<VerifiedKey> Guard::Authenticate(const std::string& authorization,
                                          std::optional<Operation> op, std::string_view target) {
  VerifiedKey verified;
  if (options_.mode == AuthMode::kNone) return verified;
  const char* action = op ? OperationName(*op) : "call";
  StatusOr<KeyRecord> key = KeyOf(authorization);
  if (!key.ok()) {
    AuditRefusal(verified.caller, op.value_or(Operation::kServerMetadata), action, target,
                 key.status());
    return key.status();
  }
  verified.caller.authenticated = true;
  verified.caller.key_id = key->id;
  verified.caller.tenant = key->tenant;
  verified.caller.admin = key->role == Role::kAdmin;
  verified.guard_role = static_cast<int>(key->role);
  if (op && !RoleAllows(key->role, *op)) {
    Status refused = RoleRefusal(verified.caller, key->role, *op);
    AuditRefusal(verified.caller, *op, action, target, refused);
    return refused;
  }
  return verified;
}

Admission Guard::Decide(const CallInfo& call) {
  Admission a;
  if (options_.mode == AuthMode::kNone) return a;
  Role role = Role::kUser;
  if (call.verified != nullptr && call.verified->caller.authenticated) {
    // The frontend's early check verified this call's key already.
    a.caller = call.verified->caller;
    role = static_cast<Role>(call.verified->guard_role);
  } else {
    StatusOr<KeyRecord> key = KeyOf(call.authorization);
    if (!key.ok()) {
      a.status = key.status();
      return a;
    }
    a.caller.authenticated = true;
    a.caller.key_id = key->id;
    a.caller.tenant = key->tenant;
    a.caller.admin = key->role == Role::kAdmin;
    role = key->role;
  }
  if (!RoleAllows(role, call.op)) {
    a.status = RoleRefusal(a.caller, role, call.op);
    return a;
  }
  a.status = CheckTenantRules(a.caller, call);
  if (a.status.ok() && IsQuery(call.op)) {
    a.status = quotas_.Acquire(a.caller.tenant, &a.retry_after_s);
  }
  return a;
}

Status Guard::CheckTenantRules(const Caller& caller, const CallInfo& call) {
  switch (call.op) {
    case Operation::kModelMetadata:
    case Operation::kLoad:
    case Operation::kUnload:
    case Operation::kRollout:
      break;
    case Operation::kInfer:
      if (call.model.empty()) return Status::Ok();  // a batch job's task form
      break;
    case Operation::kRegister:
      return CheckRegistration(caller, call);
    default:
      return Status::Ok();  // task queries: the router; lists: MaySee
  }
  if (caller.admin) return Status::Ok();
  // The one check of a user's call that names a model, before anything
  // else about the call (its version, its body, its parameters) is looked
  // at: a model the caller may not see and a model that does not exist get
  // the same answer, so no later check can tell them apart.
  const Ownership o = OwnerOf(call.model);
  if (!o.exists || !Visible(caller, o)) return UnknownModel(call.model);
  switch (call.op) {
    case Operation::kLoad:
    case Operation::kUnload:
    case Operation::kRollout:
      if (o.owner.empty()) {
        return PermissionDenied(std::string("a user key may not ") + OperationName(call.op) +
                                " public model '" + call.model + "'; that needs an admin key");
      }
      if (call.op == Operation::kLoad || call.op == Operation::kRollout) {
        return quotas_.CheckPrivateMemory(caller.tenant, PrivateBytes(caller.tenant));
      }
      return Status::Ok();
    default:
      return Status::Ok();
  }
}

Status Guard::CheckRegistration(const Caller& caller, const CallInfo& call) {
  // The name is not looked at here: a name another tenant's private model
  // holds is answered as a new name is, by the registry, which checks the
  // registration first and the name last (ModelRegistrar::Register).
  if (!caller.admin && !call.private_model) {
    return PermissionDenied(
        "a user key registers private models only (somm register --private); public "
        "models need an admin key");
  }
  if (!call.private_model) return Status::Ok();
  return quotas_.CheckPrivateMemory(
      caller.tenant, PrivateBytes(caller.tenant) + static_cast<int64_t>(call.payload_bytes));
}

void Guard::Done(const Caller& caller, const CallInfo& call, const Status& outcome) {
  if (IsQuery(call.op)) {
    if (caller.authenticated) quotas_.Release(caller.tenant);
    return;
  }
  if (!IsMutation(call.op)) return;
  AuditEvent event{caller.key_id,
                   caller.tenant,
                   OperationName(call.op),
                   call.model,
                   outcome.ok() ? "ok" : StatusCodeName(outcome.code()),
                   outcome.message()};
  if (call.op == Operation::kRegister && outcome.ok()) {
    event.detail = call.private_model ? "private" : "public";
  }
  audit_.Record(event);
}

bool Guard::MaySee(const Caller& caller, const std::string& model) {
  if (!caller.authenticated || caller.admin) return true;
  return Visible(caller, OwnerOf(model));
}

bool Guard::Visible(const Caller& caller, const Ownership& o) const {
  if (!o.exists) return true;  // the server answers "unknown model" itself
  // A model.yaml that does not parse has no known owner: only an admin (or
  // a server without keys) sees it, so a broken private model never leaks.
  if (!o.readable) return !caller.authenticated || caller.admin;
  return caller.MayUse(o.owner);
}

Guard::Ownership Guard::OwnerOf(const std::string& model) const {
  Ownership o;
  // An exact variant ("m:1:ts-int8@cpu1") belongs to its model.
  const std::string name = model.substr(0, model.find(':'));
  if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos ||
      name.find('\\') != std::string::npos) {
    return o;
  }
  if (owner_lookup_) {
    if (std::optional<std::string> owner = owner_lookup_(name)) {
      o.exists = o.readable = true;
      o.owner = std::move(*owner);
      return o;
    }
  }
  // No repository mounted (a router): the catalog is all there is.
  if (options_.repository.empty()) return o;
  const fs::path dir = fs::path(options_.repository) / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return o;
  o.exists = true;
  try {
    const YAML::Node root = YAML::LoadFile((dir / "model.yaml").string());
    if (root.IsMap() && root["owner_tenant"]) o.owner = root["owner_tenant"].as<std::string>();
    o.readable = root.IsMap() || root.IsNull();
  } catch (const YAML::Exception&) {
    o.readable = false;
  }
  return o;
}

int64_t Guard::PrivateBytes(const std::string& tenant) const {
  int64_t total = 0;
  std::error_code ec;
  if (options_.repository.empty()) return 0;
  for (const auto& entry : fs::directory_iterator(options_.repository, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.empty() || name[0] == '.') continue;
    const Ownership o = OwnerOf(name);
    if (!o.readable || o.owner != tenant) continue;
    // Every instance holds its own copy of the model.
    const int64_t instances = InstancesOf(entry.path());
    for (const auto& f : fs::recursive_directory_iterator(entry.path(), ec)) {
      if (f.is_regular_file() && IsModelFileName(f.path().filename().string())) {
        total += instances * ChargedMemoryBytes(f.path().string());
      }
    }
  }
  return total;
}

Status Guard::AdmitPrivateMemory(const Caller& caller, const std::string& model, int64_t bytes) {
  if (options_.mode == AuthMode::kNone || !caller.authenticated) return Status::Ok();
  const int64_t held = PrivateBytes(caller.tenant);
  const Status room = quotas_.CheckPrivateMemory(caller.tenant, held + bytes);
  if (room.ok()) return room;
  return Status(room.code(), room.message() + ": its private models take " + MibText(held) +
                                 " already and '" + model + "' would add " + MibText(bytes));
}

std::string Guard::MetricsText() const { return quotas_.MetricsText(); }

}  // namespace somm::auth
