// One rank's training (class Trainer below): setup, resume, the step loop, checkpoints, evaluation
// and the export. Past ~600 lines on purpose: every phase reads and writes the same rank state
// (layout, communicators, model, optimizer, data position), and split by phase each piece would
// have to take most of it; the phases' own logic lives beside it (step.h, reshard.h, data.h).
#include "trainer/train.h"

#include <unistd.h>

#include <algorithm>
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

#include "core/mesh_json.h"
#include "core/metrics.h"
#include "core/run_config.h"
#include "trainer/checkpoint.h"
#include "trainer/comm.h"
#include "trainer/cpu_memory.h"
#include "trainer/data.h"
#include "trainer/flight_recorder.h"
#include "trainer/hf/checkpoint_loader.h"
#include "trainer/hf/export.h"
#include "trainer/lr_schedule.h"
#include "trainer/metrics_sink.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"
#include "trainer/parallelize.h"
#include "trainer/parallelize_pp.h"
#include "trainer/rank_context.h"
#include "trainer/reshard.h"
#include "trainer/step.h"
#include "trainer/watchdog.h"

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

// One rank's training: set up (data, communicators, the parallelized model, AdamW), resume,
// then train steps (gradient accumulation, global-norm clipping, metrics) with checkpoints.
// Every method that can fail returns the process exit code, 0 to go on.
class Trainer {
 public:
  Trainer(const TrainerOptions& o, const LaunchEnv& env, const ModelSpec& spec, const ParallelLayout& layout);
  int run();

 private:
  int setup();
  void open_flight_recorder();
  void start_watchdog();
  int connect();
  int build_model();
  int open_hf_checkpoint(ParallelizeOptions& po);
  void record_load(double seconds, int64_t rss_before);
  int resume();
  void record_resume(double seconds, int64_t rss_before, bool same_shape, bool indexed);
  void announce();
  int train();
  StepResult train_step(int64_t step, double lr);
  // The sequences of micro-batch m of `step` this dp rank reads, [micro_batch, seq_len + 1], in
  // buf_ (a view of it on CPU).
  Tensor micro_batch(const TokenData& data, int64_t step, int64_t m);
  // Micro-batch m's (inputs, targets), this rank's cp shards: views of one reused buffer unless
  // a pipeline holds several micro-batches at once, then tensors of their own.
  std::pair<Tensor, Tensor> micro_batch_shards(const TokenData& data, int64_t step, int64_t m);
  void record_step(int64_t step, double lr, const StepResult& s);
  void save_checkpoint(int64_t steps_done);
  void evaluate(int64_t steps_done);
  int save_hf();

  int fail(int code, const std::string& msg, bool tell = false) { return ctx_.fail(code, msg, tell); }
  fs::path run_file(const std::string& name) const { return ctx_.run_file(name); }

  const TrainerOptions& o_;
  const LaunchEnv& env_;
  const ModelSpec& spec_;
  const ParallelLayout& layout_;  // core's one layout: the shape and every size derived from it
  const MeshShape& shape_;
  const TrainingConfig& t_;
  const int rank_;
  RankContext ctx_;  // log, metrics, pid file, threads, device, end record
  Log& log_;
  MetricsSink& sink_;
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
  fs::path ckpt_dir_;
  std::string meta_;  // the checkpoint's meta.json (what resume must match)
  int64_t start_step_ = 0;
  double peak_ = 0, flops_per_token_ = 0;
  StepParts step_;  // what run_step() works on (trainer/step.h)
  std::unique_ptr<FlightRecorder> flight_;  // null with --no-flight-recorder
  std::unique_ptr<Watchdog> watchdog_;      // with the flight recorder
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
      ctx_(o, env),
      log_(ctx_.log),
      sink_(ctx_.sink) {}

int Trainer::run() {
  std::signal(SIGTERM, on_stop);
  std::signal(SIGINT, on_stop);
  return ctx_.run([this] {
    open_flight_recorder();
    if (int rc = setup()) return rc;
    if (int rc = resume()) return rc;
    announce();
    return train();
  });
}

// Data, communicators, the parallelized model and its optimizer (the rank context has set the
// threads and the device).
int Trainer::setup() {
  cuda_ = ctx_.cuda();
  device_ = ctx_.device();
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
  flops_per_token_ = model_->flops_per_token(t_.seq_len);
  step_ = step_parts(t_, layout_, *model_, *pm_, *comm_, opt_, device_);
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
    step_.pipeline = pipeline_.get();
  }
  return 0;
}

// RUN_DIR/flight-rank<r>.bin from the start, so that a rank stuck in its rendezvous shows it.
// A recorder that cannot be made is logged, not fatal: training goes on without it.
void Trainer::open_flight_recorder() {
  if (o_.no_flight_recorder) return;
  auto f = FlightRecorder::open(run_file(flight_file(rank_)), rank_, static_cast<int64_t>(getpid()));
  if (!f.ok()) {
    log_("flight recorder off: ", f.error().message());
    return;
  }
  flight_ = std::move(*f);
  set_thread_flight(flight_.get());
}

// The watchdog over this rank's collectives (trainer/watchdog.h). What it finds ends the rank:
// the reason in its log and end record, exit code 4, and the supervisor stops the run with it.
void Trainer::start_watchdog() {
  if (!flight_) return;
  WatchdogConfig wc;
  wc.timeout_s = t_.collective_timeout;
  wc.grace_s = std::clamp(wc.timeout_s / 4, 2.0, 10.0);
  wc.poll_s = std::min(1.0, wc.timeout_s / 5);
  wc.rank = rank_;
  wc.store_host = env_.master_addr;
  wc.store_port = env_.master_port;
  for (GroupKind k : kGroupKinds) wc.members[static_cast<size_t>(k)] = comm_->group(k).members;
  wc.members[kFlightWorldSlot] = comm_->world().members;
  for (ExpertGroupKind k : kExpertGroupKinds)
    wc.members[static_cast<size_t>(kFlightExpertSlot) + static_cast<size_t>(k)] = comm_->expert_group(k).members;
  watchdog_ = std::make_unique<Watchdog>(*flight_, std::move(wc), [this](const std::string& reason, const FlightState& st) {
    log_(reason);
    log_("flight record: ", to_json(st).dump());
    ctx_.end("failed", reason);
    if (rank_ == 0 && !std::getenv("MESHWORK_SUPERVISED")) std::cerr << "meshtrain: " << reason << "\n";
    std::cerr.flush();
    std::_Exit(4);
  });
}

int Trainer::connect() {
  auto comm = ctx_.connect(shape_, /*first=*/true);
  if (!comm.ok()) return fail(3, comm.error().message());
  comm_ = std::move(*comm);
  comm_->set_flight(flight_.get());
  start_watchdog();
  const MeshCoord coord = comm_->mesh().coord_of(rank_);
  log_("rank ", rank_, " of ", env_.world_size, " (node-local ", env_.local_rank, "/",
       env_.local_world_size, "), mesh ", shape_.to_string(), ", coords (",
       shape_[Axis::pp] > 1 ? "stage " + std::to_string(coord[Axis::pp]) + ": " : std::string(), coord[Axis::dp_replicate],
       ",", coord[Axis::dp_shard], ",", coord[Axis::cp], ",", coord[Axis::tp], "), ", ctx_.threads(),
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
  const ParallelizeOptions run = parallelize_options(t_, layout_, device_);
  po.sequence_parallel = run.sequence_parallel;
  po.compute_dtype = run.compute_dtype;
  po.device = run.device;
  po.fsdp_grad_sync_per_step = run.fsdp_grad_sync_per_step;
  po.fsdp_group = run.fsdp_group;
  po.seed = t_.seed;
  pm_ = parallelize(*model_, *comm_, po);
  if (checkpoint_) {
    record_load(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), rss_before);
    checkpoint_.reset();  // unmaps the files
  }
  init_optimizer(opt_, t_, *pm_);
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
// checkpoint, which must be of the same model, global batch and seq len; each rank reads its
// pieces through the slice index (trainer/reshard.h) at any shape, or, from a checkpoint without
// one, its own whole file at the shape it was saved at.
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
  const int64_t rss_before = proc_status_bytes("VmRSS");
  reset_peak_rss();
  const auto t0 = std::chrono::steady_clock::now();
  auto restored = restore_checkpoint(*latest, nlohmann::json::parse(meta_), rank_, *pm_, opt_);
  if (!restored.ok()) return fail(2, restored.error().message(), /*tell=*/true);
  if (!restored->same_shape) log_("resharded: ", restored->shapes);
  start_step_ = restored->step;
  record_resume(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), rss_before,
                restored->same_shape, restored->indexed);
  log_("resumed from ", latest->string(), " at step ", start_step_);
  return 0;
}

// What a resume cost this rank: its log and resume-rank<r>.json in the run directory: seconds,
// the bytes of its parameters and AdamW moments, its peak resident memory growth, and how it
// read (docs/checkpoints.md).
void Trainer::record_resume(double seconds, int64_t rss_before, bool same_shape, bool indexed) {
  int64_t state_bytes = 0;
  for (const Tensor& p : pm_->params()) state_bytes += 3 * p.numel() * static_cast<int64_t>(p.element_size());
  const int64_t peak = proc_status_bytes("VmHWM") - rss_before;
  log_("resume read ", state_bytes / 1e6, " MB of parameters and moments in ", seconds, " s (",
       same_shape ? "same shape" : "resharded", indexed ? ", through the slice index" : ", its own whole file",
       "); peak resident growth ", peak / 1e6, " MB");
  std::ofstream f(run_file("resume-rank" + std::to_string(rank_) + ".json"));
  f << nlohmann::json{{"rank", rank_}, {"seconds", seconds}, {"state_bytes", state_bytes},
                      {"peak_rss_growth_bytes", peak}, {"resharded", !same_shape}, {"slice_index", indexed}}
           .dump()
    << "\n";
}

void Trainer::save_checkpoint(int64_t steps_done) {
  RankState s;
  s.step = steps_done;
  s.data_position = TokenData::position_after(steps_done, t_.global_batch);
  s.params = pm_->params();
  s.exp_avg = opt_.exp_avg;
  s.exp_avg_sq = opt_.exp_avg_sq;
  s.rng = at::detail::getDefaultCPUGenerator().get_state();
  const fs::path sd = checkpoint_step_dir(ckpt_dir_, steps_done);
  flight_phase(FlightPhase::checkpoint);
  if (Status st = save_rank_state(sd, rank_, s); !st.ok()) throw std::runtime_error(st.error().message());
  if (Status st = save_rank_slices(sd, rank_, rank_slices(*pm_, rank_)); !st.ok())
    throw std::runtime_error(st.error().message());
  comm_->barrier(comm_->world());
  if (rank_ == 0) {
    nlohmann::json meta = nlohmann::json::parse(meta_);
    meta["step"] = steps_done;
    meta["data_position"] = s.data_position;
    if (Status st = mark_complete(sd, meta.dump(), env_.world_size); !st.ok())
      throw std::runtime_error(st.error().message());
  }
  log_("checkpoint ", sd.string());
}

// The peak for MFU (measured by every rank at once unless given), then the start record.
void Trainer::announce() {
  comm_->barrier(comm_->world());
  peak_ = t_.peak_tflops > 0 ? t_.peak_tflops : measure_peak_tflops(device_, dtype_);
  log_("peak ", peak_, " TFLOP/s per rank (", t_.peak_tflops > 0 ? "given" : "measured", ")");

  StartRecord sr = ctx_.start_record(*comm_);
  sr.mesh = shape_;
  RunConfig ran = o_.run;
  ran.mesh = shape_;
  sr.config = to_json(ran);
  sr.peak_tflops = peak_;
  sink_.write(to_json_line(sr));
}

int Trainer::train() {
  for (int64_t step = start_step_; step < t_.steps; ++step) {
    if (int sig = g_stop_signal.load()) {
      log_("stopped by signal ", sig, " before step ", step);
      ctx_.end("stopped", "signal " + std::to_string(sig));
      flight_phase(FlightPhase::ended);
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
    const double lr = learning_rate(t_, step);
    if (flight_ && o_.bench_flight_odd_steps) {
      // Even steps take the hot path of --no-flight-recorder: no recorder on this thread or in
      // the communicator (the model's layers and the step read them per step).
      FlightRecorder* on = step % 2 == 1 ? flight_.get() : nullptr;
      set_thread_flight(on);
      comm_->set_flight(on);
    }
    if (flight_ && (!o_.bench_flight_odd_steps || step % 2 == 1)) flight_->step(step);
    record_step(step, lr, train_step(step, lr));
    if (profiled && cuda_) torch::autograd::profiler::disableProfiler()->save(trace);
    if (t_.checkpoint_every > 0 && (step + 1) % t_.checkpoint_every == 0) save_checkpoint(step + 1);
    if (eval_data_ && t_.eval_every > 0 && (step + 1) % t_.eval_every == 0) evaluate(step + 1);
  }
  if (flight_ && o_.bench_flight_odd_steps) {
    set_thread_flight(flight_.get());
    comm_->set_flight(flight_.get());
  }
  // The final evaluation, unless the last step just had one.
  if (eval_data_ && !(t_.eval_every > 0 && t_.steps % t_.eval_every == 0)) evaluate(t_.steps);
  if (int rc = save_hf()) return rc;
  comm_->barrier(comm_->world());
  log_("done: ", t_.steps, " steps");
  ctx_.end("ok", "");
  flight_phase(FlightPhase::ended);
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
  flight_phase(FlightPhase::eval);
  const auto t0 = std::chrono::steady_clock::now();
  Tensor local = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device_));
  for (int64_t b = 0; b < eval_batches_ && pipeline_; ++b)
    local += pipeline_->eval_step([&](int64_t m) { return micro_batch_shards(*eval_data_, b, m); }, step_.forward);
  for (int64_t b = 0; b < eval_batches_ && !pipeline_; ++b)
    for (int64_t m = 0; m < accum_; ++m) {
      auto [inputs, targets] = micro_batch_shards(*eval_data_, b, m);
      local += pm_->eval_loss_sum(inputs, targets, step_.forward).to(at::kDouble);
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

Tensor Trainer::micro_batch(const TokenData& data, int64_t step, int64_t m) {
  auto idx = TokenData::batch_indices(step, t_.global_batch, dp_rank_, dp_size_, m, t_.micro_batch);
  for (size_t i = 0; i < idx.size(); ++i)
    data.sequence(idx[i], t_.seq_len, buf_.data() + i * (t_.seq_len + 1));
  return at::from_blob(buf_.data(), {t_.micro_batch, t_.seq_len + 1}, at::kLong).to(device_);
}

std::pair<Tensor, Tensor> Trainer::micro_batch_shards(const TokenData& data, int64_t step, int64_t m) {
  Tensor seqs = micro_batch(data, step, m);
  // A pipeline holds several micro-batches at once; without one, a micro-batch is done with
  // before the next is read into the same buffer (run_step's order).
  if (pipeline_) seqs = seqs.clone();
  // cp ranks of one replica read the same sequences and keep their load-balanced chunks.
  return {pm_->shard_sequence(seqs.narrow(1, 0, t_.seq_len)), pm_->shard_sequence(seqs.narrow(1, 1, t_.seq_len))};
}

// One step of the run through the step runner (trainer/step.h), which calibration times too;
// here only the batch's source and the memory peaks the step record reports.
StepResult Trainer::train_step(int64_t step, double lr) {
  if (cuda_) c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
  else reset_cpu_peak();
  return run_step(step_, lr, [this, step](int64_t m) {
    flight_phase(FlightPhase::data);
    return micro_batch_shards(*data_, step, m);
  });
}

void Trainer::record_step(int64_t step, double lr, const StepResult& s) {
  StepRecord r;
  r.step = step;
  r.rank = rank_;
  r.time = now_unix();
  r.loss = s.loss;
  r.lr = lr;
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
  r.comm_ep_s = comm_->times().ep;
  r.step_s = s.step_s;
  r.compute_s = std::max(0.0, s.step_s - comm_->times().total());
  r.cpu_s = s.cpu_s;
  r.moe = s.moe;
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
