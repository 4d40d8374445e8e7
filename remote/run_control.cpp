#include "remote/run_control.h"

#include <thread>

#include "remote/cuda_driver.h"
#include "remote/launch_pipeline.h"
#include "remote/slurm_run.h"

namespace meshwork::remote {

namespace {

template <class F>
void parallel_for(size_t n, F&& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&fn, i] { fn(i); });
  for (auto& t : threads) t.join();
}

// SSH nodes: every node is reached, probed and deployed to; each runs its own supervisor.
class SshTarget final : public LaunchTarget {
 public:
  std::variant<int, LaunchError> check_request(const LaunchRequest& req) override {
    if (const SlurmPartitionSource* slurm = slurm_source(req.config.source)) {
      return launch_invalid(Error{"cluster.source", std::string("slurm (partition ") +
                                                        (slurm->partition.empty() ? "(default)" : slurm->partition) + ")",
                                  "a Slurm partition's run is submitted through its login node "
                                  "(meshwork launch --slurm, or \"Launch on Slurm\" in the workbench)"});
    }
    if (const DescribedClusterSource* d = described_source(req.config.source)) {
      return launch_invalid(Error{"cluster.source", "described (" + std::to_string(d->nodes) + " x " + std::to_string(d->gpus_per_node) + " " + d->gpu + ")",
                                  "SSH nodes or a Slurm partition: a cluster described by hardware is for planning, "
                                  "it has no nodes to launch on"});
    }
    std::vector<NodeConfig> node_configs = req.config.nodes;
    if (node_configs.empty()) {
      node_configs.push_back(NodeConfig{"local", static_cast<int>(req.config.mesh.world_size()), {}});
    }
    for (const NodeConfig& nc : node_configs) {
      auto spec = parse_host_spec(nc.host);
      if (!spec) return launch_invalid(spec.error());
      site.hosts.push_back(*spec);
    }
    const int nproc = node_configs.front().slots;
    for (size_t i = 0; i < node_configs.size(); ++i) {
      if (node_configs[i].slots != nproc) {
        return launch_invalid(Error{"slots", site.hosts[i].to_string() + " slots=" + std::to_string(node_configs[i].slots),
                                    "every node runs --nproc-per-node " + std::to_string(nproc) +
                                        " ranks (torchrun style)"});
      }
    }
    if (nproc <= 0) return launch_invalid(Error{"--nproc-per-node", std::to_string(nproc), "must be >= 1"});
    return nproc;
  }

  std::optional<LaunchError> reach(const LaunchRequest& req, const LaunchStepFn& step) override {
    // Connect and probe every node at once.
    const auto& hosts = site.hosts;
    const size_t n = hosts.size();
    step("probing " + std::to_string(n) + " node(s)");
    site.nodes.resize(n);
    std::vector<std::optional<NodeInfo>> infos(n);
    std::vector<std::optional<Error>> errors(n);
    parallel_for(n, [&](size_t i) {
      if (req.on_probe) req.on_probe(ProbeProgress{i, hosts[i].to_string(), "connecting", ""});
      auto conn = connect_node(hosts[i], req.ssh);
      if (auto* e = std::get_if<ConnectError>(&conn)) {
        errors[i] = e->error;
        if (req.on_probe) req.on_probe(ProbeProgress{i, hosts[i].to_string(), "failed", e->error.message()});
        return;
      }
      site.nodes[i] = std::move(std::get<0>(conn));
      auto info = probe_node(*site.nodes[i]);
      if (!info) {
        errors[i] = info.error();
      } else {
        infos[i] = *info;
      }
      if (req.on_probe) {
        req.on_probe(ProbeProgress{i, hosts[i].to_string(), info ? "done" : "failed",
                                   info ? info->hostname : info.error().message()});
      }
    });
    std::vector<Error> unreachable;
    for (auto& e : errors) {
      if (e) unreachable.push_back(*e);
    }
    if (!unreachable.empty()) return launch_errors(std::move(unreachable), ErrorKind::remote);
    for (auto& info : infos) site.probes.push_back(*info);
    return std::nullopt;
  }

  void place(RunConfig& config, int nproc) const override {
    config.nodes.clear();  // hosts in one spelling
    for (const HostSpec& h : site.hosts) config.nodes.push_back(NodeConfig{h.to_string(), nproc, {}});
    config.source = SshNodesSource{};
  }

  std::optional<LaunchError> check_devices(const LaunchPlan& plan, const LaunchStepFn& step) override {
    if (plan.config.training.device != DeviceKind::cuda) return std::nullopt;
    for (size_t i = 0; i < site.hosts.size(); ++i) {
      if (static_cast<int>(site.probes[i].gpus.size()) < plan.nproc_per_node) {
        return launch_invalid(Error{"--nproc-per-node", std::to_string(plan.nproc_per_node),
                                    "node " + site.hosts[i].to_string() + " has " +
                                        std::to_string(site.probes[i].gpus.size()) +
                                        " GPU(s); use --device cpu or fewer ranks per node"});
      }
    }
    if (!plan.bundle) return std::nullopt;
    std::vector<std::string> warnings;
    auto refused = check_cuda_nodes(site.probes, plan.bundle->cuda_requirement, &warnings);
    for (const auto& w : warnings) step("warning: " + w);
    if (!refused.empty()) return launch_errors(std::move(refused), ErrorKind::remote);
    return std::nullopt;
  }

  void describe(const LaunchRequest& req, const LaunchPlan& plan, const StagedRun& staged,
                LaunchRecord& rec) const override {
    const auto& infos = site.probes;
    const auto& nodes = site.nodes;
    const size_t n = nodes.size();
    for (size_t i = 0; i < n; ++i) {
      rec.nodes.push_back({site.hosts[i].to_string(), plan.nproc_per_node, staged.run_dirs[i], infos[i].address});
    }
    // MASTER_ADDR: node 0's address as the other nodes see it. For an SSH node that is the
    // address its sshd was reached at; when node 0 is this machine and others are remote, it is
    // this machine's address as node 1 saw our connection come in.
    rec.master_addr = req.master_addr;
    if (rec.master_addr.empty()) {
      rec.master_addr = infos[0].address;
      if (nodes[0]->is_local()) rec.master_addr = n > 1 && !nodes[1]->is_local() ? infos[1].client_address : "127.0.0.1";
    }
    // A local node among remote ones is known to them by the address our connections come from.
    for (size_t i = 0; i < n; ++i) {
      if (!nodes[i]->is_local() || n == 1) continue;
      for (size_t k = 0; k < n; ++k) {
        if (!nodes[k]->is_local()) {
          rec.nodes[i].address = infos[k].client_address;
          break;
        }
      }
    }
  }

  std::variant<nlohmann::json, LaunchError> submit(const LaunchPlan&, const StagedRun&, const LaunchRecord&,
                                                   const LaunchStepFn&) override {
    return nlohmann::json::object();  // nothing runs before the record exists
  }

  std::optional<LaunchError> start(store::RunStore& store, store::RunId id, const LaunchPlan& plan,
                                   const StagedRun& staged, const LaunchRecord& rec,
                                   const LaunchStepFn& step) override {
    auto& nodes = site.nodes;
    const size_t n = nodes.size();
    step("starting " + std::to_string(n) + " supervisor(s)");
    std::vector<std::optional<Error>> start_errors(n);
    parallel_for(n, [&](size_t i) {
      auto pg = start_node(*nodes[i], rec, i);
      if (!pg) start_errors[i] = pg.error();
    });
    for (size_t i = 0; i < n; ++i) {
      if (start_errors[i]) {
        parallel_for(n, [&](size_t k) { (void)stop_node(*nodes[k], rec, k, std::chrono::seconds(2)); });
        (void)store.set_status(id, store::kStatusFailed, "could not start: " + start_errors[i]->message());
        return launch_failed(*start_errors[i]);
      }
    }
    if (plan.bundle) {
      uint64_t uploaded = 0;
      for (const auto& b : staged.bundle) uploaded += b.bytes_uploaded;
      (void)store.add_event(id, "info", "runtime bundle " +
                                            std::filesystem::path(plan.bundle->archive_path).filename().string() +
                                            " (" + plan.bundle->flavour + "): " + std::to_string(uploaded) +
                                            " bytes uploaded");
    }
    (void)store.add_event(id, "info", "started on " + std::to_string(n) + " node(s), master " + rec.master_addr +
                                          ":" + std::to_string(rec.master_port));
    return std::nullopt;
  }
};

}  // namespace

std::variant<LaunchedRun, LaunchError> launch_run(const std::filesystem::path& db, const LaunchRequest& req) {
  SshTarget target;
  return launch_through(db, req, target);
}

NodeConnector make_connector(const LaunchRecord& record, SshOptions ssh) {
  return [record, ssh](size_t index) -> std::variant<std::unique_ptr<Node>, ConnectError> {
    auto spec = parse_host_spec(record.nodes[index].host);
    if (!spec) return ConnectError{ConnectFailure::protocol, spec.error(), ""};
    return connect_node(*spec, ssh);
  };
}

Result<LaunchRecord> load_launch_record(const std::filesystem::path& db, store::RunId run) {
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  auto info = (*store)->get_run(run);
  if (!info) return info.error();
  if (!info->cluster.contains("launch")) {
    return Error{"run", std::to_string(run), "was not launched by meshwork (imported runs cannot be attached)"};
  }
  return launch_record_from_json(info->cluster.at("launch"));
}

Status stop_all(const LaunchRecord& record, const SshOptions& ssh, std::chrono::milliseconds grace) {
  auto connect = make_connector(record, ssh);
  std::vector<std::optional<Error>> errors(record.nodes.size());
  parallel_for(record.nodes.size(), [&](size_t i) {
    auto conn = connect(i);
    if (auto* e = std::get_if<ConnectError>(&conn)) {
      errors[i] = e->error;
      return;
    }
    if (auto st = stop_node(*std::get<0>(conn), record, i, grace); !st) errors[i] = st.error();
  });
  for (auto& e : errors) {
    if (e) return *e;
  }
  return {};
}

Status stop_and_record(const std::filesystem::path& db, store::RunId run, const SshOptions& ssh,
                       const std::string& who, std::chrono::milliseconds grace) {
  // A Slurm run is stopped by Slurm (scancel), not by signals from the login node.
  if (auto slurm = load_slurm_info(db, run); slurm.ok() && slurm->has_value()) {
    return slurm_stop_and_record(db, run, ssh, who);
  }
  auto rec = load_launch_record(db, run);
  if (!rec) return rec.error();
  if (Status st = stop_all(*rec, ssh, grace); !st) return st;
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  if (Status st = (*store)->set_status(run, store::kStatusStopped, "stopped by " + who); !st) return st;
  return (*store)->add_event(run, "info", "stopped by " + who);
}

}  // namespace meshwork::remote
