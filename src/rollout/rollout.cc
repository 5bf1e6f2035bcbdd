#include "rollout/rollout.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace somm {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<int64_t> Rollout::PinnedVersions() const {
  switch (state) {
    case State::kCanary:
      return {stable_version, canary_version};
    case State::kRolledBack:
      return {stable_version};
    case State::kPromoted:
      return {canary_version};
  }
  return {};
}

void Rollout::Record(int64_t unix_ms, std::string event, std::string why) {
  reason = why;
  history.push_back({unix_ms, std::move(event), percent, std::move(why)});
  if (history.size() > kMaxHistory) {
    // The first event (how it started) stays; the oldest of the rest go.
    history.erase(history.begin() + 1,
                  history.begin() + 1 + static_cast<std::ptrdiff_t>(history.size() - kMaxHistory));
  }
}

const char* ModeName(Rollout::Mode mode) {
  return mode == Rollout::Mode::kShadow ? "shadow" : "split";
}

const char* StateName(Rollout::State state) {
  switch (state) {
    case Rollout::State::kCanary:
      return "canary";
    case Rollout::State::kPromoted:
      return "promoted";
    case Rollout::State::kRolledBack:
      return "rolled_back";
  }
  return "?";
}

namespace {

json BoundsToJson(const RolloutBounds& b) {
  return {{"min_queries_per_step", b.min_queries_per_step},
          {"min_queries_to_judge", b.min_queries_to_judge},
          {"min_step_s", b.min_step_s},
          {"max_error_rate_increase", b.max_error_rate_increase},
          {"max_latency_ratio", b.max_latency_ratio},
          {"latency_floor_ms", b.latency_floor_ms},
          {"max_accuracy_drop", b.max_accuracy_drop},
          {"max_disagreement", b.max_disagreement}};
}

// Fields absent keep their defaults; a field of the wrong type or range is
// an error naming it.
Status BoundsFromJson(const json& j, RolloutBounds* b) {
  if (!j.is_object()) return InvalidArgument("rollout: 'bounds' must be an object");
  auto number = [&j](const char* key, double lo, double hi, auto* out) -> Status {
    if (!j.contains(key)) return Status::Ok();
    const json& v = j.at(key);
    if (!v.is_number()) return InvalidArgument(std::string("rollout: bounds.") + key + " must be a number");
    const double d = v.get<double>();
    if (!(d >= lo && d <= hi)) {
      std::ostringstream msg;
      msg << "rollout: bounds." << key << " must be within [" << lo << ", " << hi << "], got " << d;
      return InvalidArgument(msg.str());
    }
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(d);
    return Status::Ok();
  };
  for (const auto& [key, _] : j.items()) {
    if (!BoundsToJson({}).contains(key)) return InvalidArgument("rollout: unknown field bounds." + key);
  }
  SOMM_RETURN_IF_ERROR(number("min_queries_per_step", 1, 1e9, &b->min_queries_per_step));
  SOMM_RETURN_IF_ERROR(number("min_queries_to_judge", 1, 1e9, &b->min_queries_to_judge));
  SOMM_RETURN_IF_ERROR(number("min_step_s", 0, 86400, &b->min_step_s));
  SOMM_RETURN_IF_ERROR(number("max_error_rate_increase", 0, 1, &b->max_error_rate_increase));
  SOMM_RETURN_IF_ERROR(number("max_latency_ratio", 1, 1000, &b->max_latency_ratio));
  SOMM_RETURN_IF_ERROR(number("latency_floor_ms", 0, 1e6, &b->latency_floor_ms));
  SOMM_RETURN_IF_ERROR(number("max_accuracy_drop", 0, 1, &b->max_accuracy_drop));
  SOMM_RETURN_IF_ERROR(number("max_disagreement", 0, 1, &b->max_disagreement));
  return Status::Ok();
}

// Ascending shares in 1..100 ending at 100.
Status CheckSteps(const std::vector<int>& steps) {
  if (steps.empty() || steps.back() != 100) {
    return InvalidArgument("rollout: 'steps' must end at 100 (the promotion)");
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i] < 1 || steps[i] > 100 || (i > 0 && steps[i] <= steps[i - 1])) {
      return InvalidArgument("rollout: 'steps' must rise strictly within 1..100");
    }
  }
  return Status::Ok();
}

StatusOr<int64_t> VersionField(const json& v) {
  if (v.is_number_integer() && v.get<int64_t>() > 0) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (!s.empty() && s.size() < 19 && std::all_of(s.begin(), s.end(), ::isdigit) && s != "0" &&
        s[0] != '0') {
      return std::stoll(s);
    }
  }
  return InvalidArgument("rollout: 'version' must be a positive version number, got " + v.dump());
}

json WindowToJson(const VersionWindow& w) {
  json j = {{"answered", w.answered},         {"failed", w.failed},
            {"latency_ms_sum", w.latency_ms_sum}, {"compared", w.compared},
            {"disagreed", w.disagreed},       {"error_rate", w.ErrorRate()},
            {"mean_latency_ms", w.MeanLatencyMs()}};
  if (w.accuracy) j["accuracy"] = *w.accuracy;
  j["profiled"] = w.profiled;
  return j;
}

VersionWindow WindowFromJson(const json& j) {
  VersionWindow w;
  w.answered = j.at("answered").get<int64_t>();
  w.failed = j.at("failed").get<int64_t>();
  w.latency_ms_sum = j.at("latency_ms_sum").get<double>();
  w.compared = j.at("compared").get<int64_t>();
  w.disagreed = j.at("disagreed").get<int64_t>();
  if (j.contains("accuracy")) w.accuracy = j.at("accuracy").get<double>();
  w.profiled = j.value("profiled", true);
  return w;
}

json ToJsonValue(const Rollout& r) {
  json history = json::array();
  for (const RolloutEvent& e : r.history) {
    history.push_back(
        {{"unix_ms", e.unix_ms}, {"event", e.event}, {"percent", e.percent}, {"reason", e.reason}});
  }
  return {{"model", r.model},
          {"stable_version", std::to_string(r.stable_version)},
          {"canary_version", std::to_string(r.canary_version)},
          {"mode", ModeName(r.mode)},
          {"state", StateName(r.state)},
          {"percent", r.percent},
          {"steps", r.steps},
          {"automatic", r.automatic},
          {"bounds", BoundsToJson(r.bounds)},
          {"started_unix_ms", r.started_unix_ms},
          {"step_started_unix_ms", r.step_started_unix_ms},
          {"reason", r.reason},
          {"history", history}};
}

StatusOr<Rollout> FromJsonValue(const json& j) {
  try {
    Rollout r;
    r.model = j.at("model").get<std::string>();
    SOMM_ASSIGN_OR_RETURN(r.stable_version, VersionField(j.at("stable_version")));
    SOMM_ASSIGN_OR_RETURN(r.canary_version, VersionField(j.at("canary_version")));
    const std::string mode = j.at("mode").get<std::string>();
    if (mode != "split" && mode != "shadow") return InvalidArgument("rollout: unknown mode " + mode);
    r.mode = mode == "shadow" ? Rollout::Mode::kShadow : Rollout::Mode::kSplit;
    const std::string state = j.at("state").get<std::string>();
    if (state == "canary") {
      r.state = Rollout::State::kCanary;
    } else if (state == "promoted") {
      r.state = Rollout::State::kPromoted;
    } else if (state == "rolled_back") {
      r.state = Rollout::State::kRolledBack;
    } else {
      return InvalidArgument("rollout: unknown state " + state);
    }
    r.percent = j.at("percent").get<int>();
    r.steps = j.at("steps").get<std::vector<int>>();
    SOMM_RETURN_IF_ERROR(CheckSteps(r.steps));
    r.automatic = j.at("automatic").get<bool>();
    SOMM_RETURN_IF_ERROR(BoundsFromJson(j.at("bounds"), &r.bounds));
    r.started_unix_ms = j.at("started_unix_ms").get<int64_t>();
    r.step_started_unix_ms = j.at("step_started_unix_ms").get<int64_t>();
    r.reason = j.at("reason").get<std::string>();
    for (const json& e : j.at("history")) {
      r.history.push_back({e.at("unix_ms").get<int64_t>(), e.at("event").get<std::string>(),
                           e.at("percent").get<int>(), e.at("reason").get<std::string>()});
    }
    return r;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("rollout: ") + e.what());
  }
}

fs::path RolloutPath(const std::string& repository, const std::string& model) {
  return fs::path(repository) / ".somm" / "rollouts" / (model + ".json");
}

}  // namespace

StatusOr<RolloutChange> RolloutChangeFromJson(const std::string& model, const std::string& text) {
  const json j = json::parse(text.empty() ? "{}" : text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("rollout: the body must be a JSON object");
  static const char* const kKnown[] = {"action", "version", "percent", "mode",
                                       "steps",  "automatic", "bounds", "reason"};
  for (const auto& item : j.items()) {
    // Not a structured binding: the lambda below captures the key, which
    // clang accepts only from version 16.
    const std::string& key = item.key();
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&key](const char* k) { return key == k; }) == std::end(kKnown)) {
      return InvalidArgument("rollout: unknown field '" + key + "'");
    }
  }
  RolloutChange c;
  c.model = model;
  const std::string action =
      j.contains("action") && j.at("action").is_string() ? j.at("action").get<std::string>() : "start";
  if (j.contains("action") && !j.at("action").is_string()) {
    return InvalidArgument("rollout: 'action' must be a string");
  }
  if (action == "start") {
    c.kind = RolloutChange::Kind::kStart;
  } else if (action == "set") {
    c.kind = RolloutChange::Kind::kSetPercent;
  } else if (action == "promote") {
    c.kind = RolloutChange::Kind::kPromote;
  } else if (action == "rollback") {
    c.kind = RolloutChange::Kind::kRollBack;
  } else {
    return InvalidArgument("rollout: 'action' must be start, set, promote or rollback, got '" +
                           action + "'");
  }
  if (j.contains("version")) {
    SOMM_ASSIGN_OR_RETURN(int64_t v, VersionField(j.at("version")));
    c.version = v;
  }
  if (j.contains("percent")) {
    const json& p = j.at("percent");
    if (!p.is_number_integer() || p.get<int64_t>() < 0 || p.get<int64_t>() > 100) {
      return InvalidArgument("rollout: 'percent' must be an integer within 0..100, got " + p.dump());
    }
    c.percent = p.get<int>();
  }
  if (j.contains("mode")) {
    const json& m = j.at("mode");
    if (!m.is_string() || (m != "split" && m != "shadow")) {
      return InvalidArgument("rollout: 'mode' must be \"split\" or \"shadow\", got " + m.dump());
    }
    c.mode = m == "shadow" ? Rollout::Mode::kShadow : Rollout::Mode::kSplit;
  }
  if (j.contains("steps")) {
    const json& s = j.at("steps");
    if (!s.is_array() || !std::all_of(s.begin(), s.end(), [](const json& e) {
          return e.is_number_integer();
        })) {
      return InvalidArgument("rollout: 'steps' must be an array of integers");
    }
    std::vector<int> steps;
    for (const json& e : s) steps.push_back(static_cast<int>(std::clamp<int64_t>(e.get<int64_t>(), -1, 101)));
    SOMM_RETURN_IF_ERROR(CheckSteps(steps));
    c.steps = std::move(steps);
  }
  if (j.contains("automatic")) {
    if (!j.at("automatic").is_boolean()) return InvalidArgument("rollout: 'automatic' must be true or false");
    c.automatic = j.at("automatic").get<bool>();
  }
  if (j.contains("bounds")) SOMM_RETURN_IF_ERROR(BoundsFromJson(j.at("bounds"), &c.bounds));
  if (j.contains("reason")) {
    if (!j.at("reason").is_string()) return InvalidArgument("rollout: 'reason' must be a string");
    c.reason = j.at("reason").get<std::string>().substr(0, 500);
  }
  if (c.kind == RolloutChange::Kind::kStart && !c.version) {
    return InvalidArgument("rollout: starting a rollout needs 'version' (the canary)");
  }
  if (c.kind == RolloutChange::Kind::kSetPercent && !c.percent) {
    return InvalidArgument("rollout: action 'set' needs 'percent'");
  }
  return c;
}

std::string RolloutChangeToJson(const RolloutChange& c) {
  static const char* const kActions[] = {"start", "set", "promote", "rollback"};
  json j = {{"action", kActions[static_cast<int>(c.kind)]}, {"mode", ModeName(c.mode)}};
  if (c.version) j["version"] = std::to_string(*c.version);
  if (c.percent) j["percent"] = *c.percent;
  if (c.steps) j["steps"] = *c.steps;
  if (c.automatic) j["automatic"] = *c.automatic;
  if (c.kind == RolloutChange::Kind::kStart) j["bounds"] = BoundsToJson(c.bounds);
  if (!c.reason.empty()) j["reason"] = c.reason;
  return j.dump();
}

std::string RolloutToJson(const Rollout& rollout) { return ToJsonValue(rollout).dump(); }

StatusOr<Rollout> RolloutFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("rollout: not a JSON object");
  return FromJsonValue(j);
}

std::string RolloutViewToJson(const RolloutView& view) {
  json j = ToJsonValue(view.rollout);
  j["window"] = {{"stable", WindowToJson(view.stable)}, {"canary", WindowToJson(view.canary)}};
  return j.dump();
}

StatusOr<RolloutView> RolloutViewFromJson(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("rollout: not a JSON object");
  RolloutView view;
  SOMM_ASSIGN_OR_RETURN(view.rollout, FromJsonValue(j));
  try {
    view.stable = WindowFromJson(j.at("window").at("stable"));
    view.canary = WindowFromJson(j.at("window").at("canary"));
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("rollout window: ") + e.what());
  }
  return view;
}

Status SaveRollout(const std::string& repository, const Rollout& rollout) {
  const fs::path path = RolloutPath(repository, rollout.model);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return Internal("rollout: cannot create " + path.parent_path().string() + ": " + ec.message());
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << RolloutToJson(rollout);
    if (!out.flush()) return Internal("rollout: cannot write " + tmp.string());
  }
  fs::rename(tmp, path, ec);
  if (ec) return Internal("rollout: cannot rename " + tmp.string() + ": " + ec.message());
  return Status::Ok();
}

StatusOr<std::optional<Rollout>> LoadRollout(const std::string& repository,
                                             const std::string& model) {
  const fs::path path = RolloutPath(repository, model);
  std::ifstream in(path);
  if (!in) return std::optional<Rollout>();
  std::stringstream text;
  text << in.rdbuf();
  auto r = RolloutFromJson(text.str());
  if (!r.ok()) return InvalidArgument(path.string() + ": " + r.status().message());
  if (r->model != model) {
    return InvalidArgument(path.string() + ": names model '" + r->model + "', not '" + model + "'");
  }
  return std::optional<Rollout>(std::move(r).value());
}

}  // namespace somm
