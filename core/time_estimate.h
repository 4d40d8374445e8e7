// Step time of one optimizer step: compute from FLOPs at a peak rate x efficiency, and
// communication per mesh axis from the bytes each collective moves (ring formulas) over the
// intra-node or inter-node link. Derivations in time_estimate.cpp and docs/estimator.md.
//
// Everything the hardware contributes is in HardwareModel, so the bench can plug in this
// machine's measured matmul rate and Gloo bandwidth instead of the defaults.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/calibration.h"
#include "core/memory_estimate.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "core/routing_imbalance.h"
#include "core/run_config.h"
#include "core/run_fit.h"

namespace meshwork {

struct HardwareModel {
  double peak_flops_bf16 = 989e12;  // per device, dense (H100 SXM: 989 TFLOP/s bf16)
  double peak_flops_fp32 = 494e12;  // per device (H100 SXM: TF32 tensor cores, 494 TFLOP/s)
  double efficiency = 0.4;          // achieved fraction of peak in the matmuls
  double intra_node_bytes_per_s = 450e9;  // per direction, one GPU (NVLink 4: ~450 GB/s)
  double inter_node_bytes_per_s = 50e9;   // per GPU: one 400 Gb/s InfiniBand NIC = 50 GB/s
  double latency_s = 10e-6;               // per ring step (alpha of the alpha-beta model)
  // Per axis: the fraction of the step's compute time that this
  // axis' communication can hide behind. FSDP2 prefetches all-gathers and overlaps
  // reduce-scatters with forward and backward (1.0); DDP overlaps its bucketed all-reduce with
  // backward (2/3 of the compute); sequence-parallel tp collectives sit on the critical path (0);
  // ring attention is counted exposed (0). Hidden time comes out of one compute budget, dp_shard
  // first. The CPU defaults are all 0: Gloo collectives in meshtrain block the rank.
  AxisArray<double> overlap;

  double peak_flops(Precision p) const {
    return p == Precision::bf16 ? peak_flops_bf16 : peak_flops_fp32;
  }
  static HardwareModel h100();  // the defaults above
  // CPU ranks on Gloo: a small box's matmul rate, shared-memory/loopback links between local
  // ranks, 10 GbE between nodes and Gloo's per-message cost, so that an uncalibrated CPU
  // estimate has the right order of magnitude (the figures: docs/estimator.md, "Hardware
  // defaults"). `meshwork calibrate` replaces them with the cluster's own.
  static HardwareModel cpu();
  // GPUs of one node joined by PCIe only (no NVLink): a PCIe Gen4 x16 link per direction.
  static constexpr double kPcieIntraNodeBytesPerS = 32e9;
  // The defaults for the device; nvlink = false: CUDA nodes whose GPUs share PCIe only (the
  // intra-node link is kPcieIntraNodeBytesPerS).
  static HardwareModel for_device(DeviceKind d, bool nvlink = true) {
    if (d != DeviceKind::cuda) return cpu();
    HardwareModel h = h100();
    if (!nvlink) h.intra_node_bytes_per_s = kPcieIntraNodeBytesPerS;
    return h;
  }
};

// The fraction of a calibrated matmul rate a whole training step reaches when the calibration
// did not measure it (Calibration::step_efficiency 0). A step runs norms, attention, the
// optimizer and the framework between its matmuls, so it stays below the matmul rate; the value
// is what meshtrain's CPU runs reached (docs/estimator.md, "Hardware defaults").
inline constexpr double kUnmeasuredStepEfficiency = 0.7;

// Held by value, so a query kept (copied, stored, handed to a thread) never outlives its model
// or its settings. ParallelLayout::time_query() makes it for a checked layout.
struct TimeQuery {
  ModelSpec model;  // required
  MeshShape shape;  // resolved
  int gpus_per_node = 0;  // 0: one node
  // The run's training settings. The estimate reads seq_len, micro_batch, global_batch (0:
  // micro_batch x dp_replicate x dp_shard, no accumulation), precision,
  // activation_checkpointing, sequence_parallel, fsdp_grad_sync (FSDP with accumulation:
  // reduce-scatter every micro-batch or once per step) and with pp > 1 pp_schedule and
  // pp_virtual_stages. A bare query: bf16, one micro-batch per step (global_batch 0).
  TrainingConfig training{.seq_len = 0, .global_batch = 0, .precision = Precision::bf16, .device = DeviceKind::cuda};
  TrainerSupport trainer;  // vocab_parallel: the lm_head split over the vocabulary across tp
  HardwareModel hardware;
  // Measured on the cluster (core/calibration.h): where it has a matmul rate or a collective's
  // alpha-beta fit, that replaces HardwareModel's peak x efficiency, latency and bandwidth.
  std::optional<Calibration> calibration;
  // Learnt from the cluster's past runs (core/run_fit.h): each term of the step is multiplied by
  // its fitted factor. The fit must have been made on the same base (this calibration, or none).
  std::shared_ptr<const RunFit> fit;
  // Mixture of experts with ep > 1: tokens the busiest ep rank receives over the mean
  // (MemoryModel::moe_imbalance; the layout's query copies it from there).
  double moe_imbalance = kDefaultMoeImbalance;
  // The same over the nodes an ep group spans (the group cut into its nodes' expert blocks:
  // ep / ranks per node of them when an ep group is wider than a node): CPU ranks share their
  // node's link, so across nodes the busiest node's copies are what the link carries. Read only
  // when the ep groups cross nodes.
  double moe_node_imbalance = kDefaultMoeImbalance;
};

// How a layout's memory and step time are estimated beyond the run's own settings: how the
// trainer holds memory, the hardware, and what was measured on the cluster. The planner and the
// workbench pass one value (ParallelLayout::memory_query / time_query, make_plan).
struct EstimateOptions {
  MemoryModel memory;
  HardwareModel hardware = HardwareModel::h100();
  std::optional<Calibration> calibration;  // as TimeQuery::calibration
  std::shared_ptr<const RunFit> fit;        // as TimeQuery::fit, on the same base
  // A stored run's measured routing (core/routing_imbalance.h): each shape's memory and step
  // time then take the imbalance of its own ep from it instead of memory.moe_imbalance.
  std::shared_ptr<const MeasuredRouting> routing;
};

struct AxisComm {
  double seconds = 0;
  double hidden_s = 0;        // of `seconds`, hidden behind compute (HardwareModel::overlap)
  double bytes = 0;           // bytes one rank sends per step on this axis
  bool crosses_nodes = false;  // the group spans nodes: inter-node bandwidth applies
  int collectives = 0;        // collectives (or ring steps for cp) per step
};

struct TimeEstimate {
  double model_flops_per_token = 0;  // 6N + 12 L a d s (no recompute): what MFU counts
  double hardware_flops_per_token = 0;  // + the recomputed forward under full checkpointing
  double tokens_per_step = 0;        // global_batch * seq_len, each token once per dp replica
  int64_t grad_accum_steps = 1;
  double compute_s = 0;
  AxisArray<AxisComm> comm;
  // Mixture of experts with ep > 1: the all-to-alls that dispatch tokens to their experts and
  // combine the outputs, over the ep group ("comm_s.ep"); never hidden behind compute.
  AxisComm comm_ep;
  double comm_s = 0;                 // sum over axes and ep
  double hidden_comm_s = 0;          // communication hidden behind compute (HardwareModel::overlap)
  double step_s = 0;                 // compute + comm - hidden
  double tokens_per_s = 0;
  double mfu = 0;                    // model flops per second / (world * peak)
  double peak_flops_used = 0;        // the per-rank peak MFU divides by (calibrated or HardwareModel's)
  // Pipeline (pp > 1): the numbers above are the slowest stage's; comm[Axis::pp] is what it
  // waits for its neighbours (the bubble and the hops), and this the simulated idle share of
  // the stages (core/pipeline_schedule.h). 0 with pp = 1.
  double pp_bubble_fraction = 0;
  // Which numbers came from the calibration (the rest from HardwareModel's defaults).
  bool compute_calibrated = false;
  AxisArray<bool> comm_calibrated;  // per axis: every collective of the axis was calibrated
  bool comm_ep_calibrated = false;  // comm_ep's all-to-all came from the calibration
  bool comm_ep_fitted = false;      // comm_ep was corrected by a fit of runs (core/run_fit.h)
  // Which terms a fit from past runs corrected (TimeQuery::fit).
  bool compute_fitted = false;
  AxisArray<bool> comm_fitted;  // per axis
  // The floor under step_s's error, relative (0: unknown, as with hardware defaults): the
  // calibration's step_band() (how much the cluster moved by itself while it calibrated) when it
  // gave a number, the fit's median residual when it corrected one; the larger when both did.
  // No prediction is closer to a run than that; a shape far from what was measured can miss by more.
  double step_band = 0;
  // The step's terms (core/run_fit.h) before the overlap and before FSDP is split over dp_shard
  // and cp, with the conditions each ran under: what fit_runs() fits. 0: the term is absent.
  std::array<double, kFitTermCount> term_s{};
  std::array<FitKey, kFitTermCount> term_key{};

  const AxisComm& axis(Axis a) const { return comm[a]; }
  // The share of the step the axis's collectives hold up (0..1): its seconds less what hides
  // behind compute, over the step. The axes' shares sum to (comm_s - hidden_comm_s) / step_s,
  // `meshwork plan`'s comm column.
  double exposed_share(Axis a) const { return step_s > 0 ? (comm[a].seconds - comm[a].hidden_s) / step_s : 0; }
  double exposed_share_ep() const { return step_s > 0 ? (comm_ep.seconds - comm_ep.hidden_s) / step_s : 0; }
  // The axis communicates at all in this step (its collectives are counted).
  bool communicates(Axis a) const { return comm[a].collectives > 0 || comm[a].seconds > 0; }
};

// Matmul parameters N in 6N (Kaplan et al. 2020): every parameter except the embedding lookup
// (which does no multiply-adds); a tied embedding counts once, as the lm_head matmul. For a
// mixture of experts the active parameters (a token passes through experts_per_token experts of
// each sparse layer), so MFU counts the work a token really does.
int64_t flop_parameter_count(const ModelSpec& model);
// 6N + 12 * L * heads * head_dim * seq_len (PaLM, Chowdhery et al. 2022, appendix B).
double model_flops_per_token(const ModelSpec& model, int64_t seq_len);

TimeEstimate estimate_time(const TimeQuery& query);

}  // namespace meshwork
