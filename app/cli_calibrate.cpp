// `meshwork calibrate`: `meshtrain calibrate` on the nodes through the normal launch path
// (launch_command: probe, validate, deploy, supervisors, streaming into the store), then the
// run's calibration records (ingested like any metrics line) fitted into a Calibration and
// stored by cluster fingerprint (core/store/calibration_store.h).
//
// meshwork calibrate --hostfile F | --hosts H1,H2 | --local  --nproc-per-node N
//                    [--config FILE] [run config flags: --model, --seq-len, --micro-batch, --device]
//                    [--db PATH] [--name NAME] [--out FILE] [launch's other flags]
// meshwork calibrate --slurm [--login HOST] --nodes N [--partition P] ... (one sbatch job)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "app/commands.h"
#include "core/calibration_records.h"
#include "core/store/calibration_store.h"
#include "core/store/run_store.h"
#include "remote/slurm_run.h"

namespace meshwork::cli {

namespace {

constexpr const char* kUsage =
    "usage: meshwork calibrate --hostfile F | --hosts H1,H2 | --local  --nproc-per-node N\n"
    "         [--config FILE] [run config flags: --model M --seq-len S --micro-batch B --device D]\n"
    "         [--db PATH] [--name NAME] [--out FILE] [meshwork launch's SSH and deploy flags]\n"
    "       meshwork calibrate --slurm [--login HOST] --nodes N [--partition P] [--gpus-per-node G]\n"
    "         [--nproc-per-node N] [meshwork launch --slurm's other flags] [--out FILE]\n"
    "Runs `meshtrain calibrate` on the nodes as a normal run (deploy, one supervisor per node,\n"
    "metrics streamed into the store): matmuls of the model's shapes in fp32 and bf16 with the\n"
    "threads a rank gets, and all-reduce, all-gather, reduce-scatter and send/recv at 4 KiB to\n"
    "16 MiB inside a node and across nodes. Fits latency and bandwidth per link and collective,\n"
    "stores the calibration by cluster fingerprint (nodes, devices, links) and prints its id:\n"
    "`meshwork plan ... --calibration ID` (or --out FILE, then --calibration FILE) uses it.\n"
    "Exit 0: calibrated; 3: the run failed; 2: invalid input.\n";

std::string flag_value(const Args& args, const std::string& flag) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) return args[i + 1];
  for (const std::string& a : args)
    if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
  return "";
}

void print_calibration(const Calibration& c, std::ostream& out) {
  out << "calibration of cluster " << c.fingerprint.id() << " (" << c.fingerprint.nodes.size() << " node(s), "
      << to_string(c.fingerprint.device) << ") measured " << c.measured_at << "\n";
  for (const MatmulRate& r : c.matmul) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  matmul %-4s split %-2d %8.1f GFLOP/s per rank (%d rank(s) per node, %d thread(s) each)\n",
                  std::string(to_string(r.precision)).c_str(), r.split, r.flops_per_s / 1e9, r.ranks_per_node, r.threads);
    out << buf;
  }
  for (const CollectiveFit& f : c.collectives) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  %-10s %-14s n=%-3d latency %8.1f us  bandwidth %8.1f MB/s  (%d sizes, worst %.0f%%)\n",
                  std::string(to_string(f.link)).c_str(), std::string(to_string(f.op)).c_str(), f.group_size,
                  f.fit.latency_s * 1e6, f.fit.bytes_per_s / 1e6, f.samples, 100 * f.worst_residual);
    out << buf;
  }
  // What a training step really costs against the formulas, per term (core/fit_key.h).
  for (const FitFactor& f : c.step_factors) {
    char buf[160];
    if (f.per_step_s > 0)
      std::snprintf(buf, sizeof buf, "  split steps: %-32s x %.2f of the formula + %.1f ms per step\n",
                    f.key.to_string().c_str(), f.factor, 1e3 * f.per_step_s);
    else
      std::snprintf(buf, sizeof buf, "  split steps: %-32s x %.2f of the formula\n", f.key.to_string().c_str(), f.factor);
    out << buf;
  }
}

}  // namespace

int calibrate_main(const Args& args) {
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return kExitOk;
    }
  const std::string out_file = flag_value(args, "--out");
  Args launch_args;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--out") {
      ++i;
      continue;
    }
    if (args[i].rfind("--out=", 0) == 0) continue;
    launch_args.push_back(args[i]);
  }
  bool has_name = false;
  for (const std::string& a : launch_args) has_name = has_name || a == "--name" || a.rfind("--name=", 0) == 0;
  if (!has_name) launch_args.insert(launch_args.end(), {"--name", "calibrate"});

  return launch_command(launch_args, "calibrate",
                        [&](const std::filesystem::path& db, int64_t run, const remote::LaunchRecord& rec,
                            int follow_rc) -> int {
                          if (follow_rc != kExitOk) return follow_rc;
                          auto st = store::RunStore::open(db);
                          if (!st.ok()) return fail(st.error());
                          auto records = store::calibration_records(**st, run);
                          if (!records.ok()) return fail(records.error());
                          // The launcher's names for remote nodes; a local node keeps its hostname,
                          // and so do a Slurm job's nodes (the launcher reached only the login node).
                          std::vector<std::string> hosts;
                          auto slurm = remote::load_slurm_info(db, run);
                          const bool through_slurm = slurm.ok() && slurm->has_value();
                          for (const auto& n : rec.nodes)
                            hosts.push_back(n.host == "local" || through_slurm ? "" : n.host);
                          auto cal = calibration_from_records(*records, hosts);
                          if (!cal.ok()) return fail(cal.error().as(ErrorKind::does_not_fit));
                          auto id = store::save_calibration(**st, *cal, run);
                          if (!id.ok()) return fail(id.error());
                          print_calibration(*cal, std::cout);
                          if (!out_file.empty()) {
                            std::ofstream f(out_file);
                            f << to_json(*cal).dump(1) << "\n";
                            if (!f) return fail(Error{"--out", out_file, "a writable file"}.as(ErrorKind::io));
                          }
                          std::cout << "stored as calibration " << *id << "; use it with `meshwork plan ... "
                                    << "--calibration " << cal->fingerprint.id() << "`\n";
                          return kExitOk;
                        });
}

}  // namespace meshwork::cli
