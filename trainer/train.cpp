#include "trainer/train.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/cuda.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "core/mesh_json.h"
#include "core/metrics.h"
#include "core/run_config.h"
#include "trainer/checkpoint.h"
#include "trainer/comm.h"
#include "trainer/cpu_memory.h"
#include "trainer/data.h"
#include "trainer/hf/checkpoint_loader.h"
#include "trainer/hf/export.h"
#include "trainer/lr_schedule.h"
#include "trainer/metrics_sink.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"
#include "trainer/parallelize.h"
#include "trainer/parallelize_pp.h"
#include "trainer/supervisor.h"

namespace meshwork::trainer {
namespace fs = std::filesystem;
using at::Tensor;

namespace {

std::atomic<int> g_stop_signal{0};
void on_stop(int sig) { g_stop_signal.store(sig); }

// A /proc/self/status field in bytes (VmRSS: resident now; VmHWM: peak resident), 0 if absent.
int64_t proc_status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1) * 1024;
  return 0;
}

// VmHWM := VmRSS (Linux's clear_refs "5"), so the next VmHWM is the peak from here on.
void reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

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

// What one optimizer step measured (the step record's inputs).
struct StepResult {
  double loss = 0, lr = 0, grad_norm = 0, step_s = 0;
};

// One rank's training: set up (data, communicators, the parallelized model, AdamW), resume,
// then train steps (gradient accumulation, global-norm clipping, metrics) with checkpoints.
// Every method that can fail returns the process exit code, 0 to go on.
class Trainer {
 public:
  Trainer(const TrainerOptions& o, const LaunchEnv& env, const ModelSpec& spec, const ParallelLayout& layout);
  int run();

 private:
  int setup();
  int connect();
  int build_model();
  int open_hf_checkpoint(ParallelizeOptions& po);
  void record_load(double seconds, int64_t rss_before);
  int resume();
  void announce();
  int train();
  StepResult train_step(int64_t step);
  Tensor micro_batch(const TokenData& data, int64_t step, int64_t m);
  // Micro-batch m's (inputs, targets), this rank's cp shards, in tensors of their own.
  std::pair<Tensor, Tensor> micro_batch_shards(const TokenData& data, int64_t step, int64_t m);
  void record_step(int64_t step, const StepResult& s);
  void save_checkpoint(int64_t steps_done);
  void evaluate(int64_t steps_done);
  int save_hf();

  // Ends the run with `msg` (log, end record and, when tell, rank 0's stderr); returns `code`.
  int fail(int code, const std::string& msg, bool tell = false);
  void end(const std::string& status, const std::string& reason);
  fs::path run_file(const std::string& name) const { return fs::path(o_.run_dir) / name; }

  const TrainerOptions& o_;
  const LaunchEnv& env_;
  const ModelSpec& spec_;
  const ParallelLayout& layout_;  // core's one layout: the shape and every size derived from it
  const MeshShape& shape_;
  const TrainingConfig& t_;
  const int rank_;
  Log log_;
  MetricsSink sink_;

  int threads_ = 1;
  bool cuda_ = false;
  at::Device device_ = at::kCPU;
  at::ScalarType dtype_ = at::kFloat;
  fs::path data_path_;
  std::unique_ptr<TokenData> data_;
  std::unique_ptr<TokenData> eval_data_;  // --eval-data; null: no evaluation
  int64_t eval_batches_ = 0;              // global batches per evaluation
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<hf::HfCheckpoint> checkpoint_;  // --init hf: the mapped files, while loading
  std::unique_ptr<ParallelModel> pm_;
  std::vector<PipelineChunk> pipeline_chunks_;  // pp > 1: every chunk of core's pipeline_cut
  std::unique_ptr<PipelineStage> pipeline_;  // pp > 1
  AdamW opt_;
  // Data-parallel coordinates: who reads which sequences.
  int64_t dp_size_ = 1, dp_rank_ = 0, accum_ = 1;
  double global_tokens_ = 0;
  fs::path ckpt_dir_;
  std::string meta_;  // the checkpoint's meta.json (what resume must match)
  int64_t start_step_ = 0;
  double peak_ = 0, flops_per_token_ = 0;
  ForwardOptions fo_;
  std::vector<int64_t> buf_;  // one micro-batch of token ids (seq_len + 1 per sequence)
};

Trainer::Trainer(const TrainerOptions& o, const LaunchEnv& env, const ModelSpec& spec,
                 const ParallelLayout& layout)
    : o_(o),
      env_(env),
      spec_(spec),
      layout_(layout),
      shape_(layout.shape()),
      t_(o.run.training),
      rank_(env.rank),
      log_(run_file("rank" + std::to_string(env.rank) + ".log"),
           std::getenv("MESHWORK_SUPERVISED") == nullptr && env.rank == 0),
      sink_(run_file("metrics-rank" + std::to_string(env.rank) + ".jsonl"), o.metrics,
            o.metrics.empty() && env.rank == 0) {}

void Trainer::end(const std::string& status, const std::string& reason) {
  EndRecord e;
  e.rank = rank_;
  e.time = now_unix();
  e.status = status;
  e.reason = reason;
  sink_.write(to_json_line(e));
}

int Trainer::fail(int code, const std::string& msg, bool tell) {
  log_(msg);
  end("failed", msg);
  if (tell && rank_ == 0) std::cerr << "meshtrain: " << msg << "\n";
  return code;
}

int Trainer::run() {
  if (!sink_.ok()) {
    std::cerr << "meshtrain: --metrics: " << o_.metrics << ": a writable file\n";
    return 2;
  }
  {
    std::ofstream pid(run_file("rank" + std::to_string(rank_) + ".pid"));
    pid << getpid() << "\n";
  }
  std::signal(SIGTERM, on_stop);
  std::signal(SIGINT, on_stop);
  try {
    if (int rc = setup()) return rc;
    if (int rc = resume()) return rc;
    announce();
    return train();
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (auto nl = what.find('\n'); nl != std::string::npos) what = what.substr(0, nl);
    log_("failed: ", e.what());
    end("failed", what);
    return 3;
  }
}

// Threads, device, data, communicators, the parallelized model and its optimizer.
int Trainer::setup() {
  // Threads: the node's cores split between its ranks (docs/design.md, "Facts").
  threads_ = std::max(1, usable_cores() / std::max(1, env_.local_world_size));
  at::set_num_threads(threads_);
  cuda_ = t_.device == DeviceKind::cuda;
  if (cuda_) {
    if (!torch::cuda::is_available()) {
      end("failed", "--device cuda: no CUDA device is visible");
      log_("--device: cuda: no CUDA device is visible");
      return 2;
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(env_.local_rank));
    device_ = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env_.local_rank));
  }
  dtype_ = t_.precision == Precision::bf16 ? at::kBFloat16 : at::kFloat;

  data_path_ = o_.run.data.is_string() ? fs::path(o_.run.data.get<std::string>()) : default_data_path();
  auto data = TokenData::open(data_path_, spec_.vocab_size);
  if (!data.ok()) return fail(2, data.error().message(), /*tell=*/true);
  data_ = std::move(*data);
  if (o_.run.eval_data.is_string()) {
    auto eval = TokenData::open(o_.run.eval_data.get<std::string>(), spec_.vocab_size);
    if (!eval.ok()) {
      Error e = eval.error();
      e.field = "--eval-data";
      return fail(2, e.message(), /*tell=*/true);
    }
    eval_data_ = std::move(*eval);
    const int64_t seqs = eval_data_->num_sequences(t_.seq_len);
    if (seqs < 1)
      return fail(2, "--eval-data: " + o_.run.eval_data.get<std::string>() + ": at least seq_len + 1 = " +
                         std::to_string(t_.seq_len + 1) + " tokens", /*tell=*/true);
    eval_batches_ = t_.eval_batches > 0 ? t_.eval_batches : std::max<int64_t>(1, seqs / t_.global_batch);
  }
  std::error_code exists_ec;
  if (!o_.run.save_hf.empty() && fs::exists(o_.run.save_hf, exists_ec))
    return fail(2, "--save-hf: " + o_.run.save_hf + ": a directory that does not exist yet", /*tell=*/true);

  if (int rc = connect()) return rc;
  if (int rc = build_model()) return rc;

  const Group& dp_group = comm_->group(GroupKind::dp);
  dp_size_ = layout_.dp_size();
  dp_rank_ = dp_group.rank;
  accum_ = layout_.grad_accum_steps();
  global_tokens_ = static_cast<double>(t_.global_batch) * t_.seq_len;
  flops_per_token_ = model_->flops_per_token(t_.seq_len);
  fo_.activation_checkpointing = t_.activation_checkpointing == ActivationCheckpointing::full;
  fo_.compute_dtype = dtype_;
  fo_.positions = pm_->positions(t_.seq_len, device_);
  fo_.rope = model_->rope_tables(t_.seq_len / shape_[Axis::cp], fo_, device_);
  buf_.resize(static_cast<size_t>(t_.micro_batch) * (t_.seq_len + 1));
  if (shape_[Axis::pp] > 1) {
    PipelineOptions po;
    po.schedule = t_.pp_schedule;
    po.virtual_stages = t_.pp_virtual_stages;
    po.micro_batches = accum_;
    po.chunks = pipeline_chunks_;
    po.micro_batch = t_.micro_batch;
    po.residual_seq_len = pm_->residual_seq_len(t_.seq_len / shape_[Axis::cp]);
    po.hidden = spec_.hidden_size;
    po.dtype = dtype_;
    po.device = device_;
    pipeline_ = std::make_unique<PipelineStage>(*pm_, *comm_, std::move(po));
  }
  return 0;
}

int Trainer::connect() {
  CommOptions co;
  co.rank = rank_;
  co.world_size = env_.world_size;
  co.ranks_per_node = env_.local_world_size;
  co.shape = shape_;
  co.device = t_.device;
  co.master_addr = env_.master_addr;
  co.master_port = env_.master_port;
  co.host_store = rank_ == 0 && !env_.store_hosted;
  auto comm = Communicator::create(co);
  if (!comm.ok()) return fail(3, comm.error().message());
  comm_ = std::move(*comm);
  const MeshCoord coord = comm_->mesh().coord_of(rank_);
  log_("rank ", rank_, " of ", env_.world_size, " (node-local ", env_.local_rank, "/",
       env_.local_world_size, "), mesh ", shape_.to_string(), ", coords (",
       shape_[Axis::pp] > 1 ? "stage " + std::to_string(coord[Axis::pp]) + ": " : std::string(), coord[Axis::dp_replicate],
       ",", coord[Axis::dp_shard], ",", coord[Axis::cp], ",", coord[Axis::tp], "), ", threads_,
       " threads, data ", data_path_.string(), " (", data_->num_tokens(), " tokens)");
  return 0;
}

// The plain model, parallelized (parallelize.h), and AdamW over its flat parameters.
int Trainer::build_model() {
  model_ = std::make_unique<Model>(spec_);
  ParallelizeOptions po;
  if (shape_[Axis::pp] > 1) {
    // The pipeline's cut comes first (parallelize.h): a Hugging Face checkpoint is then read for
    // this stage's units only.
    pipeline_chunks_ = pipeline_cut(spec_, t_.seq_len, shape_[Axis::pp], t_.pp_virtual_stages);
    const auto own = chunks_of_rank(pipeline_chunks_, comm_->mesh().coord_of(rank_)[Axis::pp]);
    model_->keep_chunks(own);
    std::string held;
    for (const PipelineChunk& c : own)
      held += (held.empty() ? "" : ", ") + std::string("layers ") + std::to_string(c.first_layer) + "-" +
              std::to_string(c.first_layer + c.num_layers - 1) + (c.embedding ? " + embedding" : "") +
              (c.head ? " + norm and head" : "");
    log_("pipeline stage ", comm_->mesh().coord_of(rank_)[Axis::pp], " of ", shape_[Axis::pp], " (",
         to_string(t_.pp_schedule), ", ", t_.pp_virtual_stages, " chunk(s) per stage): ", held);
  }
  if (int rc = open_hf_checkpoint(po)) return rc;
  const int64_t rss_before = proc_status_bytes("VmRSS");
  reset_peak_rss();
  const auto t0 = std::chrono::steady_clock::now();
  po.sequence_parallel = t_.sequence_parallel;
  po.compute_dtype = dtype_;
  po.device = device_;
  po.seed = t_.seed;
  po.fsdp_grad_sync_per_step = t_.fsdp_grad_sync == FsdpGradSync::step;
  po.fsdp_group = layout_.fsdp_group();
  pm_ = parallelize(*model_, *comm_, po);
  if (checkpoint_) {
    record_load(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), rss_before);
    checkpoint_.reset();  // unmaps the files
  }
  opt_.weight_decay = o_.weight_decay;
  opt_.init(pm_->params());
  return 0;
}

// --init hf (or auto with a model directory holding weights): open and check the checkpoint
// against the model (hf/checkpoint_loader.h) and read this rank's pieces from it.
int Trainer::open_hf_checkpoint(ParallelizeOptions& po) {
  const auto dir = hf_weights_dir(o_.run.model);
  if (t_.init == WeightInit::random || (t_.init == WeightInit::auto_ && !dir)) return 0;
  if (!dir)
    return fail(2, "--init: hf: --model " + (o_.run.model.is_string() ? o_.run.model.get<std::string>() : "(inline)") +
                       ": a Hugging Face directory holding model.safetensors or model.safetensors.index.json "
                       "(or --init random)", /*tell=*/true);
  // --resume with a complete checkpoint of its own: resume() overwrites every parameter with it,
  // so the Hugging Face weights would be read for nothing (and the directory may since have been
  // replaced, e.g. by --save-hf of this very run). The seeded init is cheap and never read.
  if (o_.resume) {
    const fs::path own = o_.checkpoint_dir.empty() ? run_file("checkpoints") : fs::path(o_.checkpoint_dir);
    if (auto latest = latest_checkpoint(own)) {
      log_("initial weights: --resume from ", latest->string(), "; the Hugging Face checkpoint ", dir->string(),
           " is not read");
      return 0;
    }
  }
  std::vector<std::vector<hf::ParamShape>> units;
  for (int u = 0; u < model_->num_units(); ++u) {
    units.emplace_back();
    for (const ParamInfo& p : model_->full_layout(u).params) units.back().push_back({p.name, p.shape});
  }
  auto ck = hf::HfCheckpoint::open(*dir, spec_, units);
  if (!ck.ok()) return fail(exit_code(ck.error().kind), ck.error().message(), /*tell=*/true);
  checkpoint_ = std::move(*ck);
  hf::HfCheckpoint* c = checkpoint_.get();
  po.read_full = [c](int unit, int param, int64_t offset, int64_t count, float* out) {
    c->read(unit, param, offset, count, out);
  };
  log_("initial weights: Hugging Face checkpoint ", dir->string());
  return 0;
}

// What loading cost this rank: rank log and hf-load-rank<r>.json in the run directory (the
// bench's input): seconds, its parameter bytes (fp32), the largest single tensor piece it holds
// and its peak resident memory growth during the load.
void Trainer::record_load(double seconds, int64_t rss_before) {
  int64_t param_bytes = 0, largest = 0;
  for (const Tensor& p : pm_->params()) param_bytes += p.numel() * 4;
  for (int u = 0; u < model_->num_units(); ++u) {
    if (!model_->holds(u)) continue;
    const UnitLayout& lay = model_->layout(u);
    const int64_t n = lay.numel(), groups = comm_->group(layout_.fsdp_group()).size();
    const int64_t shard = (n + groups - 1) / groups, lo = groups > 1 ? comm_->group(layout_.fsdp_group()).rank * shard : 0;
    const int64_t hi = groups > 1 ? lo + shard : n;
    for (size_t i = 0; i < lay.params.size(); ++i) {
      const int64_t a = std::max(lo, lay.offset(i)), b = std::min(hi, lay.offset(i) + lay.params[i].numel());
      largest = std::max(largest, (b - a) * 4);
    }
  }
  const int64_t peak = proc_status_bytes("VmHWM") - rss_before;
  log_("loaded ", param_bytes / 1e6, " MB of parameters in ", seconds, " s (",
       checkpoint_->model_bytes() / 1e6, " MB checkpoint); peak resident growth ", peak / 1e6,
       " MB, largest piece ", largest / 1e6, " MB");
  std::ofstream f(run_file("hf-load-rank" + std::to_string(rank_) + ".json"));
  f << nlohmann::json{{"rank", rank_}, {"seconds", seconds}, {"param_bytes", param_bytes},
                      {"largest_piece_bytes", largest}, {"peak_rss_growth_bytes", peak},
                      {"checkpoint_bytes", checkpoint_->model_bytes()}}
           .dump()
    << "\n";
}

// --resume: this rank's parameters, AdamW moments, step and RNG from the newest complete
// checkpoint, which must be of the same model, mesh, global batch and seq len.
int Trainer::resume() {
  ckpt_dir_ = o_.checkpoint_dir.empty() ? run_file("checkpoints") : fs::path(o_.checkpoint_dir);
  // What resume must match, and what `meshtrain export` needs to consolidate the ranks' files
  // (trainer/hf/export.h): the model's config, the mesh shape, the group FSDP sharded over,
  // the precision and the model directory (tokenizer files).
  nlohmann::json meta = {{"mesh", shape_.to_string()},
                         {"world", env_.world_size},
                         {"model", spec_.name},
                         {"seed", t_.seed},
                         {"global_batch", t_.global_batch},
                         {"seq_len", t_.seq_len},
                         {"model_config", model_spec_to_json(spec_)},
                         {"mesh_shape", to_json(shape_)},
                         {"fsdp_group", std::string(group_name(layout_.fsdp_group()))},
                         {"precision", std::string(to_string(t_.precision))}};
  // Which layers a stage holds depends on the chunks per stage too (pipeline_cut).
  if (shape_[Axis::pp] > 1) meta["pp_virtual_stages"] = t_.pp_virtual_stages;
  if (o_.run.model.is_string()) {
    std::error_code ec;
    const fs::path given = o_.run.model.get<std::string>();
    if (fs::is_directory(given, ec)) meta["model_dir"] = fs::absolute(given).string();
    else if (fs::is_regular_file(given, ec)) meta["model_dir"] = fs::absolute(given).parent_path().string();
  }
  meta_ = meta.dump();
  if (!o_.resume) return 0;
  auto latest = latest_checkpoint(ckpt_dir_);
  if (!latest) {
    log_("--resume: no complete checkpoint in ", ckpt_dir_.string(), "; starting at step 0");
    return 0;
  }
  auto m = read_meta(*latest);
  auto saved = nlohmann::json::parse(m.ok() ? *m : "{}", nullptr, false);
  auto want = nlohmann::json::parse(meta_);
  if (saved.is_discarded() || saved["mesh"] != want["mesh"] || saved["model"] != want["model"] ||
      saved["global_batch"] != want["global_batch"] || saved["seq_len"] != want["seq_len"] ||
      saved.value("pp_virtual_stages", 1) != want.value("pp_virtual_stages", 1))
    return fail(2, "--resume: " + latest->string() + ": a checkpoint of the same model, mesh, "
                "global batch, seq len and pp_virtual_stages (saved " + (m.ok() ? *m : "?") + ")", /*tell=*/true);
  auto st = load_rank_state(*latest, rank_);
  if (!st.ok()) return fail(2, st.error().message());
  at::NoGradGuard ng;
  std::vector<Tensor>& params = pm_->params();
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].copy_(st->params[i]);
    opt_.exp_avg[i].copy_(st->exp_avg[i]);
    opt_.exp_avg_sq[i].copy_(st->exp_avg_sq[i]);
  }
  opt_.step = st->step;
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(st->rng);
  start_step_ = st->step;
  log_("resumed from ", latest->string(), " at step ", start_step_);
  return 0;
}

void Trainer::save_checkpoint(int64_t steps_done) {
  RankState s;
  s.step = steps_done;
  s.data_position = steps_done * t_.global_batch;
  s.params = pm_->params();
  s.exp_avg = opt_.exp_avg;
  s.exp_avg_sq = opt_.exp_avg_sq;
  s.rng = at::detail::getDefaultCPUGenerator().get_state();
  const fs::path sd = checkpoint_step_dir(ckpt_dir_, steps_done);
  if (Status st = save_rank_state(sd, rank_, s); !st.ok()) throw std::runtime_error(st.error().message());
  comm_->barrier(comm_->world());
  if (rank_ == 0)
    if (Status st = mark_complete(sd, meta_); !st.ok()) throw std::runtime_error(st.error().message());
  log_("checkpoint ", sd.string());
}

// The peak for MFU (measured by every rank at once unless given), then the start record.
void Trainer::announce() {
  comm_->barrier(comm_->world());
  peak_ = t_.peak_tflops > 0 ? t_.peak_tflops : measure_peak_tflops(device_, dtype_);
  log_("peak ", peak_, " TFLOP/s per rank (", t_.peak_tflops > 0 ? "given" : "measured", ")");

  StartRecord sr;
  sr.rank = rank_;
  sr.time = now_unix();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  sr.host = host;
  sr.pid = getpid();
  sr.node = comm_->mesh().node_of(rank_);
  sr.world = env_.world_size;
  sr.mesh = shape_;
  RunConfig ran = o_.run;
  ran.mesh = shape_;
  sr.config = to_json(ran);
  sr.peak_tflops = peak_;
  sr.versions = {{"meshtrain", MESHWORK_VERSION},
                 {"torch", TORCH_VERSION},
                 {"backend", cuda_ ? "nccl" : "gloo"},
                 {"threads", threads_}};
  sink_.write(to_json_line(sr));
}

int Trainer::train() {
  for (int64_t step = start_step_; step < t_.steps; ++step) {
    if (int sig = g_stop_signal.load()) {
      log_("stopped by signal ", sig, " before step ", step);
      end("stopped", "signal " + std::to_string(sig));
      return 128 + sig;
    }
    // MESHTRAIN_PROFILE=PATH (developer aid, bench/ and docs/trainer.md): the operators of
    // steps 2 and 3 go to PATH.step<s>.rank<r> as a chrome trace: torch's legacy profiler on
    // CPU; on CUDA Kineto (CUPTI), whose trace holds the GPU kernels with their own times, as
    // torch.profiler's export_chrome_trace writes them (bench/profile_summary.py reads both).
    std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
    const char* pp = std::getenv("MESHTRAIN_PROFILE");
    const bool profiled = pp && (step == 2 || step == 3);
    const std::string trace = profiled ? std::string(pp) + ".step" + std::to_string(step) + ".rank" +
                                             std::to_string(rank_) : std::string();
    if (profiled && cuda_) {
      namespace prof = torch::profiler::impl;
      torch::autograd::profiler::prepareProfiler(prof::ProfilerConfig(prof::ProfilerState::KINETO),
                                                 {prof::ActivityType::CPU, prof::ActivityType::CUDA});
      torch::autograd::profiler::enableProfiler(prof::ProfilerConfig(prof::ProfilerState::KINETO),
                                                {prof::ActivityType::CPU, prof::ActivityType::CUDA});
    } else if (profiled) {
      profile = std::make_unique<torch::autograd::profiler::RecordProfile>(trace);
    }
    record_step(step, train_step(step));
    if (profiled && cuda_) torch::autograd::profiler::disableProfiler()->save(trace);
    if (t_.checkpoint_every > 0 && (step + 1) % t_.checkpoint_every == 0) save_checkpoint(step + 1);
    if (eval_data_ && t_.eval_every > 0 && (step + 1) % t_.eval_every == 0) evaluate(step + 1);
  }
  // The final evaluation, unless the last step just had one.
  if (eval_data_ && !(t_.eval_every > 0 && t_.steps % t_.eval_every == 0)) evaluate(t_.steps);
  if (int rc = save_hf()) return rc;
  comm_->barrier(comm_->world());
  log_("done: ", t_.steps, " steps");
  end("ok", "");
  return 0;
}

// --save-hf: a checkpoint of the final weights (unless the last step wrote one), then rank 0
// exports it like `meshtrain export` (trainer/hf/export.h). The other ranks wait at a barrier,
// so the run ends when the export is in place.
int Trainer::save_hf() {
  if (o_.run.save_hf.empty()) return 0;
  if (!(t_.checkpoint_every > 0 && t_.steps % t_.checkpoint_every == 0)) save_checkpoint(t_.steps);
  int rc = 0;
  if (rank_ == 0) {
    hf::ExportOptions eo;
    eo.checkpoint = checkpoint_step_dir(ckpt_dir_, t_.steps);
    eo.out = o_.run.save_hf;
    auto done = hf::export_checkpoint(eo);
    if (!done.ok()) rc = fail(3, "--save-hf: " + done.error().message(), /*tell=*/true);
    else log_("exported ", eo.checkpoint.string(), " to ", eo.out.string(), " (", done->tensors, " tensors)");
  }
  comm_->barrier(comm_->world());
  return rc;
}

// Mean next-token loss over the held-out sequences: batch b of an evaluation is sequences
// b*G .. b*G + G - 1 of the eval data (data.h's order, the same for every shape), read by the
// data-parallel ranks as a training step reads its batch; forward only, every rank taking part.
void Trainer::evaluate(int64_t steps_done) {
  const auto t0 = std::chrono::steady_clock::now();
  Tensor local = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device_));
  for (int64_t b = 0; b < eval_batches_ && pipeline_; ++b)
    local += pipeline_->eval_step([&](int64_t m) { return micro_batch_shards(*eval_data_, b, m); }, fo_);
  for (int64_t b = 0; b < eval_batches_ && !pipeline_; ++b)
    for (int64_t m = 0; m < accum_; ++m) {
      Tensor seqs = micro_batch(*eval_data_, b, m);
      Tensor inputs = pm_->shard_sequence(seqs.narrow(1, 0, t_.seq_len));
      Tensor targets = pm_->shard_sequence(seqs.narrow(1, 1, t_.seq_len));
      local += pm_->eval_loss_sum(inputs, targets, fo_).to(at::kDouble);
    }
  comm_->all_reduce(local, GroupKind::dp_cp);
  if (pipeline_) comm_->all_reduce(local, GroupKind::pp);  // the loss is on the last stage
  EvalRecord r;
  r.step = steps_done - 1;  // the step it follows, as step records count
  r.rank = rank_;
  r.time = now_unix();
  r.tokens = eval_batches_ * t_.global_batch * static_cast<int64_t>(t_.seq_len);
  r.loss = local.item<double>() / static_cast<double>(r.tokens);
  r.eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sink_.write(to_json_line(r));
  log_("eval after step ", steps_done, ": loss ", r.loss, " over ", r.tokens, " tokens");
}

// The sequences of micro-batch m of `step` this dp rank reads, [micro_batch, seq_len + 1].
Tensor Trainer::micro_batch(const TokenData& data, int64_t step, int64_t m) {
  auto idx = TokenData::batch_indices(step, t_.global_batch, dp_rank_, dp_size_, m, t_.micro_batch);
  for (size_t i = 0; i < idx.size(); ++i)
    data.sequence(idx[i], t_.seq_len, buf_.data() + i * (t_.seq_len + 1));
  return at::from_blob(buf_.data(), {t_.micro_batch, t_.seq_len + 1}, at::kLong).to(device_);
}

std::pair<Tensor, Tensor> Trainer::micro_batch_shards(const TokenData& data, int64_t step, int64_t m) {
  // micro_batch() reads into one reused buffer: a pipeline holds several micro-batches at once.
  Tensor seqs = micro_batch(data, step, m).clone();
  return {pm_->shard_sequence(seqs.narrow(1, 0, t_.seq_len)), pm_->shard_sequence(seqs.narrow(1, 1, t_.seq_len))};
}

// Forward/backward over the accumulation micro-batches, gradient finishing, clipping, AdamW.
StepResult Trainer::train_step(int64_t step) {
  comm_->times().reset();
  if (cuda_) c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
  else reset_cpu_peak();
  const auto t0 = std::chrono::steady_clock::now();
  StepResult r;
  r.lr = learning_rate(t_, step);

  Tensor local_loss = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device_));
  if (pipeline_)
    local_loss = pipeline_->train_step([&](int64_t m) { return micro_batch_shards(*data_, step, m); },
                                       global_tokens_, fo_);
  for (int64_t m = 0; m < accum_ && !pipeline_; ++m) {
    Tensor seqs = micro_batch(*data_, step, m);
    // cp ranks of one replica read the same sequences and keep their load-balanced chunks.
    Tensor inputs = pm_->shard_sequence(seqs.narrow(1, 0, t_.seq_len));
    Tensor targets = pm_->shard_sequence(seqs.narrow(1, 1, t_.seq_len));
    if (m == accum_ - 1) pm_->arm_gradient_sync();
    Tensor loss_sum = pm_->loss_sum(inputs, targets, fo_);
    // Mean over every token of the global batch: each rank's share divided by the global
    // token count, gradients summed over ranks (parallelize_dp.h).
    (loss_sum / global_tokens_).backward();
    local_loss += loss_sum.detach().to(at::kDouble);
  }
  pm_->finish_gradients();
  r.grad_norm = pm_->grad_norm();
  // torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied when < 1.
  // The coefficient is applied inside the optimizer's pass over the gradients.
  double clip = 1.0;
  if (t_.max_grad_norm > 0) {
    const double coef = t_.max_grad_norm / (r.grad_norm + 1e-6);
    if (coef < 1) clip = coef;
  }
  opt_.update(pm_->params(), r.lr, clip);
  pm_->zero_grad();
  comm_->all_reduce(local_loss, GroupKind::dp_cp);
  if (pipeline_) comm_->all_reduce(local_loss, GroupKind::pp);  // the loss is on the last stage
  r.loss = local_loss.item<double>() / global_tokens_;
  if (cuda_) torch::cuda::synchronize();
  r.step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void Trainer::record_step(int64_t step, const StepResult& s) {
  StepRecord r;
  r.step = step;
  r.rank = rank_;
  r.time = now_unix();
  r.loss = s.loss;
  r.lr = s.lr;
  r.grad_norm = s.grad_norm;
  // A data-parallel replica's tokens; tp/cp ranks of one replica share them (docs/metrics.md).
  r.tokens = layout_.tokens_per_replica_step();
  r.tokens_per_s = static_cast<double>(r.tokens) / s.step_s;
  // This rank's share of the model FLOPs: the replica's FLOPs split over its pp x tp x cp ranks.
  const double rank_flops =
      flops_per_token_ * r.tokens / (shape_[Axis::pp] * shape_[Axis::tp] * shape_[Axis::cp]);
  r.tflops = rank_flops / s.step_s / 1e12;
  r.mfu = r.tflops / peak_;
  if (cuda_) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
    const auto agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    r.mem_bytes = stats.allocated_bytes[agg].current;
    r.mem_peak_bytes = stats.allocated_bytes[agg].peak;
    // What the caching allocator held from the driver (allocated plus its slack): the figure
    // nvidia-smi shows, less the CUDA context. Logged, not a metrics field (bench/gpu.sh reads it).
    log_("step ", step, ": cuda allocated peak ", r.mem_peak_bytes, " B, reserved peak ",
         stats.reserved_bytes[agg].peak, " B");
  } else {
    r.mem_bytes = cpu_bytes_in_use();
    r.mem_peak_bytes = cpu_peak_bytes();
  }
  r.comm_s = comm_->times().seconds;
  r.step_s = s.step_s;
  r.compute_s = std::max(0.0, s.step_s - comm_->times().total());
  sink_.write(to_json_line(r));
}

}  // namespace

int run_rank(const TrainerOptions& o, const LaunchEnv& env, const ModelSpec& spec,
             const ParallelLayout& layout) {
  std::error_code ec;
  fs::create_directories(o.run_dir, ec);
  Trainer trainer(o, env, spec, layout);
  return trainer.run();
}

}  // namespace meshwork::trainer
