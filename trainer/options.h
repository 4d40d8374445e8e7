// meshtrain's command line (no LibTorch here). Flag names are a contract: the launcher and the
// tests use them (issue 3). `--flag value` and `--flag=value` both work.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mesh.h"
#include "core/run_config.h"

namespace meshwork::trainer {

struct TrainerOptions {
  std::string model = "tiny";       // preset name or path to a config.json
  std::string data;                 // empty: the bundled corpus
  TrainingConfig training;          // steps, seq_len, batches, lr, warmup, seed, precision, ...
  MeshShape mesh;                   // one axis may be -1 (auto)
  bool sequence_parallel = true;    // tp > 1: norms/residuals sharded over tp along the sequence
  // FSDP with gradient accumulation: false reduce-scatters every micro-batch (FSDP2's default,
  // shard-sized gradients only); true sums the unsharded gradient locally and reduce-scatters once
  // per step (less communication, every unit's fp32 gradient held between micro-batches).
  bool fsdp_grad_sync_per_step = false;
  std::string metrics;              // empty: rank 0's stdout (+ per-rank files in run_dir)
  std::string run_dir = "meshtrain-run";
  std::string checkpoint_dir;       // empty: run_dir/checkpoints
  bool resume = false;
  double peak_tflops = 0;           // 0: measure a matmul peak at start
  double max_grad_norm = 1.0;       // 0: no clipping
  double weight_decay = 0.1;
  // Launch (torchrun's names). nproc_per_node without RANK in the environment: supervise.
  int nproc_per_node = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool help = false;
};

// Parses argv[1..]. A bad value is an Error naming the flag, the value and what is allowed.
Result<TrainerOptions> parse_options(const std::vector<std::string>& args);
// The --help text.
std::string usage();
// The flags back as arguments (for a supervisor that re-runs itself for each rank).
std::vector<std::string> to_args(const TrainerOptions& o);

// How this process was started (torchrun's environment, else flags).
struct LaunchEnv {
  bool from_env = false;  // RANK and WORLD_SIZE were set
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool store_hosted = false;  // MESHWORK_STORE_HOSTED=1: a supervisor hosts the TCPStore
};
Result<LaunchEnv> launch_env(const TrainerOptions& o);

}  // namespace meshwork::trainer
