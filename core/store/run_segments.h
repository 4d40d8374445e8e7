// The segments of a run that was re-planned: a run that lost a node and resumed on the survivors
// at another shape stays ONE run in the store, its segments in order, so that charts continue on
// the same step axis with each shape change marked, and Compare treats it as one run.
//
// Schema (created on first use; independent of schema_version, like rank_states.h):
//   run_segments(run, segment, from_step, mesh, world, hosts, cause, time)  PRIMARY KEY(run, segment)
// Segment 0 is the run as launched (its config's mesh); it is written the first time a later one
// is, so runs that never re-planned have no rows and cost nothing.
//
// Points of the steps a resumed segment replays (from its checkpoint up to where the lost segment
// had got) keep the values first stored, as every point does (run_store.h): a resume is exact,
// so the losses are the same, and the new segment's own values begin after them.
#pragma once

#include <string>
#include <vector>

#include <sqlite3.h>

#include "core/mesh.h"
#include "core/store/run_store.h"

namespace meshwork::store {

struct RunSegment {
  int segment = 0;
  int64_t from_step = 1;  // the first step this segment trains
  MeshShape mesh;
  int world = 0;
  std::vector<std::string> hosts;
  std::string cause;  // why it began: "launched", "node gpu-7 lost: its ranks exited 137", ...
  double time = 0;    // unix seconds
};

// Appends a segment (the next index) in one transaction, writing segment 0 from the run's config
// first when the run has none. from_step must be >= 1 and not before the last segment's start.
Result<RunSegment> begin_segment(RunStore& store, RunId run, int64_t from_step, const MeshShape& mesh,
                                 const std::vector<std::string>& hosts, std::string cause, double time);
// Segments in order; empty for a run that never re-planned.
Result<std::vector<RunSegment>> run_segments(RunStore& store, RunId run);
// Replaces the run's cluster record (RunInfo::cluster): a resumed segment's launch is where the
// run now runs, so attach and stop find it there.
Status set_run_cluster(RunStore& store, RunId run, const nlohmann::json& cluster);
// delete_run's part.
Status forget_run_segments(sqlite3* db, RunId run);

}  // namespace meshwork::store
