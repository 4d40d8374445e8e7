// Probe: what a node has (hostname, OS, CPUs, memory, GPUs and their links, InfiniBand/RoCE ports,
// the torch/LibTorch there), gathered by one shell script over one SSH exec, parsed here. A node
// without a working nvidia-smi is a CPU node (Gloo).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "remote/host_spec.h"
#include "remote/node.h"
#include "remote/probe_parsers.h"

namespace meshwork::remote {

struct NodeInfo {
  std::string host;        // as given (HostSpec::to_string())
  std::string hostname;    // `hostname` on the node
  std::string os;          // PRETTY_NAME
  std::string kernel;
  std::string arch;
  int cpus = 0;
  int64_t mem_total_bytes = 0;
  int64_t mem_available_bytes = 0;
  std::string address;     // the node's address as the workbench reached it (SSH_CONNECTION)
  std::string client_address;  // the workbench's address as the node sees it
  std::string fingerprint; // host key, SHA256
  std::vector<GpuInfo> gpus;
  std::optional<TopoMatrix> topo;
  std::string gpu_link;    // weakest GPU-GPU link ("NV18", "SYS", "")
  std::vector<IbPort> ib_ports;
  std::string torch_version;             // the python torch package ("" if none)
  std::vector<std::string> libtorch;     // libtorch_cpu.so files found
  std::vector<std::string> warnings;     // e.g. nvidia-smi present but failing
  bool is_cpu_node() const { return gpus.empty(); }
};

nlohmann::json to_json(const NodeInfo& info);

// The script the probe runs (sections marked "@@name"), and its parser. Exposed for tests.
const std::string& probe_script();
Result<NodeInfo> parse_probe_output(const std::string& output);

// Probes one connected node.
Result<NodeInfo> probe_node(Node& node);

// Per-node progress for a UI: stage is "connecting", "probing", "done" or "failed".
struct ProbeProgress {
  size_t index = 0;
  std::string host;
  std::string stage;
  std::string message;
};
using ProbeProgressFn = std::function<void(const ProbeProgress&)>;

struct ProbeResult {
  HostSpec spec;
  std::optional<NodeInfo> info;
  std::optional<ConnectError> error;  // kind says whether a host key needs the user's consent
};

// Connects to and probes every host in parallel (one thread per host). The callback may be
// called from several threads at once; it must be thread-safe.
std::vector<ProbeResult> probe_hosts(const std::vector<HostSpec>& hosts, const SshOptions& options,
                                     const ProbeProgressFn& progress = {});

}  // namespace meshwork::remote
