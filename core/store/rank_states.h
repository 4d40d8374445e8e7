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

}  // namespace meshwork::store
