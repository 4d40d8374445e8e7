// Where a run's files live on its nodes. The nodes of a cluster may share one filesystem (an NFS
// home, or the namespace test cluster), so every file a node writes in the run directory is named
// by node or by global rank: two nodes never write the same file.
//
//   <root>/.deploy/<sha256>-<name>     content-addressed uploads (re-deploys skip what is there)
//   <root>/<run>/                      the run directory (mode 0700)
//     meshtrain, run_config.json       deployed (hard links into .deploy); meshtrain runs with
//                                      --config run_config.json (launch.h meshtrain_command)
//     node<i>.pgid                     process group of node i's supervisor (= its pid)
//     node<i>.out / node<i>.err        the supervisor's stdout / stderr
//     node<i>.exit                     "<exit status> <unix time>" once the supervisor ended
//     exit-node<i>.json                how node i's supervisor ended (core/exit_record.h)
//     rank<r>.log, metrics-rank<r>.jsonl, ...   written by meshtrain for its global ranks
#pragma once

#include <string>

namespace meshwork::remote {

// The default root on every node, relative to the login directory (~/.cache/meshwork/runs).
inline constexpr const char* kDefaultRemoteRoot = ".cache/meshwork/runs";
// The run config the launcher ships into every run directory and meshtrain runs (--config).
inline constexpr const char* kRunConfigFile = "run_config.json";

inline std::string node_file(int node, const char* suffix) {
  return "node" + std::to_string(node) + suffix;
}
inline std::string metrics_file(int rank) { return "metrics-rank" + std::to_string(rank) + ".jsonl"; }
inline std::string rank_log_file(int rank) { return "rank" + std::to_string(rank) + ".log"; }
// The store source name of a rank's metrics file (one per file, with its own byte offset).
inline std::string metrics_source(int node, int rank) {
  return "node" + std::to_string(node) + "/" + metrics_file(rank);
}
// A run directory name that is safe everywhere: "run-<id>".
inline std::string run_dir_name(long long run_id) { return "run-" + std::to_string(run_id); }

// A new run directory's name: "run-<UTC yyyymmdd-hhmmss>-<6 random hex>", generated, never
// taken from the run's display name (so no user text reaches a path). Every launch path uses it.
std::string new_run_dir_name();

}  // namespace meshwork::remote
