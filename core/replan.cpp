#include "core/replan.h"

#include <algorithm>

#include "core/units.h"

namespace meshwork {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

PlanQuery query_for(const RunConfig& run, int nodes, int slots, const ReplanInput& in) {
  PlanQuery q;
  auto spec = model_spec_from_run_model(run.model);
  if (spec.ok()) q.model = *spec;
  q.training = run.training;
  q.nodes = nodes;
  q.gpus_per_node = slots;
  q.device_memory_bytes = in.device_memory_bytes;
  q.estimate = in.estimate;
  q.fixed = MeshShape{0, 0, 0, 0, run.mesh[Axis::pp] > 1 ? 0 : 1};
  return q;
}

bool fits(const Result<Plan>& plan) { return plan.ok() && plan->any_fits(); }

// What would make the run fit: the fewest extra nodes like the survivors (up to as many as were
// lost, and at least one), else activation checkpointing on the survivors alone.
std::string what_would_fit(const RunConfig& run, int nodes, int slots, int lost, const ReplanInput& in) {
  std::vector<std::string> options;
  for (int extra = 1; extra <= std::max(1, lost); ++extra) {
    if (fits(make_plan(query_for(run, nodes + extra, slots, in)))) {
      options.push_back("needs " + num(extra) + " more node" + (extra > 1 ? "s" : "") + " of " +
                        num(slots) + " ranks with " + format_bytes(in.device_memory_bytes) + " each");
      break;
    }
  }
  if (run.training.activation_checkpointing != ActivationCheckpointing::full) {
    RunConfig ac = run;
    ac.training.activation_checkpointing = ActivationCheckpointing::full;
    if (fits(make_plan(query_for(ac, nodes, slots, in))))
      options.push_back("fits with activation checkpointing (training.activation_checkpointing: full)");
  }
  if (options.empty()) return "no shape fits, nor with " + num(std::max(1, lost)) + " node(s) more or activation checkpointing";
  std::string out;
  for (size_t i = 0; i < options.size(); ++i) out += (i ? ", or " : "") + options[i];
  return out;
}

}  // namespace

Result<Replan> replan_for_survivors(const ReplanInput& in) {
  const RunConfig& run = in.run;
  if (run.nodes.empty())
    return Error{"nodes", "none", "a run launched on named nodes (a local run has no node to lose)"};
  for (const std::string& host : in.lost_hosts) {
    const bool known = std::any_of(run.nodes.begin(), run.nodes.end(),
                                   [&](const NodeConfig& n) { return n.host == host; });
    if (!known) {
      std::string hosts;
      for (const NodeConfig& n : run.nodes) hosts += (hosts.empty() ? "" : ", ") + n.host;
      return Error{"lost host", host, "one of the run's nodes (" + hosts + ")"};
    }
  }
  std::vector<NodeConfig> survivors;
  for (const NodeConfig& n : run.nodes)
    if (std::find(in.lost_hosts.begin(), in.lost_hosts.end(), n.host) == in.lost_hosts.end())
      survivors.push_back(n);
  if (survivors.empty())
    return Error{"lost host", std::to_string(in.lost_hosts.size()) + " of " + num(run.nodes.size()),
                 "at least one surviving node to resume on"}
        .as(ErrorKind::does_not_fit);
  if (in.device_memory_bytes <= 0)
    return Error{"device memory", num(in.device_memory_bytes), "one rank's memory in bytes (> 0)"};
  auto spec = model_spec_from_run_model(run.model);
  if (!spec.ok()) return spec.error();

  int slots = survivors.front().slots;
  for (const NodeConfig& n : survivors) slots = std::min(slots, n.slots);
  for (NodeConfig& n : survivors) n.slots = slots;
  const int nodes = static_cast<int>(survivors.size());
  const int lost = static_cast<int>(run.nodes.size()) - nodes;

  auto plan = make_plan(query_for(run, nodes, slots, in));
  const std::string where = num(nodes) + " surviving node" + (nodes > 1 ? "s" : "") + " x " + num(slots) + " ranks";
  if (!fits(plan)) {
    const std::string why = plan.ok() ? "no valid shape fits " + format_bytes(in.device_memory_bytes) + " per rank"
                                      : plan.error().message();
    return Error{"replan", where, why + "; " + what_would_fit(run, nodes, slots, lost, in)}.as(ErrorKind::does_not_fit);
  }
  Replan out;
  out.old_shape = run.mesh;
  out.chosen = plan->shapes.front();
  out.new_shape = out.chosen.shape;
  out.candidates = static_cast<int>(std::count_if(plan->shapes.begin(), plan->shapes.end(),
                                                  [](const PlanEntry& e) { return e.fits; }));
  out.run = run;
  out.run.nodes = survivors;
  out.run.mesh = out.new_shape;
  const int64_t dp_old = int64_t{run.mesh[Axis::dp_replicate]} * run.mesh[Axis::dp_shard];
  const int64_t dp_new = int64_t{out.new_shape[Axis::dp_replicate]} * out.new_shape[Axis::dp_shard];
  const int64_t micro = std::max(1, run.training.micro_batch);
  out.reason = out.new_shape.to_string() + " on " + where + ": the best of " + num(out.candidates) +
               " shapes that fit (" + format_bytes(out.chosen.memory.total()) + " of " +
               format_bytes(in.device_memory_bytes) + " per rank); global batch " +
               num(run.training.global_batch) + " kept, accumulation " +
               num(run.training.global_batch / std::max<int64_t>(1, micro * dp_old)) + " -> " +
               num(run.training.global_batch / std::max<int64_t>(1, micro * dp_new)) + " micro-batches";
  return out;
}

}  // namespace meshwork
