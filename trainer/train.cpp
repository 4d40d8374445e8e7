#include "trainer/train.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "core/metrics.h"
#include "core/run_config.h"
#include "trainer/checkpoint.h"
#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/fused_ops.h"
#include "trainer/model.h"
#include "trainer/parallelize_cp.h"
#include "trainer/parallelize_dp.h"
#include "trainer/parallelize_tp.h"
#include "trainer/supervisor.h"

namespace meshwork::trainer {
namespace fs = std::filesystem;
using at::Tensor;

// ---------------------------------------------------------------- tracking CPU allocator

namespace {

// Wraps LibTorch's default CPU allocator. Its DataPtrs are "simple" (context == data, one raw
// deleter), as kernels that call raw_allocate() (oneDNN's bf16 paths) require, so the sizes are
// kept in a table keyed by address.
class TrackingAllocator final : public c10::Allocator {
 public:
  explicit TrackingAllocator(c10::Allocator* base)
      : base_(base), base_deleter_(base->raw_deleter()) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    TORCH_CHECK(data == inner.get_context() && base_deleter_,
                "tracking allocator: the base CPU allocator is not simple");
    inner.release_context();  // owned here from now on, freed by release()
    {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[data] = n;
    }
    const int64_t now = current_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &TrackingAllocator::release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &TrackingAllocator::release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};

 private:
  static void release(void* p);
  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
};

TrackingAllocator* g_tracker = nullptr;

void TrackingAllocator::release(void* p) {
  if (!p) return;
  TrackingAllocator* self = g_tracker;
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    auto it = self->sizes_.find(p);
    if (it != self->sizes_.end()) {
      n = it->second;
      self->sizes_.erase(it);
    }
  }
  self->current_.fetch_sub(static_cast<int64_t>(n));
  self->base_deleter_(p);
}

}  // namespace

void install_tracking_cpu_allocator() {
  if (g_tracker) return;
  // glibc hands blocks above its mmap threshold (128 KiB, adapting up to 32 MiB) back to the
  // kernel when they are freed, and trims the heap top, so every step's fresh activation and
  // gradient buffers page-fault again and are zeroed by the kernel (`small`: ~1,650 faults a
  // step). Keep freed memory in the process, as the jemalloc/tcmalloc setups of PyTorch's CPU
  // performance guide do; current and peak tensor bytes are still counted exactly below.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  g_tracker = new TrackingAllocator(c10::GetCPUAllocator());  // lives for the process
  c10::SetCPUAllocator(g_tracker, /*priority=*/255);
}
int64_t cpu_bytes_in_use() { return g_tracker ? g_tracker->current_.load() : 0; }
int64_t cpu_peak_bytes() { return g_tracker ? g_tracker->peak_.load() : 0; }
void reset_cpu_peak() {
  if (g_tracker) g_tracker->peak_.store(g_tracker->current_.load());
}

// ---------------------------------------------------------------- AdamW, schedule

void AdamW::init(const std::vector<Tensor>& params) {
  exp_avg.clear();
  exp_avg_sq.clear();
  for (const auto& p : params) {
    exp_avg.push_back(at::zeros_like(p).detach());
    exp_avg_sq.push_back(at::zeros_like(p).detach());
  }
}

void AdamW::update(std::vector<Tensor>& params, double lr, double grad_scale) {
  at::NoGradGuard no_grad;
  ++step;
  const double bc1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(beta2, static_cast<double>(step));
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor& p = params[i];
    if (!p.grad().defined()) continue;
    const Tensor& g = p.grad();
    const bool fused = p.device().is_cpu() && p.scalar_type() == at::kFloat &&
                       g.scalar_type() == at::kFloat && p.is_contiguous() && g.is_contiguous() &&
                       exp_avg[i].is_contiguous() && exp_avg_sq[i].is_contiguous();
    if (!fused) {
      Tensor gs = grad_scale == 1.0 ? g : g * grad_scale;
      p.mul_(1 - lr * weight_decay);
      exp_avg[i].mul_(beta1).add_(gs, 1 - beta1);
      exp_avg_sq[i].mul_(beta2).addcmul_(gs, gs, 1 - beta2);
      Tensor denom = (exp_avg_sq[i] / bc2).sqrt_().add_(eps);
      p.addcdiv_(exp_avg[i], denom, -lr / bc1);
      continue;
    }
    // One pass over p, g, m, v instead of eight kernels (and a temporary) per tensor.
    fused_adamw_(p, g, exp_avg[i], exp_avg_sq[i], lr, beta1, beta2, eps, weight_decay, bc1, bc2,
                 grad_scale);
  }
}

double learning_rate(const TrainingConfig& t, int64_t step) {
  const double lr = t.lr, lr_min = t.lr / 10;
  if (step < t.warmup_steps) return lr * static_cast<double>(step + 1) / t.warmup_steps;
  const double span = std::max<int64_t>(1, t.steps - t.warmup_steps - 1);
  const double p = std::min(1.0, static_cast<double>(step - t.warmup_steps) / span);
  return lr_min + (lr - lr_min) * (1 + std::cos(M_PI * p)) / 2;
}

// ---------------------------------------------------------------- the rank

namespace {

std::atomic<int> g_stop_signal{0};
void on_stop(int sig) { g_stop_signal.store(sig); }

// Whole lines to every sink with one write() each (O_APPEND): ranks sharing --metrics PATH never
// interleave inside a line.
class MetricsSink {
 public:
  MetricsSink(const fs::path& rank_file, const std::string& shared, bool to_stdout)
      : to_stdout_(to_stdout) {
    fds_.push_back(::open(rank_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644));
    if (!shared.empty()) fds_.push_back(::open(shared.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644));
  }
  ~MetricsSink() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  bool ok() const {
    for (int fd : fds_)
      if (fd < 0) return false;
    return true;
  }
  void write(const std::string& line) {
    const std::string l = line + "\n";
    for (int fd : fds_)
      if (fd >= 0) (void)!::write(fd, l.data(), l.size());
    if (to_stdout_) {
      std::cout << l;
      std::cout.flush();
    }
  }

 private:
  std::vector<int> fds_;
  bool to_stdout_;
};

class Log {
 public:
  Log(const fs::path& path, bool echo) : out_(path, std::ios::app), echo_(echo) {}
  template <class... A>
  void operator()(const A&... parts) {
    std::ostringstream s;
    (s << ... << parts);
    out_ << s.str() << "\n";
    out_.flush();
    if (echo_) std::cerr << "meshtrain: " << s.str() << "\n";
  }

 private:
  std::ofstream out_;
  bool echo_;
};

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Achieved matmul TFLOP/s of this rank with its threads (all local ranks measure at once, after
// a barrier, so each sees its share of the machine). A square matmul of n does 2 n^3 FLOPs.
double measure_peak_tflops(at::Device device, at::ScalarType dtype) {
  const int64_t n = device.is_cuda() ? 8192 : 1024;
  auto opts = at::TensorOptions().device(device).dtype(dtype);
  Tensor a = at::randn({n, n}, opts), b = at::randn({n, n}, opts);
  for (int i = 0; i < 2; ++i) (void)at::mm(a, b);
  if (device.is_cuda()) torch::cuda::synchronize();
  int iters = 0;
  auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < 0.5 || iters < 3) {
    (void)at::mm(a, b);
    ++iters;
    if (device.is_cuda()) torch::cuda::synchronize();
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return 2.0 * n * n * n * iters / elapsed / 1e12;
}

}  // namespace

int run_rank(const TrainerOptions& o, const LaunchEnv& env, const ModelSpec& spec,
             const MeshShape& shape) {
  const int rank = env.rank;
  const TrainingConfig& t = o.run.training;
  std::error_code ec;
  fs::create_directories(o.run_dir, ec);
  const bool supervised = std::getenv("MESHWORK_SUPERVISED") != nullptr;
  Log log(fs::path(o.run_dir) / ("rank" + std::to_string(rank) + ".log"), !supervised && rank == 0);
  MetricsSink sink(fs::path(o.run_dir) / ("metrics-rank" + std::to_string(rank) + ".jsonl"),
                   o.metrics, o.metrics.empty() && rank == 0);
  if (!sink.ok()) {
    std::cerr << "meshtrain: --metrics: " << o.metrics << ": a writable file\n";
    return 2;
  }
  {
    std::ofstream pid(fs::path(o.run_dir) / ("rank" + std::to_string(rank) + ".pid"));
    pid << getpid() << "\n";
  }
  auto end = [&](const std::string& status, const std::string& reason) {
    EndRecord e;
    e.rank = rank;
    e.time = now_unix();
    e.status = status;
    e.reason = reason;
    sink.write(to_json_line(e));
  };
  std::signal(SIGTERM, on_stop);
  std::signal(SIGINT, on_stop);

  try {
    // Threads: the node's cores split between its ranks (docs/design.md, "Facts").
    const int threads = std::max(1, usable_cores() / std::max(1, env.local_world_size));
    at::set_num_threads(threads);
    const bool cuda = t.device == DeviceKind::cuda;
    at::Device device = at::kCPU;
    if (cuda) {
      if (!torch::cuda::is_available()) {
        end("failed", "--device cuda: no CUDA device is visible");
        log("--device: cuda: no CUDA device is visible");
        return 2;
      }
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank));
      device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
    }
    const at::ScalarType dtype = t.precision == Precision::bf16 ? at::kBFloat16 : at::kFloat;

    // Data.
    fs::path data_path = o.run.data.is_string() ? fs::path(o.run.data.get<std::string>()) : default_data_path();
    auto data = TokenData::open(data_path, spec.vocab_size);
    if (!data.ok()) {
      log(data.error().message());
      end("failed", data.error().message());
      if (rank == 0) std::cerr << "meshtrain: " << data.error().message() << "\n";
      return 2;
    }

    // Communicators.
    CommOptions co;
    co.rank = rank;
    co.world_size = env.world_size;
    co.ranks_per_node = env.local_world_size;
    co.shape = shape;
    co.device = t.device;
    co.master_addr = env.master_addr;
    co.master_port = env.master_port;
    co.host_store = rank == 0 && !env.store_hosted;
    auto comm_r = Communicator::create(co);
    if (!comm_r.ok()) {
      log(comm_r.error().message());
      end("failed", comm_r.error().message());
      return 3;
    }
    Communicator& comm = **comm_r;
    const MeshCoord coord = comm.mesh().coord_of(rank);
    log("rank ", rank, " of ", env.world_size, " (node-local ", env.local_rank, "/",
        env.local_world_size, "), mesh ", shape.to_string(), ", coords (", coord[Axis::dp_replicate], ",",
        coord[Axis::dp_shard], ",", coord[Axis::cp], ",", coord[Axis::tp], "), ", threads, " threads, data ",
        data_path.string(), " (", (*data)->num_tokens(), " tokens)");

    // Model and parallelism.
    // The parallelize step (torchtitan's order): tensor parallel cuts the model into this tp
    // rank's pieces and installs its region operators, context parallel installs ring
    // attention, then data parallel (FSDP over dp_shard_cp, DDP over dp_replicate) wraps the
    // local pieces.
    Model model(spec);
    TpOptions tpo;
    tpo.sequence_parallel = t.sequence_parallel;
    TensorParallel tp(model, comm, tpo);
    ContextParallel cp(model, comm);
    DataParallelOptions dpo;
    dpo.localize = [&tp](int unit, const Tensor& full) { return tp.localize(unit, full); };
    dpo.shard_group = shape[Axis::cp] > 1 ? GroupKind::dp_shard_cp : GroupKind::dp_shard;
    dpo.compute_dtype = dtype;
    dpo.device = device;
    dpo.seed = t.seed;
    dpo.fsdp_grad_sync_per_step = t.fsdp_grad_sync == FsdpGradSync::step;
    DataParallel dp(model, comm, dpo);
    tp.annotate(dp.params());
    std::vector<Tensor> params;
    for (auto& fp : dp.params()) params.push_back(fp.param);
    AdamW opt;
    opt.weight_decay = o.weight_decay;
    opt.init(params);

    // Data-parallel coordinates: who reads which sequences.
    const Group& dp_group = comm.group(GroupKind::dp);
    const int64_t dp_size = dp_group.size(), dp_rank = dp_group.rank;
    const int64_t accum = t.global_batch / (static_cast<int64_t>(t.micro_batch) * dp_size);
    const double global_tokens = static_cast<double>(t.global_batch) * t.seq_len;

    // Resume.
    const fs::path ckpt_dir = o.checkpoint_dir.empty() ? fs::path(o.run_dir) / "checkpoints"
                                                       : fs::path(o.checkpoint_dir);
    const std::string meta = nlohmann::json{{"mesh", shape.to_string()},
                                            {"world", env.world_size},
                                            {"model", spec.name},
                                            {"seed", t.seed},
                                            {"global_batch", t.global_batch},
                                            {"seq_len", t.seq_len}}
                                 .dump();
    int64_t start_step = 0;
    if (o.resume) {
      auto latest = latest_checkpoint(ckpt_dir);
      if (latest) {
        auto m = read_meta(*latest);
        auto saved = nlohmann::json::parse(m.ok() ? *m : "{}", nullptr, false);
        auto want = nlohmann::json::parse(meta);
        if (saved.is_discarded() || saved["mesh"] != want["mesh"] || saved["model"] != want["model"] ||
            saved["global_batch"] != want["global_batch"] || saved["seq_len"] != want["seq_len"]) {
          std::string msg = "--resume: " + latest->string() + ": a checkpoint of the same model, mesh, "
                            "global batch and seq len (saved " + (m.ok() ? *m : "?") + ")";
          log(msg);
          end("failed", msg);
          if (rank == 0) std::cerr << "meshtrain: " << msg << "\n";
          return 2;
        }
        auto st = load_rank_state(*latest, rank);
        if (!st.ok()) {
          log(st.error().message());
          end("failed", st.error().message());
          return 2;
        }
        at::NoGradGuard ng;
        for (size_t i = 0; i < params.size(); ++i) {
          params[i].copy_(st->params[i]);
          opt.exp_avg[i].copy_(st->exp_avg[i]);
          opt.exp_avg_sq[i].copy_(st->exp_avg_sq[i]);
        }
        opt.step = st->step;
        {
          at::Generator gen = at::detail::getDefaultCPUGenerator();
          gen.set_state(st->rng);
        }
        start_step = st->step;
        log("resumed from ", latest->string(), " at step ", start_step);
      } else {
        log("--resume: no complete checkpoint in ", ckpt_dir.string(), "; starting at step 0");
      }
    }

    // Peak for MFU.
    comm.barrier(comm.world());
    const double peak = t.peak_tflops > 0 ? t.peak_tflops : measure_peak_tflops(device, dtype);
    log("peak ", peak, " TFLOP/s per rank (", t.peak_tflops > 0 ? "given" : "measured", ")");

    StartRecord sr;
    sr.rank = rank;
    sr.time = now_unix();
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    sr.host = host;
    sr.pid = getpid();
    sr.node = comm.mesh().node_of(rank);
    sr.world = env.world_size;
    sr.mesh = shape;
    {
      RunConfig ran = o.run;
      ran.mesh = shape;
      sr.config = to_json(ran);
    }
    sr.peak_tflops = peak;
    sr.versions = {{"meshtrain", MESHWORK_VERSION},
                   {"torch", TORCH_VERSION},
                   {"backend", cuda ? "nccl" : "gloo"},
                   {"threads", threads}};
    sink.write(to_json_line(sr));

    const double flops_per_token = model.flops_per_token(t.seq_len);
    ForwardOptions fo;
    fo.activation_checkpointing = t.activation_checkpointing == ActivationCheckpointing::full;
    fo.compute_dtype = dtype;
    if (cp.active()) fo.positions = cp.positions(t.seq_len, device);
    std::vector<int64_t> buf(static_cast<size_t>(t.micro_batch) * (t.seq_len + 1));

    for (int64_t step = start_step; step < t.steps; ++step) {
      if (int sig = g_stop_signal.load()) {
        log("stopped by signal ", sig, " before step ", step);
        end("stopped", "signal " + std::to_string(sig));
        return 128 + sig;
      }
      // MESHTRAIN_PROFILE=PATH (developer aid, bench/ and docs/trainer.md): the operators of
      // steps 2 and 3 go to PATH.rank<r> as a chrome trace (torch's legacy profiler).
      std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
      if (const char* pp = std::getenv("MESHTRAIN_PROFILE"); pp && (step == 2 || step == 3))
        profile = std::make_unique<torch::autograd::profiler::RecordProfile>(
            std::string(pp) + ".step" + std::to_string(step) + ".rank" + std::to_string(rank));
      comm.times().reset();
      if (cuda) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
      else reset_cpu_peak();
      const auto t0 = std::chrono::steady_clock::now();
      const double lr = learning_rate(t, step);

      Tensor local_loss = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device));
      for (int64_t m = 0; m < accum; ++m) {
        auto idx = TokenData::batch_indices(step, t.global_batch, dp_rank, dp_size, m, t.micro_batch);
        for (size_t i = 0; i < idx.size(); ++i)
          (*data)->sequence(idx[i], t.seq_len, buf.data() + i * (t.seq_len + 1));
        Tensor seqs = at::from_blob(buf.data(), {t.micro_batch, t.seq_len + 1}, at::kLong).to(device);
        // cp ranks of one replica read the same sequences and keep their load-balanced chunks.
        Tensor inputs = cp.shard(seqs.narrow(1, 0, t.seq_len));
        Tensor targets = cp.shard(seqs.narrow(1, 1, t.seq_len));
        if (m == accum - 1) dp.arm_gradient_sync();
        Tensor loss_sum = model.loss_sum(inputs, targets, dp, fo);
        // Mean over every token of the global batch: each rank's share divided by the global
        // token count, gradients summed over ranks (parallelize_dp.h).
        (loss_sum / global_tokens).backward();
        local_loss += loss_sum.detach().to(at::kDouble);
      }
      dp.finish_gradients();
      tp.finish_gradients(dp.params());
      const double norm = dp.grad_norm();
      // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied when < 1.
      // The coefficient is applied inside the optimizer's pass over the gradients.
      double clip = 1.0;
      if (t.max_grad_norm > 0) {
        const double coef = t.max_grad_norm / (norm + 1e-6);
        if (coef < 1) clip = coef;
      }
      opt.update(params, lr, clip);
      dp.zero_grad();
      comm.all_reduce(local_loss, GroupKind::dp_cp);
      const double loss = local_loss.item<double>() / global_tokens;
      if (cuda) torch::cuda::synchronize();
      const double step_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

      StepRecord r;
      r.step = step;
      r.rank = rank;
      r.time = now_unix();
      r.loss = loss;
      r.lr = lr;
      r.grad_norm = norm;
      // A data-parallel replica's tokens; tp/cp ranks of one replica share them (docs/metrics.md).
      r.tokens = static_cast<int64_t>(global_tokens) / dp_size;
      r.tokens_per_s = static_cast<double>(r.tokens) / step_s;
      // This rank's share of the model FLOPs: the replica's FLOPs split over its tp x cp ranks.
      const double rank_flops = flops_per_token * r.tokens / (shape[Axis::tp] * shape[Axis::cp]);
      r.tflops = rank_flops / step_s / 1e12;
      r.mfu = r.tflops / peak;
      if (cuda) {
        auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
        const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
        r.mem_bytes = stats.allocated_bytes[agg].current;
        r.mem_peak_bytes = stats.allocated_bytes[agg].peak;
      } else {
        r.mem_bytes = cpu_bytes_in_use();
        r.mem_peak_bytes = cpu_peak_bytes();
      }
      r.comm_s = comm.times().seconds;
      r.step_s = step_s;
      r.compute_s = std::max(0.0, step_s - comm.times().total());
      sink.write(to_json_line(r));

      if (t.checkpoint_every > 0 && (step + 1) % t.checkpoint_every == 0) {
        RankState s;
        s.step = step + 1;
        s.data_position = (step + 1) * t.global_batch;
        s.params = params;
        s.exp_avg = opt.exp_avg;
        s.exp_avg_sq = opt.exp_avg_sq;
        s.rng = at::detail::getDefaultCPUGenerator().get_state();
        const fs::path sd = checkpoint_step_dir(ckpt_dir, step + 1);
        if (Status st = save_rank_state(sd, rank, s); !st.ok()) throw std::runtime_error(st.error().message());
        comm.barrier(comm.world());
        if (rank == 0)
          if (Status st = mark_complete(sd, meta); !st.ok()) throw std::runtime_error(st.error().message());
        log("checkpoint ", sd.string());
      }
    }
    comm.barrier(comm.world());
    log("done: ", t.steps, " steps");
    end("ok", "");
    return 0;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what = what.substr(0, nl);
    log("failed: ", e.what());
    end("failed", what);
    return 3;
  }
}

}  // namespace meshwork::trainer
