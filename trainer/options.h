// meshtrain's command line (no LibTorch here). What to train is the run config
// (core/run_config.h): `--config run_config.json` reads it, and the flags that name a run config
// field (--model, --steps, --tp, --lr, ...) set that field on top of the file, so
// `meshtrain --config F --steps 5` runs F for 5 steps and meshtrain alone runs from flags.
// The launcher passes only the file and per-node facts (--nproc-per-node, --nnodes, --node-rank,
// --master-addr, --master-port, --run-dir). `--flag value` and `--flag=value` both work.
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
  // What to train: model, data, mesh (one axis may be -1), training (steps, batches, lr,
  // precision, sequence_parallel, fsdp_grad_sync, max_grad_norm, peak_tflops, ...).
  RunConfig run;
  std::string config_path;          // --config: the file `run` was read from; empty: flags only
  // This process's files and launch (not part of the run config).
  std::string metrics;              // empty: rank 0's stdout (+ per-rank files in run_dir)
  std::string run_dir = "meshtrain-run";
  std::string checkpoint_dir;       // empty: run_dir/checkpoints
  bool resume = false;
  // Launch (torchrun's names). nproc_per_node without RANK in the environment: supervise.
  int nproc_per_node = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;              // 0: not given (resolve_master_port)
  // --no-flight-recorder: no RUN_DIR/flight-rank<r>.bin and no watchdog. Only for measuring the
  // recorder's cost (bench/flight_bench.sh): a run without it cannot say where it hangs.
  bool no_flight_recorder = false;
  // --bench-flight-odd-steps: the recorder marks odd steps only; even steps run as with
  // --no-flight-recorder (no recorder reachable from the hot path). Only for bench/flight_bench.py's
  // paired comparison within one run: the record skips the even steps' collectives, so a hang
  // diagnosis from it would be wrong.
  bool bench_flight_odd_steps = false;
  bool check_only = false;          // --check: validate the run against the placement and exit
  bool calibrate = false;           // `meshtrain calibrate ...`: measure the cluster (trainer/calibrate.h)
  bool help = false;
};

// Parses argv[1..]. A bad value is an Error naming the flag, the value and what is allowed.
Result<TrainerOptions> parse_options(const std::vector<std::string>& args);
// The --help text.
std::string usage();
// The options back as arguments (for a supervisor that re-runs itself for each rank): --config
// when one was given, then every run config field as a flag (equal to the file's after parsing).
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

// --master-port when it was not given: a free port for a supervisor of a single-node run (no
// RANK in the environment, --nnodes 1), so a second run on the machine does not collide with the
// first; 29500 otherwise (every node must agree on it). A given port is kept.
int resolve_master_port(const TrainerOptions& o);

}  // namespace meshwork::trainer
