// Core's view of every mesh shape of one machine, for bench/shapes.sh: the planner's ranking
// (make_plan) with each shape's per-rank memory estimate (CPU: fused attention as LibTorch runs it, reserve 0,
// meshtrain's sequence-parallel tp and vocabulary-parallel embedding/head) and predicted
// tokens/s, given the matmul rate and Gloo bandwidth the bench measured in the same run.
//
// shapes_estimate --model NAME --world N [--nodes N] --seq-len S --micro-batch B --global-batch G
//                 (--flops F --efficiency E --bandwidth BYTES_PER_S --latency SECONDS
//                  | --calibration FILE | --calibration-records DIR | --fit-db STORE [--calibration FILE])
//                 [--routing-db STORE --routing-run RUN]
// With --calibration (what `meshtrain calibrate` measured, core/calibration.h) the planner uses
// the calibrated matmul rate, step efficiency and per-collective fits instead of the flags.
// With --fit-db the runs stored there (the cluster with the most runs) are fitted
// (core/run_fit.h) on the calibration, or on HardwareModel::cpu()'s defaults without one, and
// every term of the prediction is scaled by its factor; the fit is printed to stderr.
// --calibration-records DIR fits the calibration anew from the records of a `meshtrain calibrate`
// run directory (metrics-rank*.jsonl), as meshtrain does when it writes calibration.json: a change
// to the fit is judged offline against the very measurements an earlier bench made.
// --routing-db/--routing-run: a stored run's measured routing gives each ep shape the imbalance
// of its own ep (core/routing_imbalance.h), as `meshwork plan --routing RUN` does.
// prints plan_to_json() (best first) with "rank" added to every shape.
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "core/calibration_records.h"
#include "core/model_spec.h"
#include "core/planner.h"
#include "core/store/expert_load.h"
#include "core/store/run_observations.h"

using namespace meshwork;

int main(int argc, char** argv) {
  std::map<std::string, std::string> a;
  for (int i = 1; i + 1 < argc; i += 2) a[argv[i]] = argv[i + 1];
  auto need = [&](const char* k) -> std::string {
    if (!a.count(k)) {
      std::cerr << "shapes_estimate: " << k << ": missing\n";
      std::exit(2);
    }
    return a[k];
  };
  auto spec = load_model_spec(need("--model"));
  if (!spec.ok()) {
    std::cerr << "shapes_estimate: " << spec.error().message() << "\n";
    return 2;
  }
  PlanQuery q;
  q.model = *spec;
  // --nodes N: the world's ranks on N nodes (bench/shapes.sh --nodes 2: two namespace nodes).
  q.nodes = a.count("--nodes") ? std::stoi(a["--nodes"]) : 1;
  q.gpus_per_node = std::stoi(need("--world")) / q.nodes;
  q.device_memory_bytes = int64_t{1} << 40;  // CPU: everything "fits"; ranking by speed
  q.training.seq_len = std::stoll(need("--seq-len"));
  q.training.micro_batch = std::stoll(need("--micro-batch"));
  q.training.global_batch = std::stoll(need("--global-batch"));
  q.training.precision = Precision::fp32;
  q.training.device = DeviceKind::cpu;
  q.estimate.memory.reserve_bytes = 0;
  q.estimate.memory.attention = AttentionKernel::fused;  // LibTorch runs flash SDPA on CPU too (bench/estimator_check.py)
  q.estimate.hardware = HardwareModel::cpu();
  if (a.count("--calibration")) {
    auto cal = read_calibration_file(a["--calibration"]);
    if (!cal.ok()) {
      std::cerr << "shapes_estimate: " << cal.error().message() << "\n";
      return 2;
    }
    q.estimate.calibration = *cal;
  } else if (a.count("--calibration-records")) {
    std::vector<CalibrationRecord> records;
    for (int r = 0;; ++r) {
      std::ifstream in(a["--calibration-records"] + "/metrics-rank" + std::to_string(r) + ".jsonl");
      if (!in) break;
      read_calibration_records(in, records);
    }
    auto cal = calibration_from_records(records);
    if (!cal.ok()) {
      std::cerr << "shapes_estimate: --calibration-records " << a["--calibration-records"] << ": "
                << cal.error().message() << "\n";
      return 2;
    }
    q.estimate.calibration = *cal;
  } else if (!a.count("--fit-db")) {
    q.estimate.hardware.peak_flops_fp32 = q.estimate.hardware.peak_flops_bf16 = std::stod(need("--flops"));
    q.estimate.hardware.efficiency = std::stod(need("--efficiency"));
    q.estimate.hardware.intra_node_bytes_per_s = q.estimate.hardware.inter_node_bytes_per_s = std::stod(need("--bandwidth"));
    q.estimate.hardware.latency_s = std::stod(need("--latency"));
  }
  if (a.count("--fit-db")) {
    auto st = store::RunStore::open(a["--fit-db"]);
    if (!st.ok()) {
      std::cerr << "shapes_estimate: " << st.error().message() << "\n";
      return 2;
    }
    auto set = store::load_observations(st->get(), a.count("--fit-cluster") ? a["--fit-cluster"] : "");
    if (!set.ok() || set->runs.empty()) {
      std::cerr << "shapes_estimate: --fit-db: " << (set.ok() ? "no finished run stored" : set.error().message()) << "\n";
      return 2;
    }
    auto fit = fit_runs(set->runs, q.estimate.calibration);
    if (!fit.ok()) {
      std::cerr << "shapes_estimate: " << fit.error().message() << "\n";
      return 2;
    }
    fit->cluster = set->cluster;
    std::cerr << to_json(*fit).dump() << "\n";
    q.estimate.fit = std::make_shared<const RunFit>(std::move(*fit));
  }
  if (a.count("--routing-db")) {
    auto st = store::RunStore::open(a["--routing-db"]);
    if (!st.ok()) {
      std::cerr << "shapes_estimate: " << st.error().message() << "\n";
      return 2;
    }
    auto run = (*st)->resolve_run(need("--routing-run"));
    auto routing = run.ok() ? store::measured_routing(**st, *run) : Result<MeasuredRouting>(run.error());
    if (!routing.ok()) {
      std::cerr << "shapes_estimate: --routing-run: " << routing.error().message() << "\n";
      return 2;
    }
    q.estimate.routing = std::make_shared<const MeasuredRouting>(std::move(*routing));
  }
  auto plan = make_plan(q);
  if (!plan.ok()) {
    std::cerr << "shapes_estimate: " << plan.error().message() << "\n";
    return 2;
  }
  nlohmann::json j = plan_to_json(*plan);
  for (size_t i = 0; i < j["shapes"].size(); ++i) j["shapes"][i]["rank"] = i + 1;
  std::cout << j.dump(1) << "\n";
  return 0;
}
