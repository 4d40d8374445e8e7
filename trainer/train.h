// One rank of a meshtrain run: builds the communicators and the parallelized model
// (parallelize.h), then runs the training loop (a step per global batch, warmup + cosine LR,
// metrics, checkpoints, evaluation). The pieces live in their own files: rank_context.h (the
// rank's files, threads, device and communicators, shared with calibration), step.h (the step
// itself: gradient accumulation, global-norm clipping, AdamW; calibration times the same
// function), optimizer.h (AdamW), lr_schedule.h, metrics_sink.h, checkpoint.h, cpu_memory.h.
#pragma once

#include "core/parallel_layout.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "trainer/options.h"
// Included for the code that reached these through train.h before they had their own files
// (main.cpp installs the tracking allocator, fused_ops_test.cpp uses AdamW).
#include "trainer/cpu_memory.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"

namespace meshwork::trainer {

// Runs this rank to the end. Returns the process exit code (0 ok, 2 invalid input, 3 failed).
int run_rank(const TrainerOptions& options, const LaunchEnv& env, const ModelSpec& spec,
             const ParallelLayout& layout);

}  // namespace meshwork::trainer
