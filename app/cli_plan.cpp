// `meshwork plan`: rank every mesh shape for a model on a cluster (core/planner.h).
//
// meshwork plan --model NAME|PATH --nodes N --gpus-per-node G --gpu-memory SIZE --seq-len S
//   --micro-batch B [--global-batch GB] [--precision fp32|bf16]
//   [--activation-checkpointing none|full] [--dp-replicate A] [--dp-shard B] [--cp C] [--tp D]
//   [--device cuda|cpu] [--reserve SIZE] [--calibration FILE|ID [--db PATH]]
//   [--fit-runs auto|CLUSTER [--db PATH]] [--routing RUN [--db PATH]] [--json]
//   [--from FILE] [--export accelerate|axolotl|torchtitan [--out FILE] [--lr X]
//   [--warmup-steps N] [--steps N]]
//   [--try K [--steps N] --local | --hosts H1,H2 | --hostfile F [--nproc-per-node G] [launch flags]]
//   (--try: cli_trials.cpp)
// Exit 0: something fits (or the fully given shape fits); 2: invalid input; 3: valid, nothing fits.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "app/commands.h"
#include "app/plan_interop.h"
#include "core/cli_args.h"
#include "core/gpu_kinds.h"
#include "core/planner.h"
#include "core/run_config_flags.h"
#include "core/store/calibration_store.h"
#include "core/store/expert_load.h"
#include "core/store/paths.h"
#include "core/store/run_observations.h"
#include "core/store/run_store.h"
#include "core/units.h"

namespace meshwork::cli {

namespace {

constexpr const char* kUsage =
    "usage: meshwork plan --model NAME|PATH --nodes N --gpus-per-node G --gpu-memory SIZE|--gpu KIND\n"
    "                     --seq-len S --micro-batch B [--global-batch GB]\n"
    "                     [--precision fp32|bf16] [--activation-checkpointing none|full]\n"
    "                     [--dp-replicate A] [--dp-shard B] [--cp C] [--tp D] [--ep E|auto]\n"
    "                     [--pp N|auto [--pp-schedule gpipe|1f1b|interleaved-1f1b]\n"
    "                      [--pp-virtual-stages V]]\n"
    "                     [--device cuda|cpu] [--reserve SIZE]\n"
    "                     [--attention fused|materialized] [--json]\n"
    "                     [--from FILE] [--export accelerate|axolotl|torchtitan [--out FILE]\n"
    "                      [--lr X] [--warmup-steps N] [--steps N]]\n"
    "                     [--calibration FILE|FINGERPRINT_ID [--db PATH]]\n"
    "                     [--fit-runs auto|CLUSTER_ID [--db PATH]]\n"
    "                     [--routing RUN [--db PATH]]\n"
    "Ranks every mesh shape (dp_replicate x dp_shard x cp x tp = nodes x gpus-per-node) by\n"
    "whether it fits GPU memory, then by predicted tokens/s. Given axes stay fixed.\n"
    "--ep (mixture-of-experts models): expert-parallel ranks borrowed from dp_shard x cp x tp;\n"
    "default auto: every degree dividing num_experts and dp_shard x cp x tp is ranked too.\n"
    "--pp auto also tries pipeline stages (pp x dp_replicate x dp_shard x cp x tp), judged with\n"
    "--pp-schedule (default 1f1b): the worst stage's memory, the bubble in the step time.\n"
    "SIZE: 80GiB, 80GB, 81920MiB. --device cpu estimates CPU ranks (no framework reserve).\n"
    "--gpu KIND: GPUs of a known kind (h100-80gb, h200, b200, a100-40gb, a100-80gb, l40s, mi300x):\n"
    "their memory (unless --gpu-memory is given), dense peak rates and links (core/gpu_kinds.h).\n"
    "--attention: fused (flash SDPA, what LibTorch runs on CUDA and CPU; the default) or\n"
    "materialized (an attention that keeps the seq x seq probabilities).\n"
    "--from FILE: start from an Accelerate or Axolotl YAML or a torchtitan TOML (model, mesh,\n"
    "sequence length, batch, precision, ...); flags given as well override the file.\n"
    "--export FORMAT: write the best fitting shape the tool accepts as its config (stdout, or\n"
    "--out FILE) and print each node's launch line, which names that file. --lr, --warmup-steps\n"
    "and --steps (meshtrain's flags, same values) go into the exported file; they win over --from.\n"
    "--calibration: what `meshwork calibrate` measured on the cluster (a calibration JSON file,\n"
    "or the fingerprint id it printed: the newest stored one in the run store, --db PATH or the\n"
    "default) replaces the hardware defaults wherever it has a number.\n"
    "--fit-runs: learn from the cluster's finished runs in the run store: each term of the step\n"
    "(compute, tp, cp ring, FSDP, dp_replicate all-reduce) is scaled by the factor that fits what\n"
    "those runs measured (docs/estimator.md). auto: the nodes --calibration was measured on, else\n"
    "the cluster with the most stored runs; or a cluster id as printed. The fit is judged out of\n"
    "sample (each run predicted by the fit of the others; its median miss is the step's ±) and is\n"
    "refused when there are not more runs than it has unknowns.\n"
    "--routing RUN (mixture of experts): the tokens per expert a stored run of the same model\n"
    "measured (its id or name, at any shape, ep 1 too) give each ep shape the imbalance of its own\n"
    "ep: the busiest ep rank's share of the routed tokens over the mean, per layer for the step\n"
    "time, over all layers for memory (docs/estimator.md). Without it routing is taken as balanced.\n"
    "--try K: then launch the K best predicted shapes that fit on those nodes (the plan's --nodes\n"
    "and --gpus-per-node), one after another, --steps N optimizer steps each (default 20), through\n"
    "`meshwork launch` (its SSH, runtime and --lr/--warmup-steps/--seed/--data flags pass through).\n"
    "They are stored as a trial group (runs named \"trial T #i SHAPE\") and shown ranked by measured\n"
    "tokens/s beside the prediction, with each shape's measured peak memory per rank (the highest\n"
    "of any rank) against the estimate, and the winner; --json prints the group. A trial that\n"
    "fails is reported with its reason and the next one goes on (exit 0: one ran to its end).\n"
    "Exit 0: a shape fits; 2: invalid input; 3: valid, but nothing fits.\n";

// The training settings an export carries that the plan itself does not depend on: taken from
// the run config flag table (core/run_config_flags.h), so `plan --export` reads them with
// meshtrain's words, bounds and errors.
const std::vector<std::string> kExportTrainingFlags = {"--lr", "--warmup-steps", "--steps"};

// The help is kUsage.
const std::vector<FlagSpec> kPlanFlags = {
    {"--model", "NAME|PATH", ""}, {"--nodes", "N", ""}, {"--gpus-per-node", "G", ""}, {"--gpu-memory", "SIZE", ""}, {"--gpu", "KIND", ""},
    {"--seq-len", "S", ""}, {"--micro-batch", "B", ""}, {"--global-batch", "GB", ""},
    {"--precision", "fp32|bf16", ""}, {"--activation-checkpointing", "none|full", ""},
    {"--dp-replicate", "A", ""}, {"--dp-shard", "B", ""}, {"--cp", "C", ""}, {"--tp", "D", ""}, {"--ep", "E|auto", ""},
    {"--pp", "N|auto", ""}, {"--pp-schedule", "gpipe|1f1b|interleaved-1f1b", ""}, {"--pp-virtual-stages", "V", ""},
    {"--device", "cuda|cpu", ""}, {"--reserve", "SIZE", ""}, {"--attention", "fused|materialized", ""},
    {"--calibration", "FILE|ID", ""}, {"--db", "PATH", ""}, {"--json", "", ""}, {"--from", "FILE", ""},
    {"--export", "FORMAT", ""}, {"--out", "FILE", ""}, {"--fit-runs", "auto|CLUSTER", ""},
    {"--routing", "RUN", ""}};

std::vector<FlagSpec> plan_flags() {
  std::vector<FlagSpec> flags = kPlanFlags;
  for (const std::string& name : kExportTrainingFlags)
    flags.push_back({name, find_run_config_flag(name)->arg, ""});
  return flags;
}

constexpr int64_t kMaxCount = int64_t{1} << 30;

#define TRY_ASSIGN(lhs, expr)              \
  do {                                     \
    auto _r = (expr);                      \
    if (!_r.ok()) return fail(_r.error()); \
    lhs = *_r;                             \
  } while (0)

// Width in characters: UTF-8 continuation bytes (the step's "±") take no column.
std::string pad(const std::string& s, size_t width, bool right = true) {
  const size_t chars = static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  if (chars >= width) return s;
  return right ? std::string(width - chars, ' ') + s : s + std::string(width - chars, ' ');
}

// The routing the ep shapes assume: measured per ep by a stored run (--routing), or balanced.
std::string routing_note(const PlanQuery& q, const Plan& plan) {
  if (!q.estimate.routing) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "routing imbalance %.2f (balanced: --routing RUN measures it)", q.estimate.memory.moe_imbalance);
    return buf;
  }
  std::string out = "routing as " + plan.routing_source + " measured it, busiest ep rank over the mean (step, memory):";
  std::vector<int> seen;
  for (const PlanEntry& e : plan.shapes) {
    if (e.shape.ep <= 1 || std::find(seen.begin(), seen.end(), e.shape.ep) != seen.end()) continue;
    seen.push_back(e.shape.ep);
  }
  std::sort(seen.begin(), seen.end());
  for (int ep : seen) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " ep %d: %.2f, %.2f;", ep, q.estimate.routing->step_imbalance(ep),
                  q.estimate.routing->memory_imbalance(ep));
    out += buf;
  }
  if (!seen.empty()) out.pop_back();
  return out;
}

void print_table(const PlanQuery& q, const Plan& plan, std::ostream& out) {
  const int64_t global =
      q.training.global_batch;  // 0: per shape micro_batch x dp
  out << "Model " << plan.model_name << " (" << format_count(static_cast<double>(plan.model_params))
      << " parameters) on " << q.nodes << " node(s) x " << q.gpus_per_node << " = "
      << plan.world_size << " ranks with " << format_bytes(static_cast<double>(q.device_memory_bytes))
      << " each\n";
  out << "seq_len " << q.training.seq_len << ", micro_batch " << q.training.micro_batch << ", global_batch "
      << (global > 0 ? std::to_string(global) : std::string("micro_batch x dp (per shape)")) << ", "
      << to_string(q.training.precision) << ", activation checkpointing "
      << to_string(q.training.activation_checkpointing) << ", attention "
      << to_string(q.estimate.memory.attention.value_or(default_attention_kernel(q.training.device))) << "\n\n";
  // GiB columns, or MiB when every total is below 1 GiB (tiny CPU models read 0.0 in GiB).
  int64_t largest = 0;
  for (const PlanEntry& e : plan.shapes) largest = std::max(largest, e.memory.total());
  const bool mib = largest < (int64_t{1} << 30);
  const double unit = mib ? 1024.0 * 1024 : 1024.0 * 1024 * 1024;
  auto mem = [&](int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / unit);
    return std::string(buf);
  };
  out << "Memory per rank in " << (mib ? "MiB" : "GiB")
      << " at its peak: total = params + grads + optim + acts (incl. logits) + bufs (FSDP "
         "gathers, comm) + reserve\n";
  // Pipelined plans gain a pp column and the bubble; the memory shown is the worst stage's.
  const bool piped = std::any_of(plan.shapes.begin(), plan.shapes.end(),
                                 [](const PlanEntry& e) { return e.shape[Axis::pp] > 1; });
  std::vector<std::pair<std::string, size_t>> cols = {
      {"#", 3},      {"dp_rep", 6}, {"dp_shard", 8}, {"cp", 3},       {"tp", 3},
      {"fits", 5},   {"total", 7},  {"params", 7},   {"grads", 6},    {"optim", 6},
      {"acts", 7},   {"bufs", 6},   {"rsv", 5},      {"step", 15},    {"tokens/s", 10},
      {"MFU", 6},    {"comm", 7}};
  if (piped) {
    cols.insert(cols.begin() + 1, {"pp", 4});
    cols.push_back({"bubble", 6});
  }
  // Mixture-of-experts plans gain ep (after tp) and the all-to-all's share of the step.
  const bool experts = std::any_of(plan.shapes.begin(), plan.shapes.end(), [](const PlanEntry& e) { return e.shape.ep > 1; });
  const size_t ep_col = piped ? 6 : 5;
  if (experts) {
    cols.insert(cols.begin() + static_cast<std::ptrdiff_t>(ep_col), {"ep", 4});
    cols.push_back({"a2a", 6});
  }
  for (const auto& [name, w] : cols) out << pad(name, w) << ' ';
  out << "\n";
  int rank = 0;
  for (const PlanEntry& e : plan.shapes) {
    ++rank;
    const MemoryBreakdown::Peak m = e.memory.at_peak();  // the parts held at the peak
    const double exposed = e.time.comm_s - e.time.hidden_comm_s;
    const double comm_share = e.time.step_s > 0 ? exposed / e.time.step_s : 0;
    std::vector<std::string> cells = {
        std::to_string(rank),
        std::to_string(e.shape[Axis::dp_replicate]),
        std::to_string(e.shape[Axis::dp_shard]),
        std::to_string(e.shape[Axis::cp]),
        std::to_string(e.shape[Axis::tp]),
        e.fits ? "yes" : "no",
        mem(m.total),
        mem(m.params),
        mem(m.grads),
        mem(m.optimizer),
        mem(m.activations),
        mem(m.buffers),
        mem(m.reserve),
        format_seconds(e.time.step_s) + (e.time.step_band > 0 ? " ±" + format_percent(e.time.step_band) : ""),
        format_count(e.time.tokens_per_s),
        format_percent(e.time.mfu),
        format_percent(comm_share)};
    if (piped) {
      cells.insert(cells.begin() + 1, std::to_string(e.shape[Axis::pp]));
      cells.push_back(e.shape[Axis::pp] > 1 ? format_percent(e.time.pp_bubble_fraction) : "-");
    }
    if (experts) {
      cells.insert(cells.begin() + static_cast<std::ptrdiff_t>(ep_col), std::to_string(e.shape.ep));
      cells.push_back(e.shape.ep > 1 ? format_percent(e.time.exposed_share_ep()) : "-");
    }
    for (size_t i = 0; i < cells.size(); ++i) out << pad(cells[i], cols[i].second) << ' ';
    out << (e.warnings.empty() ? "" : " !") << "\n";
  }
  out << "\nstep: predicted optimizer step (± the cluster's own noise while it calibrated, or the fit's median "
         "miss of its runs: no prediction is closer); comm: share of the step spent communicating; "
         "! : see warnings\n";
  if (piped)
    out << "pp: pipeline stages (" << to_string(q.training.pp_schedule)
        << (q.training.pp_schedule == PipelineSchedule::interleaved_1f1b ? ", " + std::to_string(q.training.pp_virtual_stages) + " chunks per rank" : std::string())
        << "); memory is the fullest stage's; bubble: share of the step the stages wait (in comm)\n";
  if (experts)
    out << "ep: expert-parallel ranks, borrowed from dp_shard x cp x tp (experts split over ep, FSDP-sharded over "
           "the rest); a2a: share of the step in the experts' all-to-all (in comm); "
        << routing_note(q, plan) << "\n";
  if (q.estimate.calibration) {
    out << "Calibrated: compute and collectives from the calibration of cluster "
        << q.estimate.calibration->fingerprint.id() << " measured " << q.estimate.calibration->measured_at
        << " (hardware defaults where it has no number)\n";
    if (q.estimate.calibration->step_band() > 0) {
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "While it calibrated, the same split step moved %.0f%% from its first measurement to its last, "
                    "and its steps varied %.0f%% (interquartile range): no prediction is closer than ±%.0f%%\n",
                    100 * q.estimate.calibration->step_drift, 100 * q.estimate.calibration->step_spread, 100 * q.estimate.calibration->step_band());
      out << buf;
    }
  } else {
    out << "Hardware defaults (no calibration: meshwork calibrate, then --calibration)\n";
  }
  if (q.estimate.fit) {
    char buf[200];
    const RunFit& fit = *q.estimate.fit;
    std::snprintf(buf, sizeof buf, "Fitted to %d stored run(s) of cluster %s on %s (%d unknowns)\n", fit.runs,
                  fit.cluster.c_str(), fit.base.c_str(), fit.unknowns);
    out << buf;
    std::snprintf(buf, sizeof buf,
                  "  its step error out of sample: median %.1f%%, worst %.1f%% (each of %d runs predicted by the fit of "
                  "the others); on the runs it learnt from: median %.1f%%, worst %.1f%%\n",
                  100 * fit.median_residual, 100 * fit.worst_residual, fit.judged_runs, 100 * fit.in_sample_median_residual,
                  100 * fit.in_sample_worst_residual);
    out << buf;
  }
  bool header = false;
  rank = 0;
  for (const PlanEntry& e : plan.shapes) {
    ++rank;
    for (const Diagnostic& d : e.warnings) {
      if (!header) out << "\nWarnings:\n";
      header = true;
      out << "  #" << rank << " (" << e.shape.compact() << ") " << d.text() << "\n";
    }
  }
  out << "\n" << plan.shapes.size() << " valid shape(s)";
  if (!plan.rejected.empty()) out << ", " << plan.rejected.size() << " refused by validation";
  // Planned for meshtrain; say which ones a user taking the shape to Accelerate cannot use.
  std::string refused_by_accelerate;
  for (size_t i = 0; i < plan.shapes.size(); ++i)
    if (!plan.shapes[i].accelerate_refusal.empty())
      refused_by_accelerate += (refused_by_accelerate.empty() ? "#" : ", #") + std::to_string(i + 1);
  if (!refused_by_accelerate.empty())
    out << "; Accelerate would refuse " << refused_by_accelerate << " (tp/cp with pure replication)";
  out << (plan.any_fits() ? "" : "; none fits in memory") << ".\n";
  out << "\nWhy " << explain_first(plan, q.device_memory_bytes) << "\n";
}

// --calibration: a file when one exists at that path, else a fingerprint id in the run store.
Result<Calibration> load_calibration(const std::string& value, const std::optional<std::string>& db) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(value, ec)) return read_calibration_file(value);
  const std::filesystem::path path = db ? std::filesystem::path(*db) : store::default_db_path();
  if (!std::filesystem::exists(path, ec))
    return Error{"--calibration", value, "a calibration file, or a fingerprint id stored in " + path.string() +
                                            " (which does not exist)"};
  auto st = store::RunStore::open(path);
  if (!st.ok()) return st.error();
  auto found = store::latest_calibration(**st, value);
  if (!found.ok()) return found.error();
  if (!*found)
    return Error{"--calibration", value,
                 "a calibration file, or a fingerprint id stored in " + path.string() + " (meshwork calibrate)"};
  return (*found)->calibration;
}

// --fit-runs: the fit of the cluster's finished runs in the store, on the same base as the plan
// (its calibration, or the defaults), judged as the workbench's planner judges it: on runs it did
// not learn from (store::fit_stored_runs). Too few runs for that is refused, not fitted in sample.
// `notes` hears which runs were left out and why.
Result<RunFit> fit_stored_runs(const std::string& value, const std::optional<Calibration>& calibration,
                               const std::optional<std::string>& db, std::ostream& notes) {
  const std::filesystem::path path = db ? std::filesystem::path(*db) : store::default_db_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Error{"--fit-runs", value, "runs stored in " + path.string() + " (which does not exist)"};
  auto st = store::RunStore::open(path);
  if (!st.ok()) return st.error();
  std::string cluster = value == "auto" ? "" : value;
  if (value == "auto" && calibration) cluster = calibration->fingerprint.node_set_id();
  auto stored = store::fit_stored_runs(st->get(), cluster, calibration);
  if (!stored.ok()) return stored.error();
  for (const std::string& why : stored->skipped) notes << "  note: left out of the fit: " << why << "\n";
  if (stored->stored_runs == 0)
    return Error{"--fit-runs", value,
                 "a cluster with finished runs in " + path.string() +
                     (cluster.empty() ? std::string() : " (none of cluster " + cluster + ")")};
  if (!stored->fit)
    return Error{"--fit-runs", value + " (cluster " + stored->cluster + ")",
                 stored->refusal + "; finish more runs on these nodes, or plan without --fit-runs (" +
                     (calibration ? "the calibration alone" : "the hardware defaults") + ")"};
  return *stored->fit;
}

// --routing RUN: the routing a stored run measured (store::measured_routing), for every ep.
Result<MeasuredRouting> stored_routing(const std::string& run, const std::optional<std::string>& db) {
  const std::filesystem::path path = db ? std::filesystem::path(*db) : store::default_db_path();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return Error{"--routing", run, "a run stored in " + path.string() + " (which does not exist)"};
  auto st = store::RunStore::open(path);
  if (!st.ok()) return st.error();
  Result<store::RunId> id = (*st)->resolve_run(run);
  if (!id.ok()) {
    Error e = id.error();
    e.field = "--routing";
    return e;
  }
  Result<MeasuredRouting> routing = store::measured_routing(**st, *id);
  if (!routing.ok()) {
    Error e = routing.error();
    e.field = "--routing";
    return e;
  }
  return routing;
}

}  // namespace

int plan_main(const Args& all_args) {
  static const std::vector<FlagSpec> kFlags = plan_flags();
  // --try K: its own flags and the launch's are taken out first (cli_trials.cpp).
  auto split = split_trial_flags(all_args);
  if (!split.ok()) return fail(split.error());
  const Args& args = split->first;
  const TrialFlags& trials = split->second;
  auto parsed = parse_args(args, kFlags, "meshwork plan");
  if (!parsed.ok()) return fail(parsed.error());
  const ParsedArgs& flags = *parsed;
  if (flags.help) {
    std::cout << kUsage;
    return kExitOk;
  }
  if (!flags.positional.empty())
    return fail(Error{"argument", flags.positional[0], "meshwork plan takes flags only (see --help)"});

  PlanQuery q;
  std::optional<interop::ImportedConfig> from;
  if (auto path = flags.value("--from")) {
    auto imported = read_plan_source(*path);
    if (!imported.ok()) return fail(imported.error());
    from = *imported;
  }
  std::optional<interop::ConfigFormat> export_format;
  if (auto f = flags.value("--export")) {
    auto format = interop::parse_config_format(*f, "--export");
    if (!format.ok()) return fail(format.error());
    export_format = *format;
    if (trials.k > 0) return fail(Error{"--try", std::to_string(trials.k), "cannot be combined with --export"});
    if (flags.has("--json")) return fail(Error{"--json", "", "cannot be combined with --export (the export is the output)"});
  } else {
    // Without an export nothing would carry them: refused rather than silently dropped.
    if (flags.has("--out")) return fail(Error{"--out", flags.value("--out").value_or(""), "only with --export FORMAT"});
    for (const std::string& name : kExportTrainingFlags)
      if (flags.has(name))
        return fail(Error{name, flags.value(name).value_or(""),
                          "only with --export FORMAT (the plan does not depend on it; the exported file carries it)"});
  }
  std::optional<std::string> model_flag = flags.value("--model");
  if (!model_flag && from && from->model) model_flag = from->model;
  if (!model_flag) return fail(Error{"--model", "missing", "required: a preset name or a path to a config.json"});
  auto model = load_model_spec(*model_flag);
  if (!model.ok()) {
    Error e = model.error();
    if (e.field == "model") e.field = "--model";
    return fail(e);
  }
  q.model = *model;

  const std::string whole = "a whole number >= 1";
  int64_t v = 0;
  // A flag wins; else the --from file's value; else the flag is required (or has its default).
  auto from_value = [&](std::optional<int> imported) -> int64_t { return from && imported ? *imported : 0; };
  std::optional<int> from_nodes, from_gpus;
  if (from && from->num_machines && from->num_processes && *from->num_processes % *from->num_machines == 0) {
    from_nodes = from->num_machines;
    from_gpus = *from->num_processes / *from->num_machines;
  }
  TRY_ASSIGN(v, flags.integer("--nodes", 1, kMaxCount, whole, from_nodes ? *from_nodes : std::optional<int64_t>{}));
  q.nodes = static_cast<int>(v);
  TRY_ASSIGN(v, flags.integer("--gpus-per-node", 1, kMaxCount, whole, from_gpus ? *from_gpus : std::optional<int64_t>{}));
  q.gpus_per_node = static_cast<int>(v);
  if (int64_t{q.nodes} * q.gpus_per_node > (1 << 20))
    return fail(Error{"--nodes", std::to_string(q.nodes),
                      "nodes x gpus-per-node must be at most 1048576"});
  std::optional<GpuKind> gpu;
  if (auto g = flags.value("--gpu")) TRY_ASSIGN(gpu, find_gpu_kind(*g, "--gpu"));
  const std::optional<std::string> memory = flags.value("--gpu-memory");
  if (!memory && !gpu)
    return fail(Error{"--gpu-memory", "missing", "required: a size such as 80GiB, 80GB or 81920MiB (or --gpu KIND)"});
  if (memory) TRY_ASSIGN(q.device_memory_bytes, parse_size(*memory, "--gpu-memory"));
  else q.device_memory_bytes = static_cast<int64_t>(gpu->memory_bytes);
  auto fallback = [&](std::optional<int> imported) -> std::optional<int64_t> {
    if (from && imported) return *imported;
    return std::nullopt;
  };
  TRY_ASSIGN(q.training.seq_len, flags.integer("--seq-len", 1, kMaxCount, whole, fallback(from ? from->seq_len : std::nullopt)));
  TRY_ASSIGN(q.training.micro_batch,
             flags.integer("--micro-batch", 1, kMaxCount, whole, fallback(from ? from->micro_batch : std::nullopt)));
  std::optional<int> from_global = from ? from->global_batch : std::nullopt;
  if (from && !from_global && from->grad_accum_steps && from->mesh) {
    // Axolotl gives the batch per rank: global = micro x accumulation x dp, when dp is known.
    const MeshShape& m = *from->mesh;
    if (m[Axis::dp_replicate] >= 1 && m[Axis::dp_shard] >= 1)
      from_global = static_cast<int>(q.training.micro_batch * *from->grad_accum_steps * m[Axis::dp_replicate] * m[Axis::dp_shard]);
    else if (*from->grad_accum_steps > 1)
      std::cerr << "  note: gradient_accumulation_steps " << *from->grad_accum_steps
                << " with dp_shard left to the planner: give --global-batch to plan that batch\n";
  }
  TRY_ASSIGN(q.training.global_batch, flags.integer("--global-batch", 1, kMaxCount, whole, from_value(from_global)));
  if (from) {
    if (from->precision) q.training.precision = *from->precision;
    if (from->activation_checkpointing) q.training.activation_checkpointing = *from->activation_checkpointing;
    if (from->device) q.training.device = *from->device;
  }
  if (auto p = flags.value("--precision")) TRY_ASSIGN(q.training.precision, parse_precision(*p, "--precision"));
  if (auto ac = flags.value("--activation-checkpointing"))
    TRY_ASSIGN(q.training.activation_checkpointing, parse_activation_checkpointing(*ac, "--activation-checkpointing"));
  if (auto d = flags.value("--device")) TRY_ASSIGN(q.training.device, parse_device(*d, "--device"));
  q.estimate.hardware = HardwareModel::for_device(q.training.device);
  if (gpu) {
    if (q.training.device != DeviceKind::cuda)
      return fail(Error{"--gpu", gpu->id, "GPUs: not with --device cpu"});
    q.estimate.hardware = hardware_for(*gpu);
  }
  if (auto a = flags.value("--attention")) {
    if (*a == "fused") q.estimate.memory.attention = AttentionKernel::fused;
    else if (*a == "materialized") q.estimate.memory.attention = AttentionKernel::materialized;
    else return fail(Error{"--attention", *a, "fused or materialized"});
  }
  if (auto r = flags.value("--reserve")) {
    if (*r == "0" || *r == "0B") {
      q.estimate.memory.reserve_bytes = 0;
    } else {
      int64_t bytes = 0;
      TRY_ASSIGN(bytes, parse_size(*r, "--reserve"));
      q.estimate.memory.reserve_bytes = bytes;
    }
  }
  const std::string axis_allowed = "a whole number >= 1 (leave it out to let the planner choose)";
  // pp: 1 unless asked for. `--pp auto` lets the planner choose the stages too (a pipelined
  // shape needs micro-batches: --global-batch), `--pp N` fixes them.
  q.fixed.set(Axis::pp, from && from->mesh && (*from->mesh)[Axis::pp] >= 1 ? (*from->mesh)[Axis::pp] : 1);
  if (auto p = flags.value("--pp")) {
    if (*p == "auto") {
      q.fixed.set(Axis::pp, 0);
    } else {
      int64_t size = 0;
      TRY_ASSIGN(size, flags.integer("--pp", 1, kMaxCount, "a whole number >= 1, or auto (the planner chooses)", 1));
      q.fixed.set(Axis::pp, static_cast<int>(size));
    }
  }
  if (auto sch = flags.value("--pp-schedule")) TRY_ASSIGN(q.training.pp_schedule, parse_pipeline_schedule(*sch, "--pp-schedule"));
  if (flags.value("--pp-virtual-stages")) {
    int64_t v = 0;
    TRY_ASSIGN(v, flags.integer("--pp-virtual-stages", 1, 64, "a whole number from 1 to 64", 1));
    q.training.pp_virtual_stages = static_cast<int>(v);
  }
  for (Axis a : kAxes) {
    if (a == Axis::pp) continue;
    std::string flag = "--" + std::string(axis_name(a));
    for (char& ch : flag)
      if (ch == '_') ch = '-';
    int64_t size = 0;
    // The --from file's sizes stay fixed as the user's own flags do (-1, "the rest", stays free).
    const int64_t imported = from && from->mesh && (*from->mesh)[a] >= 1 ? (*from->mesh)[a] : 0;
    TRY_ASSIGN(size, flags.integer(flag, 1, kMaxCount, axis_allowed, imported));
    q.fixed.set(a, static_cast<int>(size));
  }
  // ep: auto (0) unless given or imported; a dense model then plans ep 1 only.
  q.fixed.ep = from && from->mesh && from->mesh->ep > 1 ? from->mesh->ep : 0;
  if (auto e = flags.value("--ep"); e && *e != "auto") {
    int64_t size = 0;
    TRY_ASSIGN(size, flags.integer("--ep", 1, kMaxCount, "a whole number >= 1, or auto (the planner chooses)", 1));
    q.fixed.ep = static_cast<int>(size);
  }

  if (auto c = flags.value("--calibration")) {
    auto cal = load_calibration(*c, flags.value("--db"));
    if (!cal.ok()) return fail(cal.error());
    q.estimate.calibration = *cal;
  }

  if (auto f = flags.value("--fit-runs")) {
    auto fit = fit_stored_runs(*f, q.estimate.calibration, flags.value("--db"), std::cerr);
    if (!fit.ok()) return fail(fit.error());
    q.estimate.fit = std::make_shared<const RunFit>(std::move(*fit));
  }

  if (auto r = flags.value("--routing")) {
    auto routing = stored_routing(*r, flags.value("--db"));
    if (!routing.ok()) return fail(routing.error());
    if (Status matches = routing->check_matches(q.model); !matches) {
      Error e = matches.error();
      e.field = "--routing";
      return fail(e);
    }
    q.estimate.routing = std::make_shared<const MeasuredRouting>(std::move(*routing));
  }

  auto plan = make_plan(q);
  if (!plan.ok()) return fail(plan.error());
  if (trials.k > 0) return run_trials(q, *plan, *model_flag, trials);
  if (export_format) {
    PlanExportOptions options;
    options.format = *export_format;
    options.out = flags.value("--out");
    options.model = *model_flag;
    RunConfig config;
    if (from) from->apply_to(config);
    for (const auto& [name, value] : flags.given)  // a flag wins over the file
      if (std::find(kExportTrainingFlags.begin(), kExportTrainingFlags.end(), name) != kExportTrainingFlags.end())
        if (Status s = find_run_config_flag(name)->apply(config, value); !s.ok()) return fail(s.error());
    options.training = config.training;
    return export_plan(q, *plan, options);
  }
  if (flags.has("--json")) {
    nlohmann::json doc = plan_to_json(*plan);
    if (q.estimate.fit) doc["fit"] = to_json(*q.estimate.fit);  // its out-of-sample error with it
    std::cout << doc.dump(2) << "\n";
  } else {
    print_table(q, *plan, std::cout);
  }
  return plan->any_fits() ? kExitOk : kExitNoFit;
}

}  // namespace meshwork::cli
