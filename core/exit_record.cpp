#include "core/exit_record.h"

#include <signal.h>

#include <cmath>
#include <limits>
#include <utility>

#include "core/metrics.h"

namespace meshwork {
namespace {

constexpr std::pair<ExitOutcome, const char*> kOutcomes[] = {
    {ExitOutcome::ok, "ok"},
    {ExitOutcome::rank_failed, "rank_failed"},
    {ExitOutcome::peer_failed, "peer_failed"},
    {ExitOutcome::stopped, "stopped"},
    {ExitOutcome::store_lost, "store_lost"},
    {ExitOutcome::start_failed, "start_failed"},
};
constexpr std::pair<RankPhase, const char*> kPhases[] = {
    {RankPhase::startup, "startup"},
    {RankPhase::training, "training"},
    {RankPhase::ended, "ended"},
};

template <class E, size_t N>
std::string allowed_words(const std::pair<E, const char*> (&words)[N]) {
  std::string out = "one of";
  for (size_t i = 0; i < N; ++i) out += std::string(i ? ", " : " ") + words[i].second;
  return out;
}

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// The signals a rank is likely to die of, by name: the numbers differ between architectures.
const char* signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return nullptr;
  }
}

// Reads the members of one JSON object, each error naming `prefix` + the key.
class Fields {
 public:
  Fields(const nlohmann::json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {}

  std::optional<Error> integer(const char* key, int64_t& out, int64_t lo, int64_t hi, bool required = true) {
    if (!j_.contains(key)) return required ? missing(key, "a whole number") : std::nullopt;
    const auto& v = j_.at(key);
    // An unsigned value past int64's range would wrap in get<int64_t>(): refused first.
    const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi);
    if (!v.is_number_integer() || too_big || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      return Error{prefix_ + key, shown(v),
                   "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi)};
    out = v.get<int64_t>();
    return std::nullopt;
  }
  std::optional<Error> integer(const char* key, int& out, int lo, int hi, bool required = true) {
    int64_t wide = out;
    if (auto e = integer(key, wide, lo, hi, required)) return e;
    out = static_cast<int>(wide);
    return std::nullopt;
  }
  std::optional<Error> time(const char* key, double& out) {
    if (!j_.contains(key)) return missing(key, "unix seconds");
    const auto& v = j_.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      return Error{prefix_ + key, shown(v), "unix seconds (a number >= 0)"};
    out = v.get<double>();
    return std::nullopt;
  }
  std::optional<Error> text(const char* key, std::string& out, bool required) {
    if (!j_.contains(key)) return required ? missing(key, "a string") : std::nullopt;
    const auto& v = j_.at(key);
    if (!v.is_string()) return Error{prefix_ + key, shown(v), "a string"};
    out = v.get<std::string>();
    return std::nullopt;
  }
  template <class E, size_t N>
  std::optional<Error> word(const char* key, E& out, const std::pair<E, const char*> (&words)[N]) {
    if (!j_.contains(key)) return missing(key, allowed_words(words));
    const auto& v = j_.at(key);
    if (v.is_string())
      for (const auto& [value, name] : words)
        if (v.get<std::string>() == name) {
          out = value;
          return std::nullopt;
        }
    return Error{prefix_ + key, shown(v), allowed_words(words)};
  }

 private:
  std::optional<Error> missing(const char* key, const std::string& what) const {
    return Error{prefix_ + key, "(missing)", what};
  }
  const nlohmann::json& j_;
  std::string prefix_;
};

constexpr int kMaxInt = std::numeric_limits<int>::max();

Result<RankFailure> failure_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"failure", shown(j), "a JSON object"};
  Fields f(j, "failure.");
  RankFailure r;
  if (auto e = f.integer("rank", r.rank, 0, kMaxInt)) return *e;
  if (auto e = f.integer("node", r.node, 0, kMaxInt)) return *e;
  if (j.contains("signal")) {
    if (auto e = f.integer("signal", r.signal, 1, 127)) return *e;
    if (j.contains("exit_code"))
      return Error{"failure.exit_code", shown(j.at("exit_code")), "absent when \"signal\" is given"};
  } else {
    if (auto e = f.integer("exit_code", r.exit_code, 0, 255)) return *e;
  }
  if (auto e = f.time("time", r.time)) return *e;
  if (auto e = f.word("phase", r.progress.phase, kPhases)) return *e;
  if (auto e = f.integer("last_step", r.progress.last_step, -1, std::numeric_limits<int64_t>::max())) return *e;
  if (j.contains("reason")) {
    if (!j.at("reason").is_string()) return Error{"failure.reason", shown(j.at("reason")), "a string"};
    r.reason = j.at("reason").get<std::string>();
  }
  return r;
}

}  // namespace

std::string_view to_string(ExitOutcome outcome) {
  for (const auto& [value, name] : kOutcomes)
    if (value == outcome) return name;
  return "?";
}

std::string_view to_string(RankPhase phase) {
  for (const auto& [value, name] : kPhases)
    if (value == phase) return name;
  return "?";
}

RankProgress rank_progress(std::string_view metrics_lines) {
  RankProgress p;
  size_t pos = 0;
  while (pos < metrics_lines.size()) {
    const size_t nl = metrics_lines.find('\n', pos);
    if (nl == std::string_view::npos) break;  // a line still being written
    const std::string_view line = metrics_lines.substr(pos, nl - pos);
    pos = nl + 1;
    auto rec = parse_metrics_line(line);
    if (!rec) continue;  // e.g. the cut first line of a tail
    if (const auto* step = std::get_if<StepRecord>(&*rec)) {
      p.phase = RankPhase::training;
      p.last_step = step->step;
    } else if (std::holds_alternative<EndRecord>(*rec)) {
      p.phase = RankPhase::ended;
    } else {
      p.phase = RankPhase::training;
    }
  }
  return p;
}

std::string failed_end_reason(std::string_view metrics_lines) {
  std::string reason;
  size_t pos = 0;
  while (pos < metrics_lines.size()) {
    const size_t nl = metrics_lines.find('\n', pos);
    if (nl == std::string_view::npos) break;
    const std::string_view line = metrics_lines.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.find("\"end\"") == std::string_view::npos) continue;  // cheap filter before parsing
    auto rec = parse_metrics_line(line);
    if (!rec) continue;
    if (const auto* end = std::get_if<EndRecord>(&*rec); end && end->status == "failed") reason = end->reason;
  }
  return reason;
}

std::string RankFailure::how() const {
  if (signal > 0) {
    std::string out = "killed by signal " + std::to_string(signal);
    if (const char* name = signal_name(signal)) out += std::string(" (") + name + ")";
    return out;
  }
  return "exited with code " + std::to_string(exit_code);
}

std::string RankFailure::when() const {
  std::string out;
  switch (progress.phase) {
    case RankPhase::startup: out = "during startup (no metrics record yet)"; break;
    case RankPhase::ended: out = "after its end record"; break;
    case RankPhase::training:
      out = progress.last_step < 0 ? "before its first step" : "after step " + std::to_string(progress.last_step);
      break;
  }
  if (!reason.empty()) out += ": " + reason;
  return out;
}

std::string exit_record_file(int node) { return "exit-node" + std::to_string(node) + ".json"; }

nlohmann::json to_json(const ExitRecord& r) {
  nlohmann::json j = {{"v", kExitRecordVersion},
                      {"node", r.node},
                      {"host", r.host},
                      {"outcome", to_string(r.outcome)},
                      {"exit_code", r.exit_code},
                      {"time", r.time},
                      {"reason", r.reason}};
  if (r.failure) {
    const RankFailure& f = *r.failure;
    nlohmann::json fj = {{"rank", f.rank}, {"node", f.node}};
    if (f.signal > 0) {
      fj["signal"] = f.signal;
    } else {
      fj["exit_code"] = f.exit_code;
    }
    fj["time"] = f.time;
    fj["phase"] = to_string(f.progress.phase);
    fj["last_step"] = f.progress.last_step;
    if (!f.reason.empty()) fj["reason"] = f.reason;
    j["failure"] = std::move(fj);
  }
  return j;
}

Result<ExitRecord> exit_record_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"exit record", shown(j), "a JSON object"};
  Fields f(j, "");
  int version = 0;
  if (auto e = f.integer("v", version, kExitRecordVersion, kExitRecordVersion)) {
    e->allowed = "only version 1 exit records are supported";
    return *e;
  }
  ExitRecord r;
  if (auto e = f.integer("node", r.node, 0, kMaxInt)) return *e;
  if (auto e = f.text("host", r.host, false)) return *e;
  if (auto e = f.word("outcome", r.outcome, kOutcomes)) return *e;
  if (auto e = f.integer("exit_code", r.exit_code, 0, 255)) return *e;
  if (auto e = f.time("time", r.time)) return *e;
  if (auto e = f.text("reason", r.reason, false)) return *e;
  if (j.contains("failure") && !j.at("failure").is_null()) {
    auto failure = failure_from_json(j.at("failure"));
    if (!failure) return failure.error();
    r.failure = *failure;
  }
  if (r.outcome == ExitOutcome::rank_failed && !r.failure)
    return Error{"failure", "(missing)", "the failed rank, when \"outcome\" is \"rank_failed\""};
  return r;
}

Result<ExitRecord> parse_exit_record(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    std::string head(text.substr(0, 80));
    return Error{"exit record", head, "a JSON object (this text is not JSON)"};
  }
  return exit_record_from_json(j);
}

}  // namespace meshwork
