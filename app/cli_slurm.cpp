// `meshwork probe --slurm`, `meshwork launch --slurm` and following a Slurm run: the Slurm forms
// of the remote subcommands (cli_remote.cpp), on the helpers they share (cli_remote_shared.h).
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/cli_remote_shared.h"
#include "app/commands.h"
#include "remote/probe.h"
#include "remote/run_control.h"
#include "remote/slurm_run.h"

namespace meshwork::cli::remote_cli {

using namespace meshwork::remote;

// The same for a Slurm run: the follower with Slurm's liveness and stop; the final state is
// Slurm's, and so is the failure's wording (stored with the run).
int follow_slurm(const std::filesystem::path& db, store::RunId id, const SshOptions& ssh) {
  detach_on_sigint(true);
  auto outcome = follow_slurm_run(db, id, ssh, terminal_follow_options(), [](RunFollower* f) { g_follower = f; });
  detach_on_sigint(false);
  return exit_after_follow(outcome, id, "job", [&] {
    auto s = store::RunStore::open(db);
    if (!s) return std::string();
    auto info = (*s)->get_run(id);
    return info ? info->summary.exit_reason : std::string();
  });
}

// `meshwork probe --slurm LOGIN`: the partitions of a Slurm cluster, from its login node.
int probe_slurm_main(const Parsed& p) {
  if (p.positional.size() != 1) return refuse(Error{"LOGIN", "", "name the cluster's login node (or local)"});
  auto spec = parse_host_spec(p.positional[0], "LOGIN");
  if (!spec) return refuse(spec.error());
  auto conn = connect_node(*spec, ssh_options(p));
  if (auto* e = std::get_if<ConnectError>(&conn)) return refuse(e->error);
  auto info = probe_slurm(*std::get<0>(conn));
  if (!info) return refuse(info.error());
  if (p.switches.count("--json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& part : info->partitions) {
      out.push_back({{"name", part.name}, {"default", part.is_default}, {"up", part.up}, {"nodes", part.nodes},
                     {"idle", part.idle_nodes()}, {"node_states", part.node_states},
                     {"gpus_per_node", part.gpus_per_node.count}, {"gpu_type", part.gpus_per_node.type},
                     {"cpus_per_node", part.cpus_per_node}, {"memory_mb_per_node", part.memory_mb_per_node},
                     {"time_limit", part.time_limit}, {"node_list", part.node_list}});
    }
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  std::cout << info->login << ": " << info->partitions.size() << " Slurm partition(s)\n";
  for (const auto& part : info->partitions) {
    std::cout << "  " << part.name << (part.is_default ? "*" : "") << (part.up ? "" : " (down)") << "  "
              << part.nodes << " node(s), " << part.idle_nodes() << " idle, "
              << (part.gpus_per_node.count ? std::to_string(part.gpus_per_node.count) + " GPU(s)" +
                                                 (part.gpus_per_node.type.empty() ? "" : " " + part.gpus_per_node.type)
                                           : std::string("no GPU"))
              << " and " << part.cpus_per_node << " CPUs per node, " << part.memory_mb_per_node
              << " MiB, time limit " << part.time_limit << "\n";
  }
  return kExitOk;
}

// `meshwork launch --slurm ...`: the same run config as any launch, Slurm's fields, one sbatch.
int launch_slurm_main(const Parsed& p, const std::string& subcommand, const AfterFollow& after) {
  for (const char* f : {"--hostfile", "--hosts", "--local", "--master-addr"}) {
    if (p.values.count(f) || p.switches.count(f))
      return refuse(Error{f, "", "not with --slurm: Slurm picks the nodes (--nodes, --partition) and the master"});
  }
  if (auto st = check_elastic_flags(p, subcommand); !st) return refuse(st.error());
  if (p.values.count("--lost-after"))  // the follower reaches the login node only
    return refuse(Error{"--lost-after", p.values.at("--lost-after"),
                        "SSH nodes only: Slurm says which of a job's nodes are lost (SlurmdTimeout)"});
  Parsed q = p;
  q.switches.insert("--local");  // launch_config wants hosts; Slurm's nodes replace them
  if (!q.values.count("--nproc-per-node")) q.values["--nproc-per-node"] = "1";
  auto config = launch_config(q);
  if (!config) return refuse(config.error());
  SlurmLaunchRequest req;
  req.base.config = *config;
  req.base.subcommand = subcommand;
  // meshtrain calibrate builds its own group layouts: any valid shape of the world will do.
  if (subcommand == "calibrate") req.base.config.mesh = MeshShape{1, -1, 1, 1};
  req.login = p.values.count("--login") ? p.values.at("--login") : "local";
  if (auto st = int_value(p, "--nodes", 1, 100000, req.job.nodes); !st) return refuse(st.error());
  if (auto st = int_value(p, "--gpus-per-node", 0, 1024, req.job.gpus_per_node); !st) return refuse(st.error());
  if (auto st = int_value(p, "--nproc-per-node", 1, 1024, req.job.nproc_per_node); !st) return refuse(st.error());
  if (auto st = int_value(p, "--master-port", 1, 65535, req.base.master_port); !st) return refuse(st.error());
  if (auto st = int_value(p, "--max-restarts", 0, 1000, req.base.max_restarts); !st) return refuse(st.error());
  auto text = [&](const char* f) { return p.values.count(f) ? p.values.at(f) : std::string(); };
  req.job.partition = text("--partition");
  req.job.account = text("--account");
  req.job.qos = text("--qos");
  req.job.time = text("--time");
  if (p.every_value.count("--sbatch-arg")) req.job.sbatch_args = p.every_value.at("--sbatch-arg");
  req.base.trainer_path = p.values.count("--meshtrain") ? p.values.at("--meshtrain") : self_dir() + "/meshtrain";
  if (p.values.count("--remote-root")) req.base.remote_root = p.values.at("--remote-root");
  // A bundle (or the nodes' own torch wheel) for compute nodes without this machine's LibTorch:
  // the bundle goes once to the shared filesystem through the login node.
  if (p.values.count("--bundle")) req.base.bundle_path = p.values.at("--bundle");
  if (p.values.count("--bundle-root")) req.base.bundle_root = p.values.at("--bundle-root");
  if (p.values.count("--node-torch")) req.base.node_torch = p.values.at("--node-torch");
  req.base.on_deploy = print_deploy_progress;
  req.base.ssh = ssh_options(p);
  req.base.on_step = [](const std::string& s) {
    std::lock_guard lock(g_out_mu);
    std::cerr << "meshwork: " << s << "\n";
  };
  const auto db = db_path(p);
  auto launched = launch_slurm_run(db, req);
  if (auto* e = std::get_if<LaunchError>(&launched)) {
    for (size_t i = 1; i < e->more.size(); ++i) say_error(e->more[i]);
    return refuse(e->error);
  }
  const LaunchedRun& run = std::get<LaunchedRun>(launched);
  auto slurm = load_slurm_info(db, run.id);
  std::cout << "run " << run.id << ": submitted as Slurm job " << (slurm && *slurm ? (*slurm)->job_id : "?")
            << ", " << run.record.nodes.size() << " node(s), run directory " << run.record.nodes[0].run_dir << "\n"
            << std::flush;
  if (p.switches.count("--detach")) return kExitOk;
  if (p.switches.count("--elastic")) return follow_elastic_slurm_cli(p, db, run.id, req.base);
  const int rc = follow_slurm(db, run.id, req.base.ssh);
  return after ? after(db, run.id, run.record, rc) : rc;
}

}  // namespace meshwork::cli::remote_cli
