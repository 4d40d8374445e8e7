#include "trainer/step.h"

#include <chrono>
#include <sys/resource.h>

#include <torch/cuda.h>

#include "trainer/flight_recorder.h"

namespace meshwork::trainer {
namespace {

StepObserver g_observer;  // set_step_observer()

// The step's routing over the global batch: this rank's counts and aux losses summed over the
// data-parallel ranks and the pipeline stages (one small all-reduce; each rank routed only its own tokens). A call's cp
// ranks each report the call's aux loss, counted once per rank and divided by the count of forwards,
// which counts the call once per cp rank too: the mean is unchanged.
MoeStepMetrics moe_step_metrics(const MoeStepStats& stats, Communicator& comm, bool sequence_parallel) {
  std::vector<double> flat = {stats.aux_loss_sum, static_cast<double>(stats.forwards)};
  for (const auto& layer : stats.tokens_per_expert) flat.insert(flat.end(), layer.begin(), layer.end());
  at::Tensor t = at::tensor(flat, at::kDouble);
  comm.all_reduce(t, GroupKind::dp_cp);
  // Under sequence parallelism tp ranks routed different rows; otherwise the same ones. The aux
  // loss is the call's on every tp rank either way: averaged, not summed.
  const int tp = comm.group_size(GroupKind::tp);
  if (sequence_parallel && tp > 1) {
    comm.all_reduce(t, GroupKind::tp);
    t.narrow(0, 0, 2).div_(tp);
  }
  // Pipeline stages: each stage counted only its own sparse layers, and only the stage with the
  // head saw the calls complete (their aux losses): summed over pp, each is counted once.
  if (comm.group_size(GroupKind::pp) > 1) comm.all_reduce(t, GroupKind::pp);
  const double* v = t.data_ptr<double>();
  MoeStepMetrics m;
  m.aux_loss = v[1] > 0 ? v[0] / v[1] : 0;
  size_t at = 2;
  for (size_t i = 0; i < stats.layers.size(); ++i) {
    const size_t experts = stats.tokens_per_expert[i].size();
    m.layers.push_back(expert_load(stats.layers[i], std::vector<double>(v + at, v + at + experts)));
    at += experts;
  }
  return m;
}

// One getrusage per step end: a few hundred nanoseconds against a step of milliseconds.
double process_cpu_seconds() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace

void set_step_observer(StepObserver observer) { g_observer = std::move(observer); }

StepResult run_step(StepParts& p, double lr, const MicroBatches& batches) {
  ParallelModel& pm = *p.model;
  Communicator& comm = *p.comm;
  comm.times().reset();
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = process_cpu_seconds();
  StepResult r;
  const Model& model = pm.model();
  if (model.spec().is_moe()) model.moe_stats().reset(model.spec());
  at::Tensor local_loss;
  if (p.pipeline) {
    local_loss = p.pipeline->train_step(batches, p.global_tokens, p.forward);
  } else {
    local_loss = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(p.device));
    for (int64_t m = 0; m < p.micro_batches; ++m) {
      auto [inputs, targets] = batches(m);
      if (m == p.micro_batches - 1) pm.arm_gradient_sync();
      flight_phase(FlightPhase::forward);
      at::Tensor loss_sum = pm.loss_sum(inputs, targets, p.forward);
      flight_phase(FlightPhase::backward);  // the head's; each decoder layer marks its own
      // Mean over every token of the global batch: each rank's share divided by the global
      // token count, gradients summed over ranks (parallelize_dp.h).
      (loss_sum / p.global_tokens).backward();
      local_loss += loss_sum.detach().to(at::kDouble);
    }
  }
  pm.finish_gradients();
  flight_phase(FlightPhase::optimizer);
  r.grad_norm = pm.grad_norm();
  // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied when < 1.
  // The coefficient is applied inside the optimizer's pass over the gradients.
  double clip = 1.0;
  if (p.max_grad_norm > 0) {
    const double coef = p.max_grad_norm / (r.grad_norm + 1e-6);
    if (coef < 1) clip = coef;
  }
  p.optimizer->update(pm.params(), lr, clip);
  pm.zero_grad();
  comm.all_reduce(local_loss, GroupKind::dp_cp);
  if (p.pipeline) comm.all_reduce(local_loss, GroupKind::pp);  // the loss is on the last stage
  r.loss = local_loss.item<double>() / p.global_tokens;
  if (model.spec().is_moe()) r.moe = moe_step_metrics(model.moe_stats(), comm, pm.sequence_parallel());
  if (p.device.is_cuda()) torch::cuda::synchronize();
  r.step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.cpu_s = process_cpu_seconds() - cpu0;
  if (g_observer) g_observer(comm.rank(), r);
  return r;
}

ParallelizeOptions parallelize_options(const TrainingConfig& t, const ParallelLayout& layout, at::Device device) {
  ParallelizeOptions po;
  po.sequence_parallel = t.sequence_parallel;
  po.compute_dtype = t.precision == Precision::bf16 ? at::kBFloat16 : at::kFloat;
  po.device = device;
  po.fsdp_grad_sync_per_step = t.fsdp_grad_sync == FsdpGradSync::step;
  po.fsdp_group = layout.fsdp_group();
  return po;
}

StepParts step_parts(const TrainingConfig& t, const ParallelLayout& layout, const Model& model, ParallelModel& pm,
                     Communicator& comm, AdamW& optimizer, at::Device device) {
  StepParts p;
  p.model = &pm;
  p.comm = &comm;
  p.optimizer = &optimizer;
  p.forward.activation_checkpointing = t.activation_checkpointing == ActivationCheckpointing::full;
  p.forward.compute_dtype = t.precision == Precision::bf16 ? at::kBFloat16 : at::kFloat;
  p.forward.positions = pm.positions(t.seq_len, device);
  p.forward.rope = model.rope_tables(t.seq_len / layout.shape()[Axis::cp], p.forward, device);
  p.micro_batches = layout.grad_accum_steps();
  p.global_tokens = static_cast<double>(t.global_batch) * t.seq_len;
  p.forward.loss_scale = 1.0 / p.global_tokens;  // run_step backpropagates loss_sum / global_tokens
  p.max_grad_norm = t.max_grad_norm;
  p.device = device;
  return p;
}

void init_optimizer(AdamW& optimizer, const TrainingConfig& t, ParallelModel& pm) {
  optimizer.weight_decay = t.weight_decay;
  optimizer.init(pm.params());
}

}  // namespace meshwork::trainer
