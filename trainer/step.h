// The training step, one function for every caller: Trainer::train_step (train.cpp) runs it for
// each step of a run, and `meshtrain calibrate` (calibrate.cpp) times it on its split steps, so
// what calibration measures is the step training runs, never a copy of it.
//
// A step: forward and backward of each accumulation micro-batch (the gradient sync armed before
// the last one's backward; with pipeline stages, the schedule of parallelize_pp.h instead),
// gradient finishing, the global norm, AdamW with the clipping coefficient applied on the fly,
// zeroed gradients, and the loss summed over the replicas. The model, optimizer and groups are
// built beforehand (parallelize_options(), step_parts()): the step allocates nothing of its
// own beyond what the model's forward and backward do.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include <ATen/ATen.h>

#include "core/metrics.h"
#include "core/parallel_layout.h"
#include "core/run_config.h"
#include "trainer/comm.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"
#include "trainer/parallelize.h"
#include "trainer/parallelize_pp.h"

namespace meshwork::trainer {

// What a step works on. Every pointer must outlive the calls of run_step().
struct StepParts {
  ParallelModel* model = nullptr;
  PipelineStage* pipeline = nullptr;  // pp > 1; null: the micro-batches run here one by one
  Communicator* comm = nullptr;
  AdamW* optimizer = nullptr;
  ForwardOptions forward;
  int64_t micro_batches = 1;  // gradient accumulation steps (ParallelLayout::grad_accum_steps)
  double global_tokens = 1;   // tokens of the global batch: the loss is their mean
  double max_grad_norm = 0;   // clipping; 0: none
  at::Device device = at::kCPU;  // CUDA: the step's time is taken once the device is done
};

// What one step measured.
struct StepResult {
  double loss = 0;       // mean next-token loss over the global batch
  double grad_norm = 0;  // before clipping
  double step_s = 0;     // wall time of the whole step (the device waited for)
  double cpu_s = 0;      // CPU time of this process during it (every thread, user + system)
  // A mixture of experts' routing over the global batch (tokens per expert summed over the
  // data-parallel ranks, the aux loss averaged over every forward call); unset for a dense model.
  std::optional<MoeStepMetrics> moe;
};

// (inputs, targets) of micro-batch m, this rank's cp shards. Asked for in order, each just
// before its forward; without pipeline stages a micro-batch's backward is done before the next
// is asked for, so the caller may hand out views of one reused buffer.
using MicroBatches = PipelineStage::Batch;

// One optimizer step at learning rate `lr`. Resets parts.comm's times first: afterwards they
// hold what this step spent communicating, per axis.
StepResult run_step(StepParts& parts, double lr, const MicroBatches& batches);

// Called after every run_step() of this process with the world rank of the step's communicator
// and what it measured, outside the timed part. For tests: what training and calibration ran
// goes through this one door. Set it before any rank starts and clear it (an empty function)
// after they are done; it may be called from several threads at once when ranks are threads.
using StepObserver = std::function<void(int rank, const StepResult& step)>;
void set_step_observer(StepObserver observer);

// parallelize()'s options for a run of `t` on `layout` (the seed and any checkpoint reader
// are the caller's).
ParallelizeOptions parallelize_options(const TrainingConfig& t, const ParallelLayout& layout, at::Device device);

// The parts of a step of `t` on `layout` over this rank's parallelized model (built with
// parallelize_options()), its communicator and optimizer: the forward options (activation
// checkpointing, the compute precision, this rank's RoPE positions and their tables, made once
// for every micro-batch), the accumulation, the global batch's tokens and the clipping. The
// pipeline stage, with pp > 1, is the caller's to set.
StepParts step_parts(const TrainingConfig& t, const ParallelLayout& layout, const Model& model, ParallelModel& pm,
                     Communicator& comm, AdamW& optimizer, at::Device device);

// The optimizer of a run of `t` over this rank's parallelized parameters (its moments allocated
// here): training and calibration set it up alike, so calibration times the update training runs.
void init_optimizer(AdamW& optimizer, const TrainingConfig& t, ParallelModel& pm);

}  // namespace meshwork::trainer
