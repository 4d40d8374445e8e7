// The supervisor's exit record: how one node's supervisor (trainer/supervisor.cpp) ended and, when
// a rank failed, which rank, on which node, how (exit code or signal), when, and what it was doing.
// The supervisor writes it into its run directory as exit-node<n>.json (a temporary file renamed
// into place, so a reader sees a whole record or none) whenever it ends; the follower
// (remote/follower.cpp) reads it to name a failed run's root cause, so nothing parses the
// supervisor's English. Supervisors also hand their record to each other through the rendezvous
// store ("meshwork/failed"): a node stopped because another failed records that failure as well.
//
//   {"v":1,"node":1,"host":"n2","outcome":"rank_failed","exit_code":3,"time":1765012345.5,
//    "reason":"rank 3 on node 1: killed by signal KILL (9)",
//    "failure":{"rank":3,"node":1,"signal":9,"time":1765012345.2,"phase":"training","last_step":7}}
// A failure may carry "reason": the rank's own end record's words (its watchdog's finding).
//
// A failure carries "signal" (> 0) when the rank was killed by one, else "exit_code".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace meshwork {

inline constexpr int kExitRecordVersion = 1;

// How a supervisor ended.
enum class ExitOutcome {
  ok,            // every local rank finished
  rank_failed,   // one of its own ranks exited non-zero or was killed (`failure` names it)
  peer_failed,   // another node reported a failed rank (`failure` is that node's, when known)
  stopped,       // stopped by a signal to a supervisor (this one's or another node's)
  store_lost,    // the run's rendezvous store went away
  start_failed,  // could not reach the store or start a rank
};
std::string_view to_string(ExitOutcome outcome);

// What a rank was doing when it ended, as far as its metrics file tells: nothing written yet
// (rendezvous, loading the model), training (after its start record or a step), or past its own
// end record.
enum class RankPhase { startup, training, ended };
std::string_view to_string(RankPhase phase);

struct RankProgress {
  RankPhase phase = RankPhase::startup;
  int64_t last_step = -1;  // the last step record's step (0-based), -1 before the first
};
// The progress a rank's metrics lines show (any tail of the file: a partial or malformed line is
// skipped). The last record decides: none = startup, end = ended, anything else = training.
RankProgress rank_progress(std::string_view metrics_lines);
// The reason of the last "failed" end record in those lines ("watchdog: all_reduce on dp_cp #12
// waited 240 s; rank 1 never entered it"): the rank's own word on why it ended; "" when none.
std::string failed_end_reason(std::string_view metrics_lines);

struct RankFailure {
  int rank = -1;   // global rank
  int node = -1;   // node rank of the supervisor that saw it end
  int exit_code = 0;  // meaningful when signal == 0
  int signal = 0;     // the signal that killed it, 0 when it exited
  double time = 0;    // unix seconds, when its supervisor saw it end
  RankProgress progress;
  std::string reason;  // the rank's own reason (failed_end_reason), "" when it gave none
  // "killed by signal 9 (SIGKILL)" / "exited with code 1".
  std::string how() const;
  // "during startup" / "before its first step" / "after step 7" / "after its end record", then
  // the rank's own reason when it gave one ("after step 7: watchdog: ...").
  std::string when() const;
};

struct ExitRecord {
  int node = 0;
  std::string host;
  ExitOutcome outcome = ExitOutcome::ok;
  int exit_code = 0;  // the supervisor's own exit code
  double time = 0;    // unix seconds, when the supervisor ended
  std::string reason;  // the supervisor's words, as on its stderr ("" when ok)
  std::optional<RankFailure> failure;
};

// exit-node<n>.json, in the run directory.
std::string exit_record_file(int node);

nlohmann::json to_json(const ExitRecord& r);
// Errors name the field ("failure.signal"), its value and what is allowed.
Result<ExitRecord> exit_record_from_json(const nlohmann::json& j);
Result<ExitRecord> parse_exit_record(std::string_view text);

}  // namespace meshwork
