// meshtrain: `meshtrain export ...` converts a checkpoint (trainer/hf/export.h), `meshtrain tail
// ...` streams a run's files to the workbench (trainer/tail.h), `meshtrain calibrate ...`
// measures the cluster with the run's ranks (trainer/calibrate.h); otherwise
// read the run config (--config and/or flags), check the layout with core before any
// process starts, then either supervise this node's ranks (--nproc-per-node without RANK in the
// environment) or run one rank.
#include <iostream>
#include <string>
#include <vector>

#include <torch/version.h>

#include "core/build_info.h"
#include "core/model_spec.h"
#include "core/parallel_layout.h"
#include "trainer/hf/check.h"
#include "trainer/calibrate.h"
#include "trainer/hf/export.h"
#include "trainer/options.h"
#include "trainer/supervisor.h"
#include "trainer/tail.h"
#include "trainer/train.h"

using namespace meshwork;
using namespace meshwork::trainer;

namespace {

int refuse(const Error& e) {
  std::cerr << "meshtrain: " << e.message() << "\n";
  return exit_code(e.kind);
}

// What the model here does not train yet on this mesh, refused by name rather than trained as
// something else: OLMoE's whole-projection q/k norms need their variance summed over the tp
// group (docs/moe.md). Expert parallelism with tp needs sequence parallelism: without it every tp
// rank holds the same rows, and each would dispatch them to the experts again.
Status trainable_on_mesh(const ModelSpec& spec, const MeshShape& mesh, bool sequence_parallel) {
  if (spec.qk_norm == QkNorm::whole_projection && mesh[Axis::tp] > 1)
    return Error{"--tp", std::to_string(mesh[Axis::tp]),
                 "1 for " + spec.architecture + " (its q/k norms span the whole projection, which tp splits)"};
  if (mesh.ep > 1 && mesh[Axis::tp] > 1 && !sequence_parallel)
    return Error{std::string(kEpFlag), std::to_string(mesh.ep),
                 "1 when tp > 1 runs without sequence parallelism (every tp rank would dispatch the same rows "
                 "to the experts); keep sequence_parallel on for ep with tp"};
  return {};
}

}  // namespace

#if defined(__SANITIZE_THREAD__)
// `scripts/test --sanitize thread` checks Meshwork's own threads: the store writer, the follower,
// the launch controller, the web server's pool (scripts/sanitizers/thread_tests.regex). meshtrain's
// threads are LibTorch's: OpenMP workers (libgomp) and Gloo's pt_gloo_runloop, none of them built
// with TSan, and they synchronise through barriers and work objects TSan cannot see, so every run
// reported dozens of races and mutex misuses inside at::parallel_for, c10d::*Work and libtorch's
// static initializers (a TSan-checked OpenMP and LibTorch would be needed). Its reports are off, in
// the binary because its ranks are started by sshd/slurmd/a supervisor, which pass no TSAN_OPTIONS
// on. meshtrain's multi-rank correctness is checked by the parity tests instead.
extern "C" const char* __tsan_default_options() { return "report_bugs=0"; }
#endif

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // `meshtrain tail ...`: the node side of following a run (trainer/tail.h); no LibTorch.
  if (!args.empty() && args[0] == "--version") {
#ifdef MESHWORK_CPU_FLAVOUR
    const char* flavour = "cpu";
#else
    const char* flavour = "cuda";
#endif
    std::cout << version_line("meshtrain") << "\n"
              << "torch " << TORCH_VERSION << " (" << flavour << " flavour)\n";
    return kExitOk;
  }
  if (!args.empty() && args[0] == "tail") return tail_main(std::vector<std::string>(args.begin() + 1, args.end()));
  // Before any tensor exists, so every CPU byte is counted (train.h).
  install_tracking_cpu_allocator();
  // `meshtrain export ...`: a checkpoint as a Hugging Face directory (trainer/hf/export.h).
  if (!args.empty() && args[0] == "export")
    return hf::export_main(std::vector<std::string>(args.begin() + 1, args.end()));
  // `meshtrain calibrate [same flags]`: launched, supervised and rendezvoused like a run.
  const bool calibrate = !args.empty() && args[0] == "calibrate";
  if (calibrate) args.erase(args.begin());
  auto parsed = parse_options(args);
  if (!parsed.ok()) return refuse(parsed.error());
  TrainerOptions o = *parsed;
  o.calibrate = calibrate;
  o.master_port = resolve_master_port(o);
  if (o.help) {
    std::cout << usage();
    return kExitOk;
  }
  auto spec = model_spec_from_run_model(o.run.model);
  if (!spec.ok()) {
    const std::string shown = o.run.model.is_string() ? o.run.model.get<std::string>() : "(inline config)";
    return refuse(Error{"--model", shown, spec.error().message(), spec.error().kind});
  }
  auto env = launch_env(o);
  if (!env.ok()) return refuse(env.error());
  const bool supervise_mode = !env->from_env && o.nproc_per_node > 0;

  // Every shape rule lives in core (ParallelLayout): refuse before anything starts.
  Placement placement;
  placement.world_size = env->from_env ? env->world_size : o.nnodes * std::max(1, o.nproc_per_node);
  placement.ranks_per_node = env->from_env ? env->local_world_size : std::max(1, o.nproc_per_node);
  if (o.calibrate) {
    // The mesh is not used (calibrate builds its own group layouts): any shape of the world.
    // world_size is a product of two ints from the command line or the environment.
    o.run.mesh = MeshShape{1, static_cast<int>(placement.world_size), 1, 1};
    if (o.check_only) return kExitOk;
    if (supervise_mode) return supervise(o, o.run.mesh);
    if (!env->from_env && placement.world_size != 1)
      return refuse(Error{"--nproc-per-node", std::to_string(o.nproc_per_node),
                          "launch several ranks with --nproc-per-node or torchrun's environment"});
    return calibrate_rank(o, *env, *spec);
  }
  const LayoutCheck checked = ParallelLayout::check(o.run, &*spec, placement);
  if (!checked.ok()) {
    for (const std::string& text : checked.error_texts()) std::cerr << "meshtrain: " << text << "\n";
    return kExitInvalid;
  }
  o.run.mesh = checked.layout->shape();  // -1 resolved
  if (Status st = trainable_on_mesh(*spec, o.run.mesh, o.run.training.sequence_parallel); !st.ok()) return refuse(st.error());
  if (!o.run.save_hf.empty() && o.run.mesh[Axis::pp] > 1) {
    std::cerr << "meshtrain: --save-hf: pp " << o.run.mesh[Axis::pp]
              << ": not with pipeline stages yet (docs/pipeline.md); train with pp 1 to export, or keep the "
                 "checkpoints\n";
    return kExitInvalid;
  }
  if (o.check_only) {
    // The weights too: every header against config.json (no tensor data is read).
    auto weights = hf::check_hf_weights(o.run, *spec);
    if (!weights.ok()) return refuse(weights.error());
    std::cout << "meshtrain: ok: " << o.run.mesh.to_string() << " on " << placement.world_size << " rank(s)\n";
    if (!weights->empty()) std::cout << "meshtrain: ok: " << *weights << "\n";
    return kExitOk;
  }

  if (supervise_mode) return supervise(o, o.run.mesh);
  if (!env->from_env && placement.world_size != 1)
    return refuse(Error{"--nproc-per-node", std::to_string(o.nproc_per_node),
                        "launch several ranks with --nproc-per-node or torchrun's environment"});
  return run_rank(o, *env, *spec, *checked.layout);
}
