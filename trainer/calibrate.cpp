#include "trainer/calibrate.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "core/calibration_records.h"
#include "core/cpu_steal.h"
#include "core/memory_estimate.h"
#include "core/metrics.h"
#include "core/model_spec.h"
#include "core/parallel_layout.h"
#include "core/run_config.h"
#include "trainer/comm.h"
#include "trainer/fused_ops.h"
#include "trainer/metrics_sink.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"
#include "trainer/parallelize.h"
#include "trainer/rank_context.h"
#include "trainer/step.h"
#include "trainer/supervisor.h"

namespace meshwork::trainer {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The seconds of each run of `work` (which waits for its device), after `warm_up_s` of runs
// not counted, for `window_s` and at least 3 runs. The warm-up is a time, not one run: the first
// runs of a rank pay for the thread pool waking up, page faults, packing and the allocator
// (measured: 2 GFLOP/s on the first matmul shape, 27 on the same shape right after).
template <class Work>
std::vector<double> timed_runs(Work&& work, double warm_up_s, double window_s) {
  const auto w0 = Clock::now();
  do work();
  while (since(w0) < warm_up_s);
  std::vector<double> times;
  const auto t0 = Clock::now();
  do {
    const auto t1 = Clock::now();
    work();
    times.push_back(since(t1));
  } while (since(t0) < window_s || times.size() < 3);
  return times;
}

// Per-iteration times are summarised by their median (core's meshwork::median): on a shared
// machine a rank descheduled in the middle of a product or a collective makes one iteration
// 10-50x slower (measured on the 2-core VM under builds); the median keeps what the hardware
// does, the mean would report the neighbours.

constexpr int64_t kMessageBytes[] = {4 << 10, 64 << 10, 1 << 20, 16 << 20};
// The local experts an expert-block measurement multiplies (measure_experts).
constexpr int64_t kExpertsTimed = 8;
// The split steps train the model cut to at most this many decoder layers: a step's work that
// does not grow with the layers (embedding, head and loss, the wait before the last all-reduce)
// is then the share of it a model of a few layers has, and the run's model itself when it is
// that small (docs/estimator.md, "Split steps").
constexpr int64_t kSplitStepLayers = 4;
// The split steps are timed in two passes, the second in the opposite order (A B ... B A), each
// pass half of a split's steps. A cluster whose speed drifts over the calibration then moves
// every split alike: split i's passes sit at t_i and T - t_i, both around the same midpoint,
// whereas one pass in order gave the first splits the start's speed and the last the end's. The
// fit divides split by split; it needs them measured alike (docs/estimator.md, "Split steps").
constexpr int kSplitPasses = 2;
// The drift check: the first splits' two passes are the calibration's first and last
// measurements; how far they differ is how far this cluster moves by itself (its first shape at
// its two micro-batch counts).
constexpr size_t kDriftCheckSplits = 2;
// Times a split's pass measured under too much CPU steal (core/cpu_steal.h) is measured again.
constexpr int kStealRepeats = 2;

// Steps timed per split step, from its warm-up step's seconds: as many as fill 1 s, 8 to 30;
// a step over 1 s: as many as fill kLongSplitSeconds, at least 4. A long step is its own average
// over many collectives and kernels (on the 2-core VM the splits of over 1 s spread 3-21 %
// between their steps, IQR / median, the shorter ones 2-38 %), and 8 steps of them were most of
// an 8-rank calibration's time (cp 8 across two nodes at 8 micro-batches: 6.7 s a step).
// Each of the kSplitPasses passes times its share of them, at least 2.
constexpr double kLongSplitSeconds = 8.0;
int split_step_count(double warm_s) {
  if (!(warm_s > 1.0)) return std::clamp(static_cast<int>(1.0 / std::max(1e-6, warm_s)), 8, 30);
  return std::clamp(static_cast<int>(std::ceil(kLongSplitSeconds / warm_s)), 4, 8);
}
int split_pass_step_count(double warm_s) { return std::max(2, (split_step_count(warm_s) + kSplitPasses - 1) / kSplitPasses); }

// Iterations per size: enough for a stable mean of the small ones, few of the big ones (16 MiB
// over loopback Gloo on 2 shared cores takes tens of ms).
int iterations(int64_t bytes) { return bytes <= (64 << 10) ? 20 : bytes <= (1 << 20) ? 8 : 3; }

class Calibrator {
 public:
  Calibrator(const TrainerOptions& o, const LaunchEnv& env, const ModelSpec& spec)
      : o_(o), env_(env), spec_(spec), rank_(env.rank), ctx_(o, env), log_(ctx_.log), sink_(ctx_.sink) {}

  int run() {
    return ctx_.run([this] {
      if (int rc = setup()) return rc;
      announce();
      // The split steps first, in a process as fresh as a training run's. After the collectives'
      // probes (every group layout, up to 16 MiB messages) the same split step measured 10-40 %
      // more compute on the 2-core VM than a training run of the same shape (1 x 4 x 1 x 1:
      // 0.37 s against 0.29 s); after the matmul probes, 8 ranks measured 4 x 1 x 1 x 2 at
      // 1.03 s and 8 x 1 x 1 x 1 at 0.73 s, against 0.71-0.85 s and 0.58-0.65 s in runs; first,
      // 0.74 s and 0.62 s. (The rest was the communicators' idle Gloo threads, trainer/comm.cpp;
      // docs/estimator.md, "Split steps".)
      measure_split_steps();
      measure_matmuls();
      measure_experts();
      measure_step();
      for (size_t i = 0; i < comms_.size(); ++i) measure_collectives(i);
      comms_.front()->barrier(comms_.front()->world());
      if (rank_ == 0) write_calibration_file();
      ctx_.end("ok", "");
      return 0;
    });
  }

 private:
  // The rank context has set the threads and the device.
  int setup() {
    threads_ = ctx_.threads();
    cuda_ = ctx_.cuda();
    device_ = ctx_.device();
    // One communicator per group layout, in the same order on every rank (each is collective).
    std::vector<CalibrationProbe> ps = calibration_probes(env_.world_size, env_.local_world_size);
    if (ps.empty()) ps.push_back({MeshShape{1, env_.world_size, 1, 1}, GroupKind::dp_shard, LinkKind::intra_node});
    for (size_t i = 0; i < ps.size(); ++i) {
      auto comm = ctx_.connect(ps[i].shape, /*first=*/i == 0, "meshwork/calibrate/" + std::to_string(i));
      if (!comm.ok()) return ctx_.fail(3, comm.error().message());
      comms_.push_back(std::move(*comm));
    }
    probes_ = ps;
    log_("calibrate: rank ", rank_, " of ", env_.world_size, " (", env_.local_world_size, " per node), ",
         threads_, " threads, ", probes_.size(), " group layout(s)");
    return 0;
  }

  void write(const std::string& kind, nlohmann::json fields) {
    CalibrationRecord r;
    r.rank = rank_;
    r.time = now_unix();
    r.kind = kind;
    r.fields = std::move(fields);
    sink_.write(to_json_line(r));
  }

  void announce() {
    StartRecord sr = ctx_.start_record(*comms_.front());
    sr.mesh = o_.run.mesh.world_size() == env_.world_size ? o_.run.mesh : probes_.front().shape;
    sr.config = to_json(o_.run);
    sr.versions["task"] = "calibrate";
    sink_.write(to_json_line(sr));
    if (env_.local_rank == 0)
      write("node", {{"node", sr.node}, {"host", sr.host}, {"ranks_per_node", env_.local_world_size},
                     {"cores", usable_cores()}, {"device_name", cuda_ ? "cuda" : "cpu"}});
  }

  void sync() {
    if (cuda_) torch::cuda::synchronize();
  }

  // The run's matmuls (forward shapes; backward multiplies the same shapes transposed), whole
  // and split d ways for every d dividing the world (tp narrows the column-parallel outputs and
  // the row-parallel inputs, as parallelize_tp does), each timed product by product for 0.1 s
  // (at least 3) after 50 ms of warm-up; the median counts. All ranks start together: they share the node's cores.
  void measure_matmuls() {
    const int64_t T = int64_t{o_.run.training.micro_batch} * o_.run.training.seq_len;
    const int64_t h = spec_.hidden_size, L = spec_.num_hidden_layers;
    struct Shape {
      int64_t m, k, n, count;
    };
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      for (int d = 1; d <= env_.world_size; ++d) {
        if (env_.world_size % d != 0) continue;
        auto cdiv = [d](int64_t x) { return std::max<int64_t>(1, (x + d - 1) / d); };
        std::vector<Shape> shapes = {{T, h, cdiv(spec_.q_dim()), L},
                                     {T, h, cdiv(2 * spec_.kv_dim()), L},
                                     {T, cdiv(spec_.q_dim()), h, L},
                                     {T, h, cdiv(spec_.vocab_size), 1}};
        // The dense MLP of the layers that have one (a mixture of experts' sparse layers have
        // experts instead: measure_experts).
        if (const int64_t dense = L - spec_.sparse_layer_count(); dense > 0) {
          shapes.push_back({T, h, cdiv(2 * spec_.intermediate_size), dense});
          shapes.push_back({T, cdiv(spec_.intermediate_size), h, dense});
        }
        comms_.front()->barrier(comms_.front()->world());
        for (const Shape& s : shapes) {
          auto opts = at::TensorOptions().device(device_).dtype(dtype);
          // The product as the model computes it (model.cpp): meshtrain's own GEMM where it
          // applies (fp32 on an AVX2 CPU), else at::linear. y = x w^T, w = [n, k].
          at::NoGradGuard no_grad;
          at::Tensor a = at::randn({s.m, s.k}, opts), b = at::randn({s.n, s.k}, opts);
          const bool fused = fused_linear_applies(a, b);
          const std::vector<double> times = timed_runs(
              [&] {
                (void)(fused ? fused_linear(a, b) : at::linear(a, b));
                sync();
              },
              0.05, 0.1);
          const int iters = static_cast<int>(times.size());
          const double seconds = median(times);
          write("matmul", {{"precision", dtype == at::kFloat ? "fp32" : "bf16"}, {"threads", threads_},
                           {"ranks_per_node", env_.local_world_size}, {"m", s.m}, {"n", s.n}, {"k", s.k},
                           {"count", s.count}, {"split", d}, {"seconds", seconds}, {"iterations", iters}});
        }
      }
    }
  }

  // A mixture of experts' expert blocks: for every ep dividing both the experts and the world
  // and every split d (tp x cp shortens each rank's tokens to T / d), an ep rank's E / ep experts
  // through run_grouped_experts, forward and backward, with the rows balanced routing gives
  // each, T / d x top-k x ep / E: the same FLOPs in E / ep products of ep x more rows, which on
  // a CPU run several times faster per FLOP at ep 4 than at ep 1 (bench/moe_step.sh). Timed as
  // the matmuls are; recorded as "matmul" samples with experts_ep = ep (core/calibration.h).
  void measure_experts() {
    if (!spec_.is_moe() || spec_.sparse_layer_count() == 0) return;
    const int64_t T = int64_t{o_.run.training.micro_batch} * o_.run.training.seq_len;
    const int64_t h = spec_.hidden_size, Ie = spec_.moe.expert_intermediate_size;
    const int64_t E = spec_.moe.num_experts, K = spec_.moe.experts_per_token;
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      for (int d = 1; d <= env_.world_size; ++d) {
        if (env_.world_size % d != 0) continue;
        for (int64_t ep = 1; ep <= std::min<int64_t>(E, env_.world_size); ++ep) {
          if (E % ep != 0 || env_.world_size % ep != 0) continue;
          // Every local expert gets the same rows, so the rate of a few is the rate of all: at
          // most kExpertsTimed of them (128 experts of a real model's widths would be gigabytes).
          const int64_t local = std::min<int64_t>(E / ep, kExpertsTimed);
          const int64_t rows = std::max<int64_t>(1, ((T + d - 1) / d * K * ep + E - 1) / E);
          auto opts = at::TensorOptions().device(device_).dtype(dtype);
          auto weight = [&](std::initializer_list<int64_t> size) {
            return (at::randn(size, opts) * 0.02).requires_grad_(true);
          };
          at::Tensor x = at::randn({local * rows, h}, opts).requires_grad_(true);
          at::Tensor gate = weight({local, Ie, h}), up = weight({local, Ie, h}), down = weight({local, h, Ie});
          const std::vector<int64_t> counts(static_cast<size_t>(local), rows);
          auto block = [&] {
            for (at::Tensor* t : {&x, &gate, &up, &down}) t->mutable_grad() = at::Tensor();
            run_grouped_experts(x, counts, gate, up, down).sum().backward();
            sync();
          };
          comms_.front()->barrier(comms_.front()->world());
          const std::vector<double> times = timed_runs(block, 0.05, 0.1);
          // count x 2 m n k = 3 local x 2 rows x 3 Ie x h = 6 x rows x local x one expert's
          // parameters: the block's forward and backward FLOPs.
          const int64_t count = 3 * local;
          write("matmul", {{"precision", dtype == at::kFloat ? "fp32" : "bf16"}, {"threads", threads_},
                           {"ranks_per_node", env_.local_world_size}, {"m", rows}, {"n", 3 * Ie}, {"k", h},
                           {"count", count}, {"split", d}, {"experts_ep", ep},
                           {"seconds", median(times) / static_cast<double>(count)},
                           {"iterations", static_cast<int>(times.size())}});
        }
      }
    }
  }

  // The step efficiency: a forward + backward of the model cut to (at most) 2 decoder layers, on
  // this rank alone at the run's micro-batch, sequence length and precision, while every rank
  // of the node does the same (they share its cores as in training). Its model FLOPs per second
  // against this rank's matmul rate at the same precision is the fraction of the matmul rate a
  // whole step reaches (norms, softmax, element-wise ops, the loss): build_calibration() takes
  // the median over ranks. The optimizer is left out: a few reads of the parameters, small next
  // to the layers' matmuls.
  struct LocalWeights : WeightSource {
    std::vector<at::Tensor> flat;
    at::Tensor acquire(int unit) override { return flat[static_cast<size_t>(unit)]; }
  };
  void measure_step() {
    ModelSpec cut = spec_;
    cut.num_hidden_layers = std::min<int64_t>(spec_.num_hidden_layers, 2);
    Model model(cut);
    const bool bf16 = o_.run.training.precision == Precision::bf16;
    const at::ScalarType dtype = bf16 ? at::kBFloat16 : at::kFloat;
    LocalWeights w;
    for (int u = 0; u < model.num_units(); ++u)
      w.flat.push_back(model.init_unit(u, 1234).to(device_, dtype).requires_grad_(true));
    const int64_t B = o_.run.training.micro_batch, T = o_.run.training.seq_len;
    auto ids = at::TensorOptions().device(device_).dtype(at::kLong);
    const at::Tensor tokens = at::randint(cut.vocab_size, {B, T}, ids);
    const at::Tensor targets = at::randint(cut.vocab_size, {B, T}, ids);
    ForwardOptions fo;
    fo.compute_dtype = dtype;
    auto step = [&] {
      for (at::Tensor& f : w.flat) f.mutable_grad() = at::Tensor();
      model.loss_sum(tokens, targets, w, fo).backward();
      sync();
    };
    comms_.front()->barrier(comms_.front()->world());
    const std::vector<double> times = timed_runs(step, 0.05, 0.3);
    write("step", {{"precision", bf16 ? "bf16" : "fp32"}, {"threads", threads_},
                   {"ranks_per_node", env_.local_world_size}, {"layers", cut.num_hidden_layers},
                   {"tokens", B * T}, {"flops", model.flops_per_token(T) * static_cast<double>(B * T)},
                   {"expert_flops", 6.0 * static_cast<double>(cut.moe.experts_per_token * cut.expert_parameter_count() *
                                                              cut.sparse_layer_count() * B * T)},
                   {"seconds", median(times)}, {"iterations", static_cast<int>(times.size())}});
  }

  // The split steps: short training runs of the model cut to kSplitStepLayers decoder layers,
  // through the trainer's own parallelize() and step, on every split of split_step_shapes()
  // (tp x cp and FSDP inside a node; on several nodes the same across two, and FSDP across them
  // with tp inside), each at 1 micro-batch per dp rank and at the run's own accumulation on the
  // split (split_step_micro_batches). The other ranks of the world run the same
  // split beside them, as the replicas of a training run do. Each rank writes the mean of its
  // middle half of steps: compute_s and comm_s per axis ("split_step" records); core fits the
  // time model's corrections to them (Calibration::step_factors): what a collective costs between
  // a step's compute, what ring attention does besides its matmuls, the non-matmul share of the
  // step at each split; and, from the two micro-batch counts, which part of each is paid once
  // per step (the optimizer, the norm, replicas waiting on each other) rather than per
  // micro-batch: a run accumulating 8 micro-batches pays it once, not 8 times.
  void measure_split_steps() {
    ModelSpec cut = spec_;
    cut.num_hidden_layers = std::min<int64_t>(spec_.num_hidden_layers, kSplitStepLayers);
    const int world = env_.world_size, per_node = std::max(1, env_.local_world_size);
    const std::vector<MeshShape> shapes =
        split_step_shapes(world, per_node, cut.sparse_layer_count() > 0 ? static_cast<int>(cut.moe.num_experts) : 0);
    std::vector<SplitStep> splits;
    for (size_t i = 0; i < shapes.size(); ++i) {
      RunConfig config = o_.run;
      config.mesh = shapes[i];
      config.model = model_spec_to_json(cut);
      config.nodes.clear();
      Placement placement;
      placement.world_size = world;
      placement.ranks_per_node = per_node;
      // One micro-batch per dp rank here; the loop below multiplies it. (With the run's global
      // batch alone, one measurement at its accumulation, the factors came out further from the
      // runs: bench/shapes.sh 4 of 10 shapes within 15 % against 7 of 10, docs/estimator.md.)
      config.training.global_batch = config.training.micro_batch * shapes[i].group_size(GroupKind::dp);
      const LayoutCheck checked = ParallelLayout::check(config, &cut, placement);
      if (!checked.ok()) {
        const auto why = checked.error_texts();
        if (rank_ == 0) log_("calibrate: split ", shapes[i].to_string(), " skipped: ", why.empty() ? "" : why.front());
        continue;
      }
      if (cuda_) {
        // A split that would not fit the device is not measured (the whole cut model on one rank
        // at 1 x 1 is a large share of a big model's embedding and head).
        const int64_t need = estimate_memory(checked.layout->memory_query(cut)).total();
        const int64_t have = device_memory_bytes();
        // Every rank must skip alike (the split's groups are collective): one that does not fit
        // anywhere is skipped everywhere.
        at::Tensor skip = at::full({1}, have > 0 && need > static_cast<int64_t>(0.9 * static_cast<double>(have)) ? 1.0f : 0.0f,
                                   at::TensorOptions().device(device_).dtype(at::kFloat));
        comms_.front()->all_reduce(skip, comms_.front()->world());
        if (skip.item<float>() > 0) {
          if (rank_ == 0) log_("calibrate: split ", shapes[i].to_string(), " skipped: needs ", need, " bytes per rank");
          continue;
        }
      }
      // 1 and the run's own accumulation on this split (split_step_micro_batches): their
      // difference separates what a micro-batch costs from what a step pays once.
      for (int64_t micro_batches : split_step_micro_batches(o_.run, shapes[i])) {
        RunConfig accumulating = config;
        accumulating.training.global_batch = config.training.global_batch * micro_batches;
        LayoutCheck layout = ParallelLayout::check(accumulating, &cut, placement);
        if (!layout.ok()) continue;  // the same checks as above, on the batch alone: never here
        splits.push_back({std::move(accumulating), std::move(layout), static_cast<int>(micro_batches), {}});
      }
    }
    for (int pass = 0; pass < kSplitPasses; ++pass)
      for (size_t k = 0; k < splits.size(); ++k) {
        SplitStep& s = splits[pass % 2 == 0 ? k : splits.size() - 1 - k];
        s.passes[static_cast<size_t>(pass)] = measure_split_step(s, cut);
      }
    // A pass measured while the hypervisor took more than kStealLimit of the node's CPUs is
    // measured again after the others (a burst of steal lasts seconds to minutes), up to twice; the faster
    // measurement stands (by its slowest rank). Every rank decides alike: SplitResult's steal and
    // slowest_step_s are the same everywhere.
    const double limit = steal_limit();
    for (int again = 0; again < kStealRepeats; ++again) {
      for (SplitStep& s : splits) {
        for (SplitResult& pass : s.passes) {
          if (pass.steal <= limit) continue;
          if (rank_ == 0)
            log_("calibrate: split ", s.config.mesh.to_string(), " at ", s.micro_batches, " micro-batch(es) measured again: ",
                 static_cast<int>(100 * pass.steal + 0.5), " % of the CPUs were stolen");
          const int attempts = pass.attempts + 1;
          SplitResult repeated = measure_split_step(s, cut);
          if (repeated.slowest_step_s < pass.slowest_step_s) pass = std::move(repeated);
          pass.attempts = attempts;
        }
      }
    }
    for (size_t i = 0; i < splits.size(); ++i) write_split_step(splits[i], i < kDriftCheckSplits);
  }

  // kStealLimit, or MESHTRAIN_CALIBRATE_STEAL_LIMIT (a share: 1 never repeats, a negative one
  // always does, which the tests use to run the repeats on a machine without steal). Every rank
  // is launched with the same environment, so every rank reads the same limit.
  double steal_limit() {
    const char* env = std::getenv("MESHTRAIN_CALIBRATE_STEAL_LIMIT");
    if (!env || !*env) return kStealLimit;
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !std::isfinite(v)) {
      if (rank_ == 0) log_("calibrate: MESHTRAIN_CALIBRATE_STEAL_LIMIT=", env, ": not a number; using ", kStealLimit);
      return kStealLimit;
    }
    return v;
  }

  struct Timed {
    double step_s = 0;
    AxisArray<double> comm_s;
    double ep_s = 0;  // the experts' all-to-alls (an ep split of a mixture of experts)
  };
  struct SplitResult {
    std::vector<Timed> timed;  // every step timed (this rank)
    double steal = 0;          // share of the CPUs stolen while it ran (the most any node saw)
    double slowest_step_s = 0;  // the middle-half mean step of the slowest rank
    int attempts = 1;
  };
  struct SplitStep {
    RunConfig config;
    LayoutCheck layout;
    int micro_batches = 1;
    std::array<SplitResult, kSplitPasses> passes;
  };

  // The mean of the middle half of `timed` by step time, each step whole (its compute and comm
  // add up to its time). A run's step time is a mean, which a descheduled rank's 10x step pulls
  // up and a median of 3 steps missed by +-20 % from one calibration to the next on the 2-core VM
  // (tp 4: 1.40 s and 1.00 s predicted for a step measured at 1.34 s both times); the middle half
  // keeps the mean without the outliers.
  static Timed middle_half(std::vector<Timed> timed) {
    std::sort(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) { return a.step_s < b.step_s; });
    const size_t lo = timed.size() / 4, hi = timed.size() - timed.size() / 4;
    Timed mid;
    for (size_t k = lo; k < hi; ++k) {
      mid.step_s += timed[k].step_s / static_cast<double>(hi - lo);
      for (Axis a : kAxes) mid.comm_s[a] += timed[k].comm_s[a] / static_cast<double>(hi - lo);
      mid.ep_s += timed[k].ep_s / static_cast<double>(hi - lo);
    }
    return mid;
  }

  // One record per split: the middle half of both passes' steps together, and each pass's own.
  void write_split_step(const SplitStep& s, bool drift_check) {
    std::vector<Timed> pooled;
    nlohmann::json passes = nlohmann::json::array();
    double steal = 0;
    int attempts = 1;
    for (const SplitResult& pass : s.passes) {
      pooled.insert(pooled.end(), pass.timed.begin(), pass.timed.end());
      passes.push_back({{"step_s", middle_half(pass.timed).step_s}, {"iterations", pass.timed.size()},
                        {"steal", pass.steal}, {"attempts", pass.attempts}});
      steal = std::max(steal, pass.steal);
      attempts = std::max(attempts, pass.attempts);
    }
    const Timed mid = middle_half(pooled);
    std::sort(pooled.begin(), pooled.end(), [](const Timed& a, const Timed& b) { return a.step_s < b.step_s; });
    const double median_step = pooled[pooled.size() / 2].step_s;
    const double spread =
        median_step > 0 ? (pooled[pooled.size() * 3 / 4].step_s - pooled[pooled.size() / 4].step_s) / median_step : 0;
    double comm_total = 0;
    nlohmann::json comm_s = nlohmann::json::object();
    for (Axis a : kAxes) {
      comm_s[std::string(axis_name(a))] = mid.comm_s[a];
      comm_total += mid.comm_s[a];
    }
    if (s.config.mesh.ep > 1) {
      comm_s["ep"] = mid.ep_s;
      comm_total += mid.ep_s;
    }
    nlohmann::json rec = {{"config", to_json(s.config)}, {"world", env_.world_size},
                          {"ranks_per_node", env_.local_world_size}, {"step_s", mid.step_s},
                          {"compute_s", std::max(0.0, mid.step_s - comm_total)}, {"comm_s", comm_s},
                          {"iterations", pooled.size()}, {"steal", steal},
                          {"attempts", attempts}, {"spread", spread}, {"passes", passes}};
    if (drift_check) {
      rec["first_step_s"] = passes.front()["step_s"];
      rec["again_step_s"] = passes.back()["step_s"];
    }
    write("split_step", rec);
  }

  SplitResult measure_split_step(const SplitStep& split, const ModelSpec& cut) {
    const RunConfig& config = split.config;
    const ParallelLayout& layout = *split.layout.layout;
    const MeshShape& shape = config.mesh;
    // The first probe's communicator hosts the store; every measurement's groups get their own
    // names, repeats included.
    auto created = ctx_.connect(shape, /*first=*/false, "meshwork/calibrate/split/" + std::to_string(split_index_++));
    if (!created.ok()) throw std::runtime_error("split " + shape.to_string() + ": " + created.error().message());
    Communicator& comm = **created;
    const TrainingConfig& t = config.training;
    Model model(cut);
    ParallelizeOptions po = parallelize_options(t, layout, device_);
    po.seed = 1234;
    auto pm = parallelize(model, comm, po);
    AdamW opt;
    init_optimizer(opt, t, *pm);
    // The same sequences on every rank (cp ranks must agree; the values do not matter), from a
    // generator of their own: ranks that are threads of one process (the tests) share torch's.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1234);
    const at::Tensor seqs =
        at::randint(cut.vocab_size, {t.micro_batch, t.seq_len + 1}, gen, at::TensorOptions().dtype(at::kLong)).to(device_);
    const std::pair<at::Tensor, at::Tensor> batch{pm->shard_sequence(seqs.narrow(1, 0, t.seq_len)),
                                                  pm->shard_sequence(seqs.narrow(1, 1, t.seq_len))};
    // The step training runs (trainer/step.h), on one batch for every micro-batch.
    // (split.micro_batches is the layout's accumulation.)
    StepParts parts = step_parts(t, layout, model, *pm, comm, opt, device_);
    const MicroBatches same_batch = [&batch](int64_t) { return batch; };
    auto step = [&] {
      const StepResult r = run_step(parts, /*lr=*/1e-4, same_batch);
      return Timed{r.step_s, comm.times().seconds, comm.times().ep};
    };
    comm.barrier(comm.world());
    const auto cpu0 = read_cpu_times();
    // Warm-up (gathers' buffers, the allocator, AdamW's state), then split_pass_step_count() steps.
    // Every rank must run the same number (the steps are collective): the count comes from the
    // slowest rank's warm-up step.
    at::Tensor warm = at::full({1}, static_cast<float>(step().step_s), at::TensorOptions().device(device_));
    comm.all_reduce(warm, comm.world(), /*max=*/true);
    const int count = split_pass_step_count(warm.item<float>());
    SplitResult result;
    for (int k = 0; k < count; ++k) result.timed.push_back(step());
    comm.barrier(comm.world());  // every rank done with the groups before they go
    // What decides a repeat, and which attempt stands, must be the same on every rank (a repeat
    // is collective): the most steal any node saw and the slowest rank's step.
    at::Tensor agreed = at::tensor({static_cast<float>(steal_share(cpu0, read_cpu_times())),
                                    static_cast<float>(middle_half(result.timed).step_s)},
                                   at::TensorOptions().dtype(at::kFloat)).to(device_);
    comms_.front()->all_reduce(agreed, comms_.front()->world(), /*max=*/true);
    const at::Tensor host = agreed.cpu();
    result.steal = host[0].item<float>();
    result.slowest_step_s = host[1].item<float>();
    return result;
  }

  // The device's memory, 0 when unknown. cudaMemGetInfo is looked up at run time: meshtrain_cpu
  // links no CUDA runtime, and this is reached only with --device cuda, where torch loaded it.
  int64_t device_memory_bytes() const {
    using MemGetInfo = int (*)(size_t*, size_t*);
    auto get = reinterpret_cast<MemGetInfo>(dlsym(RTLD_DEFAULT, "cudaMemGetInfo"));
    size_t free = 0, total = 0;
    if (!get || get(&free, &total) != 0) return 0;
    return static_cast<int64_t>(total);
  }

  // Every collective of probe i at every size, on this rank's group of the probe's kind. All
  // groups of the layout run at once, as they do in training.
  void measure_collectives(size_t i) {
    Communicator& c = *comms_[i];
    const Group& g = c.group(probes_[i].kind);
    const int n = g.size();
    if (n < 2) return;
    auto opts = at::TensorOptions().device(device_).dtype(at::kFloat);
    for (Collective op : kCollectives) {
      for (int64_t bytes : kMessageBytes) {
        // M = the full tensor: numel a multiple of n (each member's chunk equal).
        const int64_t numel = std::max<int64_t>(n, bytes / 4 / n * n);
        const int iters = iterations(bytes);
        at::Tensor full = at::ones({numel}, opts), part = at::ones({numel / n}, opts);
        at::Tensor recv = at::empty({numel}, opts);
        auto once = [&] {
          switch (op) {
            case Collective::all_reduce: c.all_reduce(full, g); break;
            case Collective::all_gather: c.all_gather(full, part, g); break;
            case Collective::reduce_scatter: c.reduce_scatter(part, full, g); break;
            case Collective::send_recv: c.send_recv(full, (g.rank + 1) % n, recv, (g.rank + n - 1) % n, g); break;
            // Equal blocks of numel / n to every member, as the experts' dispatch sends on average.
            case Collective::all_to_all: c.all_to_all(recv, full, {}, {}, g); break;
          }
        };
        once();  // warm-up (connections, buffers)
        std::vector<double> times;
        for (int k = 0; k < iters; ++k) {
          c.barrier(c.world());  // every member starts together, as in a training step
          const auto t1 = Clock::now();
          once();
          sync();
          times.push_back(since(t1));
        }
        const double seconds = median(times);
        write("collective", {{"op", std::string(to_string(op))}, {"link", std::string(to_string(probes_[i].link))},
                             {"group_size", n}, {"bytes", static_cast<double>(numel * 4)},
                             {"seconds", seconds}, {"iterations", iters}, {"backend", cuda_ ? "nccl" : "gloo"}});
      }
    }
  }

  // One node or a shared filesystem: every rank's records are here; fit them.
  void write_calibration_file() {
    std::vector<CalibrationRecord> records;
    for (int r = 0; r < env_.world_size; ++r) {
      std::ifstream in(fs::path(o_.run_dir) / ("metrics-rank" + std::to_string(r) + ".jsonl"));
      if (!in) return;
      read_calibration_records(in, records);
    }
    auto cal = calibration_from_records(records);
    if (!cal) {
      log_("calibrate: no calibration fitted: ", cal.error().message());
      return;
    }
    std::ofstream(fs::path(o_.run_dir) / "calibration.json") << to_json(*cal).dump(1) << "\n";
    log_("calibrate: wrote calibration.json (fingerprint ", cal->fingerprint.id(), ")");
  }

  const TrainerOptions& o_;
  const LaunchEnv& env_;
  const ModelSpec& spec_;
  const int rank_;
  RankContext ctx_;  // log, metrics, pid file, threads, device, end record
  Log& log_;
  MetricsSink& sink_;
  int threads_ = 1;
  bool cuda_ = false;
  at::Device device_ = at::kCPU;
  std::vector<CalibrationProbe> probes_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  size_t split_index_ = 0;  // split-step measurements so far: their groups' names
};

}  // namespace

int calibrate_rank(const TrainerOptions& options, const LaunchEnv& env, const ModelSpec& spec) {
  Calibrator c(options, env, spec);
  return c.run();
}

std::vector<CalibrationProbe> calibration_probes(int world, int ranks_per_node) {
  std::vector<CalibrationProbe> out;
  for (int n = 2; n <= ranks_per_node; ++n)
    if (ranks_per_node % n == 0) out.push_back({MeshShape{world / n, 1, 1, n}, GroupKind::tp, LinkKind::intra_node});
  const int nodes = world / std::max(1, ranks_per_node);
  if (nodes > 1) {
    out.push_back({MeshShape{nodes, 1, 1, ranks_per_node}, GroupKind::dp_replicate, LinkKind::inter_node});
    for (int k = 2; k < ranks_per_node; ++k)
      if (ranks_per_node % k == 0)
        out.push_back({MeshShape{1, nodes * k, 1, ranks_per_node / k}, GroupKind::dp_shard, LinkKind::inter_node});
    if (ranks_per_node > 1) out.push_back({MeshShape{1, world, 1, 1}, GroupKind::dp_shard, LinkKind::inter_node});
  }
  return out;
}

}  // namespace meshwork::trainer
