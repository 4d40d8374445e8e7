// meshtrain: parse flags, validate the shape with core (before any process starts), then either
// supervise this node's ranks (--nproc-per-node without RANK in the environment) or run one rank.
#include <iostream>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/validation.h"
#include "trainer/options.h"
#include "trainer/supervisor.h"
#include "trainer/train.h"

using namespace meshwork;
using namespace meshwork::trainer;

namespace {

int refuse(const Error& e) {
  std::cerr << "meshtrain: " << e.message() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Before any tensor exists, so every CPU byte is counted (train.h).
  install_tracking_cpu_allocator();
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = parse_options(args);
  if (!parsed.ok()) return refuse(parsed.error());
  TrainerOptions o = *parsed;
  if (o.help) {
    std::cout << usage();
    return 0;
  }
  auto spec = load_model_spec(o.model);
  if (!spec.ok()) {
    Error e = spec.error();
    return refuse(Error{"--model", o.model, e.message()});
  }
  auto env = launch_env(o);
  if (!env.ok()) return refuse(env.error());
  const bool supervise_mode = !env->from_env && o.nproc_per_node > 0;
  const int world = env->from_env ? env->world_size : o.nnodes * std::max(1, o.nproc_per_node);
  const int per_node = env->from_env ? env->local_world_size : std::max(1, o.nproc_per_node);

  // Every shape rule lives in core: refuse before anything starts.
  ShapeQuery q;
  q.shape = o.mesh;
  q.world_size = world;
  q.gpus_per_node = per_node;
  q.model = &*spec;
  q.seq_len = o.training.seq_len;
  q.global_batch = o.training.global_batch;
  q.micro_batch = o.training.micro_batch;
  // meshtrain replicates tp/cp pieces itself: DataParallel all-reduces each rank's local (tp
  // piece or cp-sharded) flat gradients over dp_replicate, a plain sum between ranks holding the
  // same piece. Accelerate refuses dp_replicate > 1 with dp_shard == 1 only because torch's DDP
  // wrapper cannot hold DTensor parameters; that limit does not apply here.
  q.allow_tp_cp_with_pure_replication = true;
  ShapeReport report = validate_shape(q);
  if (!report.ok()) {
    for (const auto& d : report.errors()) std::cerr << "meshtrain: " << d.text() << "\n";
    return 2;
  }
  const MeshShape shape = report.shape;
  o.mesh = shape;

  if (supervise_mode) return supervise(o, shape);
  if (!env->from_env && world != 1)
    return refuse(Error{"--nproc-per-node", std::to_string(o.nproc_per_node),
                        "launch several ranks with --nproc-per-node or torchrun's environment"});
  return run_rank(o, *env, *spec, shape);
}
