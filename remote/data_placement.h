// Where a run's training data ("data" of the run config) is on the nodes it runs on.
//
// meshtrain opens the path the run config names, on its own node, after the launch: a prepared
// shard directory that exists only on the workbench would fail there, late and far from the
// user. So the launch decides before it starts anything:
//   - every node already has the path (a shared filesystem, or staged there at the same path):
//     used as it is, nothing is copied;
//   - otherwise, when this machine holds it: its .bin shards (or the single file) are uploaded
//     with the run (deploy.h: content-addressed, so a relaunch uploads nothing new) into the run
//     directory's data/ (eval-data/ for eval_data), and the nodes' run config names that copy (relative to the run
//     directory, where meshtrain starts);
//   - otherwise: refused before the launch, naming the path and every node that lacks it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/run_config.h"
#include "remote/deploy.h"
#include "remote/node.h"

namespace meshwork::remote {

struct DataOnNode {
  std::string host;
  bool found = false;  // `test -e PATH` succeeded there
};

struct DataPlacement {
  std::vector<DeployFile> uploads;  // into the run directory (names under data/)
  std::string node_path;            // the run config's "data" as the nodes must see it
};

// The local side of a data path: its shard files (a directory's *.bin, sorted, or the file
// itself) as absolute paths; empty when this machine does not hold it.
std::vector<std::string> local_data_files(const std::string& path);

// The decision above for the run config's `field` ("data", or "eval_data": held-out shards, same
// rules, uploaded under eval-data/ instead). `data` is its path; `local_files` what
// local_data_files gave.
Result<DataPlacement> place_data(const std::string& data, const std::vector<std::string>& local_files,
                                 const std::vector<DataOnNode>& nodes, const std::string& field = "data");

// Both fields of `config` on `nodes` (asked with `test -e` in parallel): rewrites config.data /
// config.eval_data to what the nodes must open and returns the files to deploy with the run.
// `step` reports an upload ("data: PATH is uploaded with the run (N file(s))").
Result<std::vector<DeployFile>> place_run_data(RunConfig& config, const std::vector<Node*>& nodes,
                                               const std::function<void(const std::string&)>& step = {});

}  // namespace meshwork::remote
