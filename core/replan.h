// Re-planning a run for the nodes that are left. When a node of a run is lost, the run resumes
// from its last complete checkpoint on the survivors: this picks the shape. It is the planner's
// question asked again with the run's own model, sequence length and global batch (the batch is
// kept so that training continues as if nothing had happened: accumulation absorbs a smaller
// data-parallel size), on a cluster of the surviving nodes only. The workbench, `meshwork resume`
// and an elastic launch all call replan_for_survivors(); none chooses a shape of its own.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/planner.h"
#include "core/run_config.h"

namespace meshwork {

struct ReplanInput {
  RunConfig run;                        // the run as it was launched (its nodes, mesh, training)
  std::vector<std::string> lost_hosts;  // hosts of run.nodes to leave out (NodeConfig::host)
  int64_t device_memory_bytes = 0;      // one rank's memory on the surviving nodes
  EstimateOptions estimate;             // as the original plan judged it (hardware, calibration)
};

struct Replan {
  RunConfig run;          // the run to resume: surviving nodes, the new mesh, the same training
  MeshShape old_shape;
  MeshShape new_shape;
  PlanEntry chosen;       // its memory and time estimate
  int candidates = 0;     // valid shapes that fit the survivors
  std::string reason;     // in words: why this shape
};

// The best valid shape that fits the survivors, in the planner's order. Surviving nodes keep
// their slots; when they differ, every node runs the smallest count (the planner lays out equal
// nodes). pp stays 1 unless the run was pipelined. Errors: a lost host the run does not have, or
// no node left (invalid_input); no shape that fits (does_not_fit), with what would: more nodes of
// the same memory, or activation checkpointing, whichever the planner finds to fit.
Result<Replan> replan_for_survivors(const ReplanInput& input);

}  // namespace meshwork
