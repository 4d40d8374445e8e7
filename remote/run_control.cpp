#include "remote/run_control.h"

#include <unistd.h>

#include <ctime>
#include <fstream>
#include <random>
#include <thread>

#include "core/model_spec.h"
#include "core/parallel_layout.h"
#include "remote/cuda_driver.h"
#include "remote/data_placement.h"
#include "remote/node_torch.h"
#include "remote/run_layout.h"
#include "remote/slurm_run.h"

namespace meshwork::remote {

namespace {

template <class F>
void parallel_for(size_t n, F&& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) threads.emplace_back([&fn, i] { fn(i); });
  for (auto& t : threads) t.join();
}

// The error's kind decides the exit code and the message (core/error.h): what the user gave is
// invalid input; what went wrong on the way keeps its own kind (I/O), else it is the nodes'.
LaunchError invalid(Error e) {
  e.kind = ErrorKind::invalid_input;
  return LaunchError{std::move(e), {}};
}
LaunchError failed(Error e) {
  if (e.kind == ErrorKind::invalid_input) e.kind = ErrorKind::remote;
  return LaunchError{std::move(e), {}};
}

}  // namespace

std::string new_run_dir_name() {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::random_device rd;
  char rnd[16];
  std::snprintf(rnd, sizeof rnd, "%06x", rd() & 0xffffff);
  return std::string("run-") + stamp + "-" + rnd;
}

std::variant<LaunchedRun, LaunchError> launch_run(const std::filesystem::path& db, const LaunchRequest& req) {
  auto step = [&](const std::string& s) {
    if (req.on_step) req.on_step(s);
  };
  std::vector<NodeConfig> node_configs = req.config.nodes;
  if (node_configs.empty()) node_configs.push_back(NodeConfig{"local", static_cast<int>(req.config.mesh.world_size()), {}});
  std::vector<HostSpec> hosts;
  for (const NodeConfig& nc : node_configs) {
    auto spec = parse_host_spec(nc.host);
    if (!spec) return invalid(spec.error());
    hosts.push_back(*spec);
  }
  const int nproc = node_configs.front().slots;
  for (size_t i = 0; i < node_configs.size(); ++i) {
    if (node_configs[i].slots != nproc) {
      return invalid(Error{"slots", hosts[i].to_string() + " slots=" + std::to_string(node_configs[i].slots),
                           "every node runs --nproc-per-node " + std::to_string(nproc) + " ranks (torchrun style)"});
    }
  }
  if (nproc <= 0) return invalid(Error{"--nproc-per-node", std::to_string(nproc), "must be >= 1"});
  if (req.max_restarts < 0) {
    return invalid(Error{"--max-restarts", std::to_string(req.max_restarts), "a whole number >= 0"});
  }
  std::optional<BundleManifest> bundle;
  if (!req.bundle_path.empty() && !req.node_torch.empty()) {
    return invalid(Error{"--node-torch", req.node_torch, "not with --bundle (a bundle carries its own LibTorch)"});
  }
  if (!req.bundle_path.empty()) {
    auto b = load_bundle(req.bundle_path);
    if (!b) return invalid(b.error());
    bundle = *b;
  } else if (req.trainer_path.empty() || !std::filesystem::exists(req.trainer_path)) {
    return invalid(Error{"--meshtrain", req.trainer_path, "must be the meshtrain binary to deploy"});
  }

  // Connect and probe every node at once.
  step("probing " + std::to_string(hosts.size()) + " node(s)");
  const size_t n = hosts.size();
  std::vector<std::unique_ptr<Node>> nodes(n);
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
    nodes[i] = std::move(std::get<0>(conn));
    auto info = probe_node(*nodes[i]);
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
  LaunchError unreachable;
  for (size_t i = 0; i < n; ++i) {
    if (errors[i]) unreachable.more.push_back(*errors[i]);
  }
  if (!unreachable.more.empty()) {
    for (Error& e : unreachable.more) e.kind = ErrorKind::remote;
    unreachable.error = unreachable.more.front();
    return unreachable;
  }

  // Validate the shape against the cluster that answered.
  step("checking the layout");
  // The config as the nodes will run it: hosts in one spelling, nothing but host and slots.
  RunConfig config = req.config;
  if (config.name.empty()) config.name = "run";
  config.nodes.clear();
  for (size_t i = 0; i < n; ++i) config.nodes.push_back(NodeConfig{hosts[i].to_string(), nproc, {}});
  auto model = model_spec_from_run_model(config.model);
  if (!model) return invalid(model.error());
  const LayoutCheck checked = ParallelLayout::check(config, &*model, Placement::of(config));
  if (!checked.ok()) {
    LaunchError e = invalid(checked.report.first_error());
    for (const Diagnostic& d : checked.report.errors()) e.more.push_back(d.to_error());
    return e;
  }
  config.mesh = checked.layout->shape();  // the nodes run the resolved shape
  if (config.training.device == DeviceKind::cuda) {
    for (size_t i = 0; i < n; ++i) {
      if (static_cast<int>(infos[i]->gpus.size()) < nproc) {
        return invalid(Error{"--nproc-per-node", std::to_string(nproc),
                             "node " + hosts[i].to_string() + " has " + std::to_string(infos[i]->gpus.size()) +
                                 " GPU(s); use --device cpu or fewer ranks per node"});
      }
    }
  }

  if (bundle && config.training.device == DeviceKind::cuda) {
    if (bundle->flavour != "cuda") {
      return invalid(Error{"--bundle", bundle->archive_path,
                           "is the " + bundle->flavour + " flavour: a --device cuda run needs the cuda flavour "
                           "(scripts/bundle cuda)"});
    }
    std::vector<NodeInfo> probed;
    for (const auto& info : infos) probed.push_back(*info);
    std::vector<std::string> warnings;
    auto refused = check_cuda_nodes(probed, bundle->cuda_requirement, &warnings);
    for (const auto& w : warnings) step("warning: " + w);
    if (!refused.empty()) {
      LaunchError e;
      e.more = refused;
      for (Error& m : e.more) m.kind = ErrorKind::remote;
      e.error = e.more.front();
      return e;
    }
  }

  if (req.max_restarts > 0 && config.training.checkpoint_every <= 0) {
    step("warning: --max-restarts without --checkpoint-every K: a restart begins again at step 0");
  }

  // Training and held-out data: on every node already, or uploaded with the run, or refused
  // here (data_placement.h).
  std::vector<Node*> reached;
  for (auto& node : nodes) reached.push_back(node.get());
  auto data_uploads = place_run_data(config, reached, step);
  if (!data_uploads) return invalid(data_uploads.error());

  // Deploy.
  step("deploying");
  const std::string run_name = new_run_dir_name();
  const auto cfg_path = std::filesystem::temp_directory_path() / ("meshwork-" + run_name + ".json");
  if (auto st = save_run_config(config, cfg_path); !st) return failed(st.error());
  const std::string trainer_name = "meshtrain";
  DeployFile trainer{req.trainer_path, trainer_name, 0700, ""};
  const auto retarget_dir = std::filesystem::temp_directory_path() / ("meshwork-" + run_name + "-trainer");
  if (!req.node_torch.empty()) {
    auto moved = retarget_trainer(req.trainer_path, req.node_torch, retarget_dir);
    if (!moved) {
      std::filesystem::remove(cfg_path);
      return invalid(moved.error());
    }
    trainer.local_path = *moved;
  }
  std::vector<BundleNodeResult> bundle_results;
  if (bundle) {
    // The bundle first (once per node or shared filesystem); the run directory then links to it,
    // so meshtrain_command() stays `./meshtrain ...` either way.
    BundleDeployOptions opts;
    opts.root = req.bundle_root;
    opts.reconnect = [&](size_t i) { return connect_node(hosts[i], req.ssh); };
    auto results = deploy_bundle_all(nodes, *bundle, opts, req.on_deploy);
    LaunchError e;
    for (auto& r : results) {
      if (!r) {
        e.more.push_back(r.error());
      } else {
        bundle_results.push_back(*r);
      }
    }
    if (!e.more.empty()) {
      std::filesystem::remove(cfg_path);
      for (Error& m : e.more) m.kind = ErrorKind::remote;
      e.error = e.more.front();
      return e;
    }
    trainer = DeployFile{"", trainer_name, 0700, req.bundle_root + "/" + bundle->sha256 + "/" + bundle->trainer};
  }
  std::vector<Node*> raw;
  for (auto& node : nodes) raw.push_back(node.get());
  std::vector<DeployFile> files = {trainer, DeployFile{cfg_path.string(), kRunConfigFile, 0600, ""}};
  files.insert(files.end(), data_uploads->begin(), data_uploads->end());
  auto deployed = deploy_all(raw, req.remote_root, run_name, files, trainer_name, req.on_deploy);
  std::filesystem::remove(cfg_path);
  std::filesystem::remove_all(retarget_dir);
  if (!deployed.ok()) {
    LaunchError e;
    for (const auto& r : deployed.nodes) {
      if (!r) e.more.push_back(r.error());
    }
    for (Error& m : e.more) m.kind = ErrorKind::remote;
    e.error = e.more.front();
    return e;
  }

  LaunchRecord rec;
  rec.trainer = trainer_name;
  for (size_t i = 0; i < n; ++i) {
    rec.nodes.push_back({hosts[i].to_string(), nproc, deployed.nodes[i]->run_dir, infos[i]->address});
  }
  // MASTER_ADDR: node 0's address as the other nodes see it. For an SSH node that is the address
  // its sshd was reached at; when node 0 is this machine and others are remote, it is this
  // machine's address as node 1 saw our connection come in.
  rec.master_addr = req.master_addr;
  if (rec.master_addr.empty()) {
    rec.master_addr = infos[0]->address;
    if (nodes[0]->is_local()) rec.master_addr = n > 1 && !nodes[1]->is_local() ? infos[1]->client_address : "127.0.0.1";
  }
  // A local node among remote ones is known to them by the address our connections come from.
  for (size_t i = 0; i < n; ++i) {
    if (!nodes[i]->is_local() || n == 1) continue;
    for (size_t k = 0; k < n; ++k) {
      if (!nodes[k]->is_local()) {
        rec.nodes[i].address = infos[k]->client_address;
        break;
      }
    }
  }
  rec.max_restarts = req.max_restarts;
  rec.subcommand = req.subcommand;
  rec.master_port = req.master_port;
  if (rec.master_port == 0) {
    std::random_device rd;
    rec.master_port = 29500 + static_cast<int>(rd() % 2000);
  }

  step("recording the run");
  auto store = store::RunStore::open(db);
  if (!store) return failed(store.error());
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& info : infos) probes.push_back(to_json(*info));
  nlohmann::json cluster = {{"launch", to_json(rec)}, {"probes", probes}};
  auto id = (*store)->create_run(config.name, to_json(config), cluster);
  if (!id) return failed(id.error());

  step("starting " + std::to_string(n) + " supervisor(s)");
  std::vector<std::optional<Error>> start_errors(n);
  parallel_for(n, [&](size_t i) {
    auto pg = start_node(*nodes[i], rec, i);
    if (!pg) start_errors[i] = pg.error();
  });
  for (size_t i = 0; i < n; ++i) {
    if (start_errors[i]) {
      parallel_for(n, [&](size_t k) { (void)stop_node(*nodes[k], rec, k, std::chrono::seconds(2)); });
      (void)(*store)->set_status(*id, store::kStatusFailed, "could not start: " + start_errors[i]->message());
      return failed(*start_errors[i]);
    }
  }
  if (bundle) {
    uint64_t uploaded = 0;
    for (const auto& b : bundle_results) uploaded += b.bytes_uploaded;
    (void)(*store)->add_event(*id, "info", "runtime bundle " + std::filesystem::path(bundle->archive_path).filename().string() +
                                               " (" + bundle->flavour + "): " + std::to_string(uploaded) + " bytes uploaded");
  }
  (void)(*store)->add_event(*id, "info", "started on " + std::to_string(n) + " node(s), master " + rec.master_addr +
                                             ":" + std::to_string(rec.master_port));
  LaunchedRun out;
  out.id = *id;
  out.record = rec;
  for (auto& info : infos) out.probes.push_back(*info);
  out.bundle = bundle_results;
  return out;
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
