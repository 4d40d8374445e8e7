// The flight recorder's record: what each meshtrain rank is doing right now and its last
// collectives, readable by another process on the same node while the rank runs, hangs, is stopped
// or is gone.
//
// Writer: trainer/flight_recorder.h keeps it in a small file mapped into the rank's memory
// (RUN_DIR/flight-rank<r>.bin, MAP_SHARED), so recording costs plain stores, no system call.
// Readers: `meshtrain tail` (which streams a rank's state to the workbench when it stalls),
// meshtrain's own watchdog, and tests. A reader sees a consistent snapshot through the generation
// counter (a seqlock: odd while the writer is inside an update; read, copy, read again, retry
// when it moved).
//
// The state as JSON (what the follow stream's S frame carries and the store keeps; keys in any
// order, unknown keys ignored):
//   {"rank":7,"pid":4242,"step":12,"phase":"backward","layer":3,"phase_since":1765012345.2,
//    "activity":1765012345.9,"generation":91234,
//    "current":{"group":"dp_shard","op":"all_gather","seq":1234,"bytes":1048576,
//               "enter":1765012345.9},
//    "recent":[{"group":"tp","op":"all_reduce","seq":88,"bytes":4096,"enter":...,"exit":...},...],
//    "last_seq":{"dp_shard":1233,"tp":88,"ep":412}}
// `current` is present only while the rank is inside a collective; `recent` holds completed ones,
// oldest first; `last_seq` is the sequence number of the last collective the rank ENTERED on each
// group it has used (a rank that waits at seq 1234 on dp_shard while a peer's last_seq there is
// 1233 has a peer that never entered).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mesh.h"

namespace meshwork {

// What a rank is doing. `collective` is implied by FlightState::current; the phase says what the
// rank was doing around it (a collective inside backward layer 3 reads "backward, layer 3").
enum class FlightPhase { startup, data, forward, backward, optimizer, checkpoint, eval, ended };
std::string_view to_string(FlightPhase phase);
std::optional<FlightPhase> flight_phase_from_name(std::string_view name);

// The group of a collective: one of the dense mesh's groups, the whole world, or a group of the
// sparse (expert) mesh: ep (the experts' all-to-alls) or efsdp (their FSDP gathers and scatters).
struct FlightGroup {
  bool world = false;
  GroupKind kind = GroupKind::dp;          // meaningful when !world and !expert
  std::optional<ExpertGroupKind> expert = std::nullopt;  // set: a sparse mesh's group (kind then unused)
  std::string name() const;                // "dp_shard", ..., "world", "ep", "efsdp"
  friend bool operator==(const FlightGroup&, const FlightGroup&) = default;
};
std::optional<FlightGroup> flight_group_from_name(std::string_view name);

// Collective kinds recorded (Communicator's operations).
enum class FlightOpKind { all_reduce, all_gather, reduce_scatter, broadcast, send, recv, send_recv, barrier, all_to_all };
std::string_view to_string(FlightOpKind op);
std::optional<FlightOpKind> flight_op_from_name(std::string_view name);

struct FlightOp {
  FlightGroup group;
  FlightOpKind op = FlightOpKind::all_reduce;
  int64_t seq = 0;     // 1-based count of collectives this rank entered on `group`
  int64_t bytes = 0;   // this rank's input bytes
  double enter = 0;    // unix seconds
  double exit = 0;     // unix seconds; 0 while inside
};

struct FlightState {
  int rank = -1;
  int64_t pid = 0;
  int64_t step = -1;  // the optimizer step in progress (0-based), -1 before the first
  FlightPhase phase = FlightPhase::startup;
  int layer = -1;        // the decoder layer of forward/backward, -1 when none
  double phase_since = 0;  // unix seconds the phase began
  double activity = 0;     // unix seconds of the last change of anything in the record
  uint64_t generation = 0;  // bumped by every change (even when stable)
  uint32_t host_hash = 0;   // flight_layout.h's: which host wrote it (not in the JSON)
  std::optional<FlightOp> current;
  std::vector<FlightOp> recent;  // completed, oldest first (at most kFlightRing)
  std::vector<std::pair<FlightGroup, int64_t>> last_seq;  // per group used, the last seq entered
  std::optional<int64_t> last_seq_of(const FlightGroup& g) const;
};

inline constexpr int kFlightRing = 32;

// RUN_DIR/flight-rank<r>.bin.
std::string flight_file(int rank);

// Reads a flight file as written by trainer/flight_recorder (the binary layout is defined in
// flight_record.cpp, next to this reader, and used by the writer through flight_layout below).
// Errors name the file and what is wrong (too short, bad magic, version, no stable snapshot).
Result<FlightState> read_flight_file(const std::filesystem::path& path);
// The same from bytes already read (a snapshot copied by the reader).
Result<FlightState> parse_flight_bytes(std::string_view bytes);

nlohmann::json to_json(const FlightOp& op);
nlohmann::json to_json(const FlightState& state);
// Errors name the field ("current.op"), its value and what is allowed.
Result<FlightState> flight_state_from_json(const nlohmann::json& j);

}  // namespace meshwork
