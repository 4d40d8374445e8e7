// Deploy: put meshtrain and the run config into a per-run directory (mode 0700) on every node,
// in parallel, uploading by SFTP only what is not already there (content-addressed by SHA-256
// under <root>/.deploy), then check that the node can run meshtrain (its shared libraries).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "remote/node.h"

namespace meshwork::remote {

struct DeployFile {
  std::string local_path;
  std::string name;  // file name in the run directory
  int mode = 0600;
  // Not uploaded: the run directory gets a symbolic link `name` to this file on the node (its
  // directory relative to the login directory, or absolute): a deployed runtime bundle's
  // meshtrain. local_path is then unused.
  std::string link_to;
};

struct DeployProgress {
  size_t node = 0;       // index into the node list
  std::string host;
  std::string stage;     // "preparing", "uploading", "skipped", "checking", "done", "failed"
  std::string file;
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  std::string message;
  double rate = 0;         // bytes/s of the transfer so far ("uploading"; 0 when unknown)
  double eta_s = -1;       // seconds left at that rate (-1 when unknown)
};
using DeployProgressFn = std::function<void(const DeployProgress&)>;

struct DeployResult {
  std::string run_dir;                 // absolute path on the node
  uint64_t bytes_uploaded = 0;
  int files_skipped = 0;               // already there with the right hash
};

// Computes the SHA-256 of a local file (hex).
Result<std::string> sha256_file(const std::string& path);

// Deploys `files` into <root>/<run_dir_name> on `node`. `root` may be relative to the login
// directory (the default) or absolute; any characters are allowed (everything is quoted).
// `check_runtime` names the file whose shared libraries must resolve on the node (ldd).
Result<DeployResult> deploy_node(Node& node, size_t index, const std::string& root,
                                 const std::string& run_dir_name, const std::vector<DeployFile>& files,
                                 const std::string& check_runtime, const DeployProgressFn& progress = {});

// The same on every node in parallel (one thread per node); results in node order. The first
// error (if any) is returned for every failed node in `errors` (empty string: success).
struct DeployAllResult {
  std::vector<Result<DeployResult>> nodes;
  bool ok() const;
};
DeployAllResult deploy_all(const std::vector<Node*>& nodes, const std::string& root,
                           const std::string& run_dir_name, const std::vector<DeployFile>& files,
                           const std::string& check_runtime, const DeployProgressFn& progress = {});

}  // namespace meshwork::remote
