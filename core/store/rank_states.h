// The ranks' latest stall reports (the follow stream's S frames, core/follow_stream.h) and the
// follower's heartbeat, kept with the run so that `meshwork diagnose`, the workbench and the web
// view read one place; and the diagnosis' inputs gathered from the store (core/hang_diagnosis.h).
//
// Schema (created on first use; independent of schema_version, like calibration_store.h):
//   rank_states(run, rank, time, stalled, process, flight)  one row per rank that ever stalled:
//               its latest report (flight = the FlightState JSON), PRIMARY KEY(run, rank)
//   follow_beats(run PRIMARY KEY, time)                      when a follower last wrote: states
//               older than the follower's last beat are current; with no live follower they
//               are what was last known
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sqlite3.h>

#include "core/flight_record.h"
#include "core/hang_diagnosis.h"
#include "core/store/run_store.h"

namespace meshwork::store {

struct StoredRankState {
  int rank = 0;
  double time = 0;  // unix seconds the report arrived
  bool stalled = false;
  std::string process;  // "running" | "stopped" | "zombie" | "gone"
  std::optional<FlightState> flight;
};

// Upserts the reports (one transaction), and the follower's beat at `beat_time` when > 0.
Status put_rank_states(RunStore& store, RunId run, const std::vector<StoredRankState>& states,
                       double beat_time = 0);
Status put_follow_beat(RunStore& store, RunId run, double time);
Result<std::vector<StoredRankState>> rank_states(RunStore& store, RunId run);
// When a follower last wrote for the run; unset when none ever did.
Result<std::optional<double>> follow_beat(RunStore& store, RunId run);
// delete_run's part: forgets the run's reports and beat.
Status forget_rank_states(sqlite3* db, RunId run);

// What diagnose() needs, from the store: every rank's last step, its latest report, its end
// record; the medians of its last `recent_steps` steps. The run's config gives the shape.
struct DiagnosisSource {
  DiagnosisInput input;
  std::string status;               // the run's status word
  std::optional<double> follow_beat;  // when a follower last wrote
};
Result<DiagnosisSource> diagnosis_source(RunStore& store, RunId run, double now, int recent_steps = 10);

// The diagnosis as `meshwork diagnose` and the web view show it: diagnose() while the run is live
// (with a note when no follower wrote for over 10 s: the states may be old), diagnose_ended()
// once it ended. `hang_after_s`: T, unset for the default.
struct RunHealth {
  Diagnosis diagnosis;
  std::string status;                    // the run's status word
  std::optional<double> follower_age_s;  // seconds since a follower last wrote; unset when none did
  // Diagnosis::to_json() plus "run", "status" and "follower" (follower_age_s, null when unset).
  nlohmann::json to_json(RunId run) const;
};
Result<RunHealth> run_health(RunStore& store, RunId run, double now, std::optional<double> hang_after_s = {});

// A rank x step heat map of the last `steps` steps: per row (a rank, or a block of consecutive
// ranks when there are more than `max_rows`: the block's slowest) and step, the step time and the
// time spent waiting in collectives (the sum over axes). NaN where nothing was stored.
struct StepHeat {
  int64_t first_step = 0;
  int steps = 0;
  int rows = 0;
  int ranks_per_row = 1;
  std::vector<double> step_s;  // rows x steps, row-major
  std::vector<double> wait_s;
  double max_step_s = 0;
  double max_wait_s = 0;
};
Result<StepHeat> step_heat(RunStore& store, RunId run, int steps = 64, int max_rows = 512);

}  // namespace meshwork::store
