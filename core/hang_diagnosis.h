// Where a run hangs or slows: a diagnosis from what the ranks last reported.
//
// Inputs, all already on the workbench's side: each rank's last completed step (the store's step
// records), each stalled rank's flight record with its process state (the follow stream's S
// frames, core/flight_record.h), and the recent per-rank step, compute and per-axis wait times.
//
// Hang: no rank completed a step for T (default the larger of 60 s and 5 x the median step;
// settable). Then, for every group instance with ranks waiting inside a collective at sequence
// number s, its members that have not entered s are "missing"; ranks waiting form a wait-for
// graph (waiter -> missing member), and the culprits are the ranks that are waited for and wait
// on no one (stuck in compute, in data, stopped, gone). Waiters that disagree on the op or its
// size at the same s are a mismatch: a bug in the program, not a slow peer.
//
// Straggler (the run is alive). With the ranks' CPU time (every recent step holds cpu_s): the
// rank its group peers wait on, on its axes together, longer than it waits on them and longer
// than any of its peers is waited on (a wait-for graph over the axes' groups: a waiting peer is
// never the one held up the most among its own peers); slow in "compute" when it also used more
// CPU than its peers by about that much, else "not running" (stopped, descheduled, throttled:
// its wall time is not matched by CPU time). Without CPU time, or when no rank is held up: a
// rank whose compute time is well above the median rank's, or whose wait on one axis is well
// above its peers' on that axis while its compute is normal (a slow link).
//
// Work is O(ranks + group members of the waited groups): one pass at 1,024 nodes x 8 ranks.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/flight_record.h"
#include "core/mesh.h"

namespace meshwork {

// What is known about one rank.
struct RankObservation {
  int rank = 0;
  int node = 0;
  std::string host;
  int64_t pid = 0;
  int64_t last_step = -1;    // the last completed step (0-based), -1 when none
  double last_step_time = 0;  // unix seconds it was recorded, 0 when none
  // The rank's latest stall report: its flight record and process state. Unset when the rank
  // never stalled (it is moving) or nothing has been heard.
  std::optional<FlightState> flight;
  bool stalled = false;
  std::string process;  // "running" | "stopped" | "zombie" | "gone" | "" (unknown)
  std::string ended;    // the rank's end record ("failed: killed by signal KILL (9)"), "" while live
};

// A rank's recent timing: medians over its last few steps.
struct RankTiming {
  int rank = 0;
  int steps = 0;  // steps the medians are over
  double step_s = 0;
  double compute_s = 0;
  AxisArray<double> comm_s;
  // Means over the same steps: a rank stopped now and then loses its time in a few steps, which
  // the medians hide. cpu_mean_s: the process's CPU seconds per step (docs/metrics.md, "cpu_s"),
  // unset when any of the steps lacks it (records of older meshtrains).
  double step_mean_s = 0;
  AxisArray<double> comm_mean_s;
  std::optional<double> cpu_mean_s;
};

struct DiagnosisInput {
  MeshShape shape;         // resolved
  int ranks_per_node = 1;
  double now = 0;          // unix seconds
  double started = 0;      // when the run started (its first start record), unix seconds
  std::vector<RankObservation> ranks;  // one per rank, any order
  std::vector<RankTiming> timings;     // ranks with recent steps
  std::optional<double> hang_after_s;  // T; unset: max(60 s, 5 x median step)
};

// failed: the run ended with a failed rank (diagnose_ended); the others describe a live run.
enum class HealthState { healthy, hang, mismatch, straggler, failed };
std::string_view to_string(HealthState state);

struct Culprit {
  int rank = 0;
  int node = 0;
  std::string host;
  int64_t pid = 0;
  std::string phase;    // "backward layer 3", "data", "in all_reduce on tp #12", "moving"
  std::string process;  // "running" | "stopped" | "zombie" | "gone" | "" (unknown)
  std::string ended;    // its end record, when it has one
  double last_activity = 0;  // unix seconds, 0 when unknown
  std::vector<int> waited_by;  // ranks waiting on it directly
};

struct WaitingGroup {
  std::string axis;  // the group: "dp_shard", "dp_shard_cp", "world", ...
  std::string op;
  int64_t seq = 0;
  int64_t bytes = 0;
  std::vector<int> ranks;    // waiting inside the op at seq
  std::vector<int> missing;  // members that never entered it
  double since = 0;          // the earliest waiter's enter time
};

struct MismatchSide {
  std::string op;
  int64_t bytes = 0;
  std::vector<int> ranks;
};
struct Mismatch {
  std::string axis;
  int64_t seq = 0;
  std::vector<MismatchSide> sides;
};

struct Straggler {
  int rank = 0;
  int node = 0;
  std::string host;
  std::string slow_in;  // "compute", "not running" or "waiting on <axis>"
  // Its median of what it is slow in, and the median rank's; for "not running": how long its
  // peers waited on it per step (the mean, on the axis they waited on most), and the median
  // rank's same.
  double seconds = 0;
  double median_s = 0;
  std::string others_wait_on;  // for a compute straggler: the axis its peers wait on most, or ""
};

struct Diagnosis {
  HealthState state = HealthState::healthy;
  double threshold_s = 0;  // T
  double silent_s = 0;     // since the last completed step (any rank)
  std::vector<Culprit> culprits;
  std::vector<WaitingGroup> waiting;
  std::vector<Mismatch> mismatches;
  std::vector<Straggler> stragglers;
  std::vector<std::string> notes;  // what could not be judged, in words
  // One paragraph, e.g. "hung for 2 min 10 s: ranks 0-6 wait in all_gather on dp_shard #1234;
  // rank 7 (node1, pid 4242) never entered it: stopped, last in backward layer 3".
  std::string summary() const;
  // {"state", "silent_s", "threshold_s", "culprits": [{"rank","node","host","pid","phase",
  //  "process","ended","last_activity","waited_by"}], "waiting": [{"axis","op","seq","bytes",
  //  "ranks","missing","since"}], "mismatches": [...], "stragglers": [...], "notes", "summary"}
  nlohmann::json to_json() const;
};

Diagnosis diagnose(const DiagnosisInput& input);
// A run that ended: `failed` when it failed, its failed ranks (end records "failed: ...") the
// culprits, "gone" with how they ended; else healthy with a note. `reason`: the run's exit reason.
Diagnosis diagnose_ended(const DiagnosisInput& input, std::string_view status, std::string_view reason);

// "0-6, 9, 11-12".
std::string rank_ranges(std::vector<int> ranks);
// "2 min 10 s", "45 s", "1 h 3 min".
std::string duration_words(double seconds);

}  // namespace meshwork
