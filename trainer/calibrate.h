// `meshtrain calibrate`: micro-benchmarks of the cluster the run would use, run as a normal
// multi-rank job (same supervisor, rendezvous and communicators as training), in the spirit of
// nccl-tests. Each rank writes metrics records of type "calibration" (docs/metrics.md) between
// a start and an end record, so the measurements flow through the same follow/stream/store
// path as a training run; core/calibration_records.h turns them into a Calibration.
//
// What is measured (docs/estimator.md, "Calibration"):
//   - matmuls of the shapes the run config's model multiplies (q, kv, o, gate+up, down for
//     micro_batch x seq_len tokens; the lm_head), whole and split d ways for every d dividing
//     the world (as tp splits them), in fp32 and bf16, through the same call the model makes
//     (meshtrain's own GEMM where it applies, else at::linear), every rank of a node at once with the
//     intra-op threads a training rank gets (cores / local ranks); for a mixture of experts the
//     dense matmuls leave out the sparse layers' MLP, and the expert block (the grouped experts,
//     forward and backward) is timed at every ep dividing the experts and the world, with the
//     rows per expert balanced routing gives that ep;
//   - per kind of group, through trainer/comm.h exactly as training calls it (Gloo on CPU,
//     NCCL on CUDA; reduce-scatter as all-to-all + local sum on Gloo): all-reduce, all-gather,
//     reduce-scatter and a ring send/recv at 4 KiB, 64 KiB, 1 MiB and 16 MiB. Groups inside a
//     node: n consecutive ranks for every n >= 2 dividing the ranks per node (the tp groups of
//     W/n x 1 x 1 x n); across nodes: one rank per node (dp_replicate of nnodes x 1 x 1 x R),
//     k ranks of each node for every k dividing R between 1 and R, and the whole world when
//     nodes have several ranks (calibration_probes below).
// Rank 0, when every rank's metrics file is in its run directory (one node or a shared
// filesystem), also writes the fitted calibration to <run-dir>/calibration.json.
#pragma once

#include <vector>

#include "core/link_kind.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "trainer/options.h"

namespace meshwork::trainer {

// One group layout to measure: the shape whose groups of `kind` are the groups wanted, and the
// link they are fitted for.
struct CalibrationProbe {
  MeshShape shape;
  GroupKind kind;
  LinkKind link;
};

// The group layouts of a world of `ranks_per_node` ranks per node:
//   inside a node, n consecutive ranks (the tp groups of W/n x 1 x 1 x n; tp is the fastest
//     axis, so with n dividing the ranks per node R they never leave the node), every n >= 2
//     dividing R;
//   across nodes (nnodes > 1): one rank per node (the dp_replicate groups of nnodes x 1 x 1 x R,
//     a dp axis over nodes with tp inside); k ranks of every node for each k dividing R with
//     1 < k < R (the dp_shard groups of 1 x nnodes k x 1 x R/k, stride R/k: an FSDP axis outside
//     tp, an efsdp group, an ep group wider than a node; R/k groups share each node's link); and
//     the whole world when R > 1 (dp_shard of 1 x W x 1 x 1, FSDP over every rank).
std::vector<CalibrationProbe> calibration_probes(int world, int ranks_per_node);

// Runs this rank's calibration. Returns the process exit code (0 ok, 3 failed).
int calibrate_rank(const TrainerOptions& options, const LaunchEnv& env, const ModelSpec& spec);

}  // namespace meshwork::trainer
