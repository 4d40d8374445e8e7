#include "core/flight_record.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "core/flight_layout.h"

namespace meshwork {
namespace {

constexpr const char* kPhaseNames[] = {"startup", "data", "forward", "backward",
                                       "optimizer", "checkpoint", "eval", "ended"};
// In FlightOpKind's order (the binary record stores the index).
constexpr const char* kOpNames[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "send",
                                    "recv",       "send_recv",  "barrier",        "all_to_all"};
constexpr int kPhaseCount = static_cast<int>(std::size(kPhaseNames));
constexpr int kOpCount = static_cast<int>(std::size(kOpNames));

std::string allowed(const char* const* names, int n) {
  std::string out = "one of";
  for (int i = 0; i < n; ++i) out += std::string(i ? ", " : " ") + names[i];
  return out;
}

std::string group_names() {
  std::string out = "one of";
  for (GroupKind k : kGroupKinds) out += std::string(out.size() > 6 ? ", " : " ") + std::string(group_name(k));
  out += ", world";
  for (ExpertGroupKind k : kExpertGroupKinds) out += ", " + std::string(expert_group_name(k));
  return out;
}

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

FlightOp op_of(const FlightOpSlot& s) {
  FlightOp op;
  op.group = flight_group_of_slot(s.group);
  op.op = static_cast<FlightOpKind>(s.op);
  op.seq = s.seq;
  op.bytes = s.bytes;
  op.enter = s.enter;
  op.exit = s.exit;
  return op;
}

// `slots`: the group slots of the record's version.
std::optional<Error> check_slot(const FlightOpSlot& s, const std::string& field, int slots) {
  if (s.group < 0 || s.group >= slots)
    return Error{field + ".group", std::to_string(s.group), "a group index from 0 to " + std::to_string(slots - 1)};
  if (s.op < 0 || s.op >= kOpCount)
    return Error{field + ".op", std::to_string(s.op), "an op index from 0 to " + std::to_string(kOpCount - 1)};
  return std::nullopt;
}

// Reads the members of one JSON object, each error naming `prefix` + the key.
class Fields {
 public:
  Fields(const nlohmann::json& j, std::string prefix) : j_(j), prefix_(std::move(prefix)) {}

  std::optional<Error> integer(const char* key, int64_t& out, int64_t lo, int64_t hi, bool required = true) {
    if (!j_.contains(key)) {
      if (required) return missing(key, "a whole number");
      return std::nullopt;
    }
    const auto& v = j_.at(key);
    const bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi);
    if (!v.is_number_integer() || too_big || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      return Error{prefix_ + key, shown(v),
                   "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi)};
    out = v.get<int64_t>();
    return std::nullopt;
  }
  std::optional<Error> unsigned_integer(const char* key, uint64_t& out) {
    if (!j_.contains(key)) return missing(key, "a whole number >= 0");
    const auto& v = j_.at(key);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
      return Error{prefix_ + key, shown(v), "a whole number >= 0"};
    out = v.get<uint64_t>();
    return std::nullopt;
  }
  std::optional<Error> time(const char* key, double& out, bool required = true) {
    if (!j_.contains(key)) {
      if (required) return missing(key, "unix seconds >= 0");
      return std::nullopt;
    }
    const auto& v = j_.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
      return Error{prefix_ + key, shown(v), "unix seconds >= 0"};
    out = v.get<double>();
    return std::nullopt;
  }
  std::optional<Error> word(const char* key, std::string& out, const std::string& what) {
    if (!j_.contains(key)) return missing(key, what);
    const auto& v = j_.at(key);
    if (!v.is_string()) return Error{prefix_ + key, shown(v), what};
    out = v.get<std::string>();
    return std::nullopt;
  }
  Error bad(const char* key, const std::string& what) const {
    return Error{prefix_ + key, shown(j_.at(key)), what};
  }

 private:
  Error missing(const char* key, const std::string& what) const { return Error{prefix_ + key, "(missing)", what}; }
  const nlohmann::json& j_;
  std::string prefix_;
};

Result<FlightOp> op_from_json(const nlohmann::json& j, const std::string& prefix, bool completed) {
  if (!j.is_object()) return Error{prefix, shown(j), "an object with group, op, seq, bytes, enter"};
  Fields f(j, prefix + ".");
  FlightOp op;
  std::string word;
  if (auto e = f.word("group", word, group_names())) return *e;
  auto g = flight_group_from_name(word);
  if (!g) return f.bad("group", group_names());
  op.group = *g;
  if (auto e = f.word("op", word, allowed(kOpNames, kOpCount))) return *e;
  auto k = flight_op_from_name(word);
  if (!k) return f.bad("op", allowed(kOpNames, kOpCount));
  op.op = *k;
  if (auto e = f.integer("seq", op.seq, 1, INT64_MAX)) return *e;
  if (auto e = f.integer("bytes", op.bytes, 0, INT64_MAX)) return *e;
  if (auto e = f.time("enter", op.enter)) return *e;
  if (auto e = f.time("exit", op.exit, completed)) return *e;
  return op;
}

}  // namespace

std::string_view to_string(FlightPhase phase) {
  const int i = static_cast<int>(phase);
  return i >= 0 && i < kPhaseCount ? kPhaseNames[i] : "unknown";
}

std::optional<FlightPhase> flight_phase_from_name(std::string_view name) {
  for (int i = 0; i < kPhaseCount; ++i)
    if (name == kPhaseNames[i]) return static_cast<FlightPhase>(i);
  return std::nullopt;
}

std::string FlightGroup::name() const {
  if (expert) return std::string(expert_group_name(*expert));
  return world ? "world" : std::string(group_name(kind));
}

std::optional<FlightGroup> flight_group_from_name(std::string_view name) {
  if (name == "world") return FlightGroup{true, GroupKind::dp};
  for (ExpertGroupKind k : kExpertGroupKinds)
    if (name == expert_group_name(k)) return FlightGroup{false, GroupKind::dp, k};
  for (GroupKind k : kGroupKinds)
    if (name == group_name(k)) return FlightGroup{false, k};
  return std::nullopt;
}

std::string_view to_string(FlightOpKind op) {
  const int i = static_cast<int>(op);
  return i >= 0 && i < kOpCount ? kOpNames[i] : "unknown";
}

std::optional<FlightOpKind> flight_op_from_name(std::string_view name) {
  for (int i = 0; i < kOpCount; ++i)
    if (name == kOpNames[i]) return static_cast<FlightOpKind>(i);
  return std::nullopt;
}

std::optional<int64_t> FlightState::last_seq_of(const FlightGroup& g) const {
  for (const auto& [group, seq] : last_seq)
    if (group == g) return seq;
  return std::nullopt;
}

std::string flight_file(int rank) { return "flight-rank" + std::to_string(rank) + ".bin"; }

Result<FlightState> flight_state_of(const FlightLayout& l) {
  if (l.magic != kFlightMagic) return Error{"flight record", "magic", "is not a meshtrain flight record"};
  if (l.version != kFlightLayoutVersion && l.version != 1)
    return Error{"flight record version", std::to_string(l.version),
                 "must be 1 or " + std::to_string(kFlightLayoutVersion) +
                     " (this meshwork reads those; a newer meshtrain wrote it)"};
  const int slots = l.version == 1 ? kFlightV1GroupSlots : kFlightGroupSlots;
  if (l.phase < 0 || l.phase >= kPhaseCount)
    return Error{"phase", std::to_string(l.phase), "a phase index from 0 to " + std::to_string(kPhaseCount - 1)};
  FlightState s;
  s.rank = l.rank;
  s.pid = l.pid;
  s.step = l.step;
  s.phase = static_cast<FlightPhase>(l.phase);
  s.layer = l.layer;
  s.phase_since = l.phase_since;
  s.activity = l.activity;
  s.generation = l.generation;
  s.host_hash = l.host_hash;
  if (l.in_collective) {
    if (auto e = check_slot(l.current, "current", slots)) return *e;
    s.current = op_of(l.current);
  }
  const uint64_t n = std::min<uint64_t>(l.completed, kFlightRing);
  for (uint64_t i = l.completed - n; i < l.completed; ++i) {
    const FlightOpSlot& slot = l.ring[i % kFlightRing];
    if (auto e = check_slot(slot, "recent[" + std::to_string(i % kFlightRing) + "]", slots)) return *e;
    s.recent.push_back(op_of(slot));
  }
  for (int g = 0; g < slots; ++g) {
    if (l.last_seq[g] <= 0) continue;
    s.last_seq.emplace_back(flight_group_of_slot(g), l.last_seq[g]);
  }
  return s;
}

Result<FlightState> parse_flight_bytes(std::string_view bytes) {
  // A version-1 record is shorter (flight_layout.h): its size follows from its version field.
  size_t need = sizeof(FlightLayout);
  if (bytes.size() >= offsetof(FlightLayout, version) + sizeof(uint32_t)) {
    uint32_t version = 0;
    std::memcpy(&version, bytes.data() + offsetof(FlightLayout, version), sizeof version);
    if (version == 1) need = kFlightLayoutV1Size;
  }
  if (bytes.size() < need)
    return Error{"flight record", std::to_string(bytes.size()) + " bytes",
                 "is too short: a record has " + std::to_string(need)};
  FlightLayout l;  // a version-1 record leaves the expert slots at 0 (never used)
  std::memcpy(static_cast<void*>(&l), bytes.data(), need);
  return flight_state_of(l);
}

Result<FlightState> read_flight_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{file, "", "cannot be opened: " + std::string(std::strerror(errno))}.as(ErrorKind::io);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kFlightLayoutV1Size &&
      static_cast<size_t>(st.st_size) < sizeof(FlightLayout)) {
    // A version-1 record (an older meshtrain's): read as bytes, checked by its version field.
    std::string bytes(kFlightLayoutV1Size, '\0');
    const ssize_t got = ::pread(fd, bytes.data(), bytes.size(), 0);
    ::close(fd);
    bytes.resize(got > 0 ? static_cast<size_t>(got) : 0);
    auto s = parse_flight_bytes(bytes);
    if (!s) return Error{file, s.error().field + " " + s.error().value, s.error().allowed};
    return s;
  }
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(FlightLayout)) {
    ::close(fd);
    return Error{file, std::to_string(st.st_size) + " bytes",
                 "is too short for a flight record (" + std::to_string(sizeof(FlightLayout)) + " bytes)"};
  }
  void* map = ::mmap(nullptr, sizeof(FlightLayout), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Error{file, "", "cannot be mapped: " + std::string(std::strerror(errno))}.as(ErrorKind::io);
  const auto& live = *static_cast<const FlightLayout*>(map);
  FlightLayout copy;
  bool got = false;
  // A writer that keeps moving is retried for a while; one stopped inside an update (odd and
  // unchanged: a SIGSTOP between its stores) is read as it is, at most one update half applied.
  uint64_t stuck = 0;
  int stuck_rounds = 0;
  for (int round = 0; round < 200 && !got; ++round) {
    got = snapshot_flight(live, copy);
    if (got) break;
    const uint64_t g = std::atomic_ref<uint64_t>(const_cast<uint64_t&>(live.generation)).load(std::memory_order_acquire);
    stuck_rounds = g == stuck ? stuck_rounds + 1 : 0;
    stuck = g;
    if (stuck_rounds >= 20) {
      std::memcpy(static_cast<void*>(&copy), &live, sizeof copy);
      got = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::munmap(map, sizeof(FlightLayout));
  if (!got) return Error{file, "generation", "kept changing: no stable snapshot of the flight record"};
  auto s = flight_state_of(copy);
  if (!s) {
    Error e = s.error();
    return Error{file, e.field + " " + e.value, e.allowed};
  }
  return s;
}

nlohmann::json to_json(const FlightOp& op) {
  nlohmann::json j = {{"group", op.group.name()}, {"op", std::string(to_string(op.op))}, {"seq", op.seq},
                      {"bytes", op.bytes},         {"enter", op.enter}};
  if (op.exit > 0) j["exit"] = op.exit;
  return j;
}

nlohmann::json to_json(const FlightState& s) {
  nlohmann::json j = {{"rank", s.rank},
                      {"pid", s.pid},
                      {"step", s.step},
                      {"phase", std::string(to_string(s.phase))},
                      {"layer", s.layer},
                      {"phase_since", s.phase_since},
                      {"activity", s.activity},
                      {"generation", s.generation}};
  if (s.current) j["current"] = to_json(*s.current);
  nlohmann::json recent = nlohmann::json::array();
  for (const auto& op : s.recent) recent.push_back(to_json(op));
  j["recent"] = std::move(recent);
  nlohmann::json last = nlohmann::json::object();
  for (const auto& [g, seq] : s.last_seq) last[g.name()] = seq;
  j["last_seq"] = std::move(last);
  return j;
}

Result<FlightState> flight_state_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"flight state", shown(j), "a JSON object"};
  Fields f(j, "");
  FlightState s;
  int64_t v = 0;
  if (auto e = f.integer("rank", v, 0, INT32_MAX)) return *e;
  s.rank = static_cast<int>(v);
  if (auto e = f.integer("pid", s.pid, 0, INT64_MAX)) return *e;
  if (auto e = f.integer("step", s.step, -1, INT64_MAX)) return *e;
  std::string word;
  if (auto e = f.word("phase", word, allowed(kPhaseNames, kPhaseCount))) return *e;
  auto phase = flight_phase_from_name(word);
  if (!phase) return f.bad("phase", allowed(kPhaseNames, kPhaseCount));
  s.phase = *phase;
  v = -1;
  if (auto e = f.integer("layer", v, -1, INT32_MAX, false)) return *e;
  s.layer = static_cast<int>(v);
  if (auto e = f.time("phase_since", s.phase_since)) return *e;
  if (auto e = f.time("activity", s.activity)) return *e;
  if (auto e = f.unsigned_integer("generation", s.generation)) return *e;
  if (j.contains("current")) {
    auto op = op_from_json(j.at("current"), "current", false);
    if (!op) return op.error();
    s.current = *op;
  }
  if (j.contains("recent")) {
    const auto& r = j.at("recent");
    if (!r.is_array()) return f.bad("recent", "an array of completed ops");
    if (r.size() > static_cast<size_t>(kFlightRing))
      return Error{"recent", std::to_string(r.size()) + " ops", "at most " + std::to_string(kFlightRing)};
    for (size_t i = 0; i < r.size(); ++i) {
      auto op = op_from_json(r[i], "recent[" + std::to_string(i) + "]", true);
      if (!op) return op.error();
      s.recent.push_back(*op);
    }
  }
  if (j.contains("last_seq")) {
    const auto& l = j.at("last_seq");
    if (!l.is_object()) return f.bad("last_seq", "an object of group: seq");
    for (const auto& [key, value] : l.items()) {
      auto g = flight_group_from_name(key);
      if (!g) return Error{"last_seq", key, "a group: " + group_names()};
      if (!value.is_number_integer() || value.get<int64_t>() < 1)
        return Error{"last_seq." + key, shown(value), "a whole number >= 1"};
      s.last_seq.emplace_back(*g, value.get<int64_t>());
    }
  }
  return s;
}

}  // namespace meshwork
