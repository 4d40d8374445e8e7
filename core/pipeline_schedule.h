// The order in which each pipeline stage runs its work in one optimizer step, and a simulator of
// those orders over time: meshtrain executes the lists, the estimator and the bench read the
// simulated step (bubble included), and the tests check the lists against the closed forms of
// core/pipeline.h.
//
// A stage rank's list holds one forward and one backward per (micro-batch, chunk) it runs. A
// forward of chunk k > 0 needs chunk k - 1's forward of the same micro-batch (its activation, one
// hop away); a backward of chunk k < K - 1 needs chunk k + 1's backward (the activation gradient).
// meshtrain sends without waiting and blocks only to receive, so a list set is runnable exactly
// when the simulator finds no cycle: every rank's next action eventually gets its input.
//
// The schedules, for pp stages, V chunks per rank, M micro-batches (K = pp V chunks):
//   gpipe:            every forward (micro-batch order), then every backward (same order).
//   1f1b:             w = min(M, pp - rank - 1) warm-up forwards, then forward/backward pairs,
//                     then the remaining backwards (PipeDream-Flush, Narayanan et al. 2021).
//   interleaved-1f1b: Megatron-LM's: virtual micro-batches i = 0..MV-1 go pp at a time through
//                     chunk (i / pp) mod V, micro-batch (i / (pp V)) pp + i mod pp; backwards visit
//                     the chunks in reverse; w = min(MV, 2 (pp - rank - 1) + (V - 1) pp) warm-up
//                     forwards, then pairs, then the rest. Needs M a multiple of pp (validation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/run_config.h"

namespace meshwork {

struct PipelineAction {
  enum Kind { forward, backward };
  Kind kind = forward;
  int64_t micro_batch = 0;
  int chunk = 0;  // global chunk index 0..K-1 (pipeline_cut's); it runs on rank chunk % pp
  bool operator==(const PipelineAction&) const = default;
};

// Stage rank `rank`'s actions for one step, in order.
std::vector<PipelineAction> pipeline_schedule(PipelineSchedule schedule, int pp, int virtual_stages,
                                              int64_t micro_batches, int rank);

// The most forwards a list has run whose backward has not: the micro-batch activations the rank
// holds at its peak (pipeline_in_flight's closed form, counted).
int64_t peak_in_flight(const std::vector<PipelineAction>& actions);

struct PipelineTimeline {
  double step_s = 0;             // last backward's end, every rank starting at 0
  std::vector<double> busy_s;    // per rank: time spent running actions
  std::vector<double> idle_s;    // per rank: step_s - busy_s (waiting for a neighbour)
  double bubble_fraction = 0;    // mean idle share: sum(idle) / (pp * step_s)
};

// Runs every rank's list (pipeline_schedule) on a timeline: an action starts when its rank is free
// and its input has arrived (the producing action's end + hop_s when it ran on another rank).
// forward_s / backward_s: per chunk, one micro-batch's time. An error names the stuck actions
// when the lists wait on each other (they cannot run).
Result<PipelineTimeline> simulate_pipeline(PipelineSchedule schedule, int pp, int virtual_stages,
                                           int64_t micro_batches, const std::vector<double>& forward_s,
                                           const std::vector<double>& backward_s, double hop_s = 0);

// The same for any lists (one per stage rank; chunks as above, K = forward_s.size()): a list set
// that cannot run is an error naming each rank's stuck action.
Result<PipelineTimeline> simulate_pipeline(const std::vector<std::vector<PipelineAction>>& stage_lists,
                                           const std::vector<double>& forward_s,
                                           const std::vector<double>& backward_s, double hop_s = 0);

std::string to_string(const PipelineAction& a);  // "F3@1" / "B0@2": micro-batch @ chunk

}  // namespace meshwork
