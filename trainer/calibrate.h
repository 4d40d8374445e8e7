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
//     intra-op threads a training rank gets (cores / local ranks);
//   - per kind of group, through trainer/comm.h exactly as training calls it (Gloo on CPU,
//     NCCL on CUDA; reduce-scatter as all-to-all + local sum on Gloo): all-reduce, all-gather,
//     reduce-scatter and a ring send/recv at 4 KiB, 64 KiB, 1 MiB and 16 MiB. Groups inside a
//     node: n consecutive ranks for every n >= 2 dividing the ranks per node (the tp groups of
//     W/n x 1 x 1 x n); across nodes: one rank per node (dp_replicate of nnodes x 1 x 1 x R) and
//     the whole world when nodes have several ranks.
// Rank 0, when every rank's metrics file is in its run directory (one node or a shared
// filesystem), also writes the fitted calibration to <run-dir>/calibration.json.
#pragma once

#include "core/model_spec.h"
#include "trainer/options.h"

namespace meshwork::trainer {

// Runs this rank's calibration. Returns the process exit code (0 ok, 3 failed).
int calibrate_rank(const TrainerOptions& options, const LaunchEnv& env, const ModelSpec& spec);

}  // namespace meshwork::trainer
