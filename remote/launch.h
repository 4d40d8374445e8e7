// Launch and stop. One supervisor per node (`meshtrain --nproc-per-node N ...`, torchrun style),
// started detached: setsid makes it a session and process-group leader, so it survives the SSH
// session and the workbench, and stop can signal the whole group. A tiny sh wrapper records the
// supervisor's exit status in node<i>.exit (see run_layout.h), which is how a later `attach`
// learns how each node ended.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "remote/host_spec.h"
#include "remote/node.h"

namespace meshwork::remote {

// What attach/stop need to find a run again, from any process: kept in the store with the run
// (RunInfo::cluster) and in the run directory.
struct LaunchRecord {
  struct NodeEntry {
    std::string host;     // HostSpec::to_string(), "local" for this machine
    int slots = 1;        // ranks on the node
    std::string run_dir;  // absolute run directory on the node
    std::string address;  // as the workbench reached it
  };
  std::vector<NodeEntry> nodes;
  std::string master_addr;
  int master_port = 0;
  std::string trainer = "meshtrain";  // file name in the run directory
  std::string subcommand;  // "" trains; "calibrate" measures the cluster (trainer/calibrate.h)
  // --max-restarts: how often each node's wrapper starts its supervisor again (with --resume, on
  // master_port + attempt) after the ranks failed. 0: never.
  int max_restarts = 0;
  // A segment of a re-planned run (remote/elastic.h): 0 is the run as launched; a later one runs
  // in its own run directory and starts from the latest complete checkpoint (resume) in
  // checkpoint_dir: its own (<node 0's run_dir>/checkpoints, seeded with the checkpoint it resumes
  // from, launch_pipeline.cpp) so that ranks of a lost node still running cannot write into it
  // (absolute; empty: <run_dir>/checkpoints).
  int segment = 0;
  std::string checkpoint_dir;
  bool resume = false;
  int first_rank(size_t node) const;  // global rank of the node's local rank 0
  int world_size() const;
  // The store source of rank `rank`'s metrics file on node `node` (run_layout.h's
  // metrics_source()): a later segment's files are new files, counted from byte 0, so its
  // sources carry the segment ("seg1/node0/metrics-rank0.jsonl") and never meet the offsets the
  // earlier segments stored for the same node and rank.
  std::string source_of(size_t node, int rank) const;
};
nlohmann::json to_json(const LaunchRecord& r);
Result<LaunchRecord> launch_record_from_json(const nlohmann::json& j);

// meshtrain's command line on node `index`: the run config the launcher shipped (kRunConfigFile
// in the run directory) and the per-node facts, torchrun's names, nothing else:
//   ./meshtrain [calibrate] --config run_config.json --nproc-per-node N --nnodes M --node-rank I
//               --master-addr A --master-port P --run-dir .
//               [--checkpoint-dir DIR --resume]   (a resumed segment)
// It is the one place a run turns into a command line (the workbench, `meshwork launch` with
// flags and with --config all launch through it).
std::vector<std::string> meshtrain_command(const LaunchRecord& rec, size_t index);

// The command line that starts node `index`'s supervisor (meshtrain_command) detached; exposed
// for the injection test.
//
// Restarts (rec.max_restarts > 0) live in the node's wrapper, not in the workbench, so they
// happen with the workbench detached or closed too. Every node's supervisor ends when any rank of
// the run fails (they tell each other through the rendezvous store), so every node's wrapper sees
// a failure at about the same time and starts attempt a+1 with `--resume` (the latest complete
// checkpoint) on port master_port + a: a fresh rendezvous no stale store of attempt a can answer.
// A node that was stopped (node<i>.stop, written by stop_node before any signal) never restarts.
// Each restart appends "<attempt> <status of the failed attempt> <unix time>" to node<i>.restarts.
std::string supervisor_command(const LaunchRecord& rec, size_t index);

// Starts node `index`'s supervisor; returns its process group id. Starting is quick: it does not
// wait for the ranks.
Result<int64_t> start_node(Node& node, const LaunchRecord& rec, size_t index);

// How node `index` ended, if it has: the wrapper's node<i>.exit.
struct NodeExit {
  int status = 0;      // the shell's $?: the exit code, or 128+signal
  double time = 0;     // unix seconds
  bool signaled() const { return status > 128; }
  int signal() const { return status > 128 ? status - 128 : 0; }
};
Result<std::optional<NodeExit>> read_node_exit(Node& node, const LaunchRecord& rec, size_t index);

// Stops node `index`: SIGTERM to the supervisor's process group and to the node's rank pids the
// trainer recorded, SIGKILL to what is left after `grace`. It first leaves node<i>.stop in the run
// directory, so whoever follows the run knows the node was stopped, not failed. Returns once nothing is left (or
// after the SIGKILL). Safe to call on a node that has already ended.
Status stop_node(Node& node, const LaunchRecord& rec, size_t index,
                 std::chrono::milliseconds grace = std::chrono::seconds(5));

// Whether any process of node `index` is still alive (group or recorded rank pids).
Result<bool> node_alive(Node& node, const LaunchRecord& rec, size_t index);

}  // namespace meshwork::remote
