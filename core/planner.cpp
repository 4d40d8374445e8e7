#include "core/planner.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace meshwork {

bool Plan::any_fits() const {
  return std::any_of(shapes.begin(), shapes.end(), [](const PlanEntry& e) { return e.fits; });
}

std::vector<MeshShape> enumerate_shapes(int64_t world, const MeshShape& fixed) {
  std::vector<MeshShape> out;
  if (world < 1) return out;
  // Candidates for one axis: its fixed size, or every divisor of what is left.
  auto candidates = [](int fixed_size, int64_t left) {
    std::vector<int> c;
    if (fixed_size >= 1) {
      if (left % fixed_size == 0) c.push_back(fixed_size);
      return c;
    }
    for (int64_t d = 1; d <= left; ++d)
      if (left % d == 0) c.push_back(static_cast<int>(d));
    return c;
  };
  // pp outermost, as in the mesh (a free pp is enumerated only when the caller leaves it free:
  // PlanQuery's default fixes it at 1).
  for (int p : candidates(fixed[Axis::pp], world))
    for (int r : candidates(fixed[Axis::dp_replicate], world / p))
      for (int s : candidates(fixed[Axis::dp_shard], world / p / r))
        for (int c : candidates(fixed[Axis::cp], world / p / r / s)) {
          const int64_t t = world / p / r / s / c;
          if (fixed[Axis::tp] >= 1 && fixed[Axis::tp] != t) continue;
          out.push_back(MeshShape{r, s, c, static_cast<int>(t), p});
        }
  return out;
}

namespace {

// The user gave every axis: that one shape is judged by the rules as it is.
bool every_axis_given(const MeshShape& fixed) {
  return std::all_of(kAxes.begin(), kAxes.end(), [&](Axis a) { return fixed[a] >= 1; });
}

Status check_input(const PlanQuery& q) {
  auto at_least_one = [](const char* field, int64_t v) -> Status {
    if (v < 1) return Error{field, std::to_string(v), "must be at least 1"};
    return Status::Ok();
  };
  for (auto st : {at_least_one("nodes", q.nodes), at_least_one("gpus_per_node", q.gpus_per_node),
                  at_least_one("seq_len", q.training.seq_len), at_least_one("micro_batch", q.training.micro_batch)})
    if (!st.ok()) return st;
  if (q.device_memory_bytes < 1)
    return Error{"gpu_memory", std::to_string(q.device_memory_bytes), "must be more than 0"};
  if (q.training.global_batch < 0)
    return Error{"global_batch", std::to_string(q.training.global_batch), "must be at least 1"};
  if (q.estimate.routing)
    if (Status matches = q.estimate.routing->check_matches(q.model); !matches) return matches.error();
  const int64_t world = int64_t{q.nodes} * q.gpus_per_node;
  int64_t fixed_product = 1;
  if (q.fixed.ep < 0)
    return Error{std::string(kEpName), std::to_string(q.fixed.ep),
                 "must be a whole number >= 1 (or absent to let the planner choose)"};
  for (Axis a : kAxes) {
    const int v = q.fixed.size(a);
    if (v < -1)
      return Error{std::string(axis_name(a)), std::to_string(v),
                   "must be a whole number >= 1 (or -1 / absent to let the planner choose)"};
    if (v >= 1) fixed_product *= v;
  }
  std::string fixed_text;
  for (Axis a : kAxes)
    if (q.fixed.size(a) >= 1 && !(a == Axis::pp && q.fixed.size(a) == 1))
      fixed_text += (fixed_text.empty() ? "" : " ") + std::string(axis_name(a)) + "=" +
                    std::to_string(q.fixed.size(a));
  const bool fully_fixed = every_axis_given(q.fixed);
  if (!fully_fixed && world % fixed_product != 0)  // a fully given shape is judged by the rules
    return Error{"mesh", fixed_text,
                 "the fixed axes multiply to " + std::to_string(fixed_product) +
                     ", which does not divide the world size " + std::to_string(world) +
                     " (nodes x gpus_per_node)"};
  return Status::Ok();
}

}  // namespace

std::vector<int> expert_degrees(const MeshShape& shape, int fixed_ep, const ModelSpec& model) {
  if (fixed_ep >= 1) return {fixed_ep};
  if (!model.is_moe()) return {1};
  const int64_t limit = std::gcd(static_cast<int64_t>(shape.expert_block_size()), model.moe.num_experts);
  std::vector<int> out;
  for (int64_t d = 1; d <= limit; ++d)
    if (limit % d == 0) out.push_back(static_cast<int>(d));
  return out;
}

Result<Plan> make_plan(const PlanQuery& q) {
  if (Status st = check_input(q); !st.ok()) return st.error();
  Plan plan;
  plan.world_size = int64_t{q.nodes} * q.gpus_per_node;
  plan.model_name = q.model.name;
  plan.model_params = q.model.parameter_count();
  if (q.estimate.routing) plan.routing_source = q.estimate.routing->source();

  RunConfig config;
  config.training = q.training;
  Placement placement;
  placement.world_size = plan.world_size;
  placement.ranks_per_node = q.gpus_per_node;
  placement.links = {q.estimate.hardware.intra_node_bytes_per_s, q.estimate.hardware.inter_node_bytes_per_s};

  // Every axis given: that one shape, judged by the rules as it is (a product that misses the
  // world size is the mesh rule's refusal, in its words, not an empty plan).
  const bool fully_fixed = every_axis_given(q.fixed);
  std::vector<MeshShape> candidates;
  for (const MeshShape& five : fully_fixed ? std::vector<MeshShape>{q.fixed} : enumerate_shapes(plan.world_size, q.fixed))
    for (int ep : expert_degrees(five, q.fixed.ep, q.model)) {
      MeshShape shape = five;
      shape.ep = ep;
      candidates.push_back(shape);
    }
  for (const MeshShape& shape : candidates) {
    config.mesh = shape;
    LayoutCheck checked = ParallelLayout::check(config, &q.model, placement, q.trainer);
    if (!checked.ok()) {
      plan.rejected.push_back({shape, checked.report.errors()});
      continue;
    }
    const ParallelLayout& layout = *checked.layout;
    PlanEntry e;
    e.shape = layout.shape();
    e.warnings = layout.warnings();
    e.accelerate_refusal = layout.accelerate_refusal();

    e.memory = worst_stage_memory(layout, q.model, q.estimate);
    e.fits = e.memory.fits(q.device_memory_bytes);
    e.time = estimate_time(layout, q.model, q.estimate);
    if (q.model.is_moe() && e.shape.ep > 1) {
      const MeasuredRouting* routing = q.estimate.routing.get();
      e.step_imbalance = routing ? routing->step_imbalance(e.shape.ep) : q.estimate.memory.moe_imbalance;
      e.memory_imbalance = routing ? routing->memory_imbalance(e.shape.ep) : q.estimate.memory.moe_imbalance;
    }
    plan.shapes.push_back(std::move(e));
  }

  if (plan.shapes.empty()) {
    if (plan.rejected.empty())
      return Error{"mesh", q.fixed.compact(),
                   "no shape with the fixed axes multiplies to the world size " + std::to_string(plan.world_size)};
    // Nothing valid: report the first refusal in the user's terms.
    const RejectedShape& first = plan.rejected.front();
    const Diagnostic& d = first.errors.front();
    return Error{d.field, d.value,
                 fully_fixed ? d.message
                             : d.message + " (no shape with the fixed axes is valid; first tried " +
                                   first.shape.to_string() + ")"};
  }

  // Fits first, then predicted tokens/s; ties: less memory, then the shape itself (stable).
  std::stable_sort(plan.shapes.begin(), plan.shapes.end(),
                   [](const PlanEntry& a, const PlanEntry& b) {
                     if (a.fits != b.fits) return a.fits;
                     if (a.time.tokens_per_s != b.time.tokens_per_s)
                       return a.time.tokens_per_s > b.time.tokens_per_s;
                     return a.memory.total() < b.memory.total();
                   });
  return plan;
}

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json shapes = nlohmann::json::array();
  for (const PlanEntry& e : plan.shapes) {
    nlohmann::json warnings = nlohmann::json::array();
    for (const Diagnostic& d : e.warnings) warnings.push_back(d.text());
    // pp's keys only for pipelined shapes (a plan without pp reads as it always did).
    auto listed = [&](Axis a) { return a != Axis::pp || e.shape[Axis::pp] > 1; };
    nlohmann::json comm;
    for (Axis a : kAxes)
      if (listed(a)) comm[std::string(axis_name(a))] = e.time.axis(a).seconds;
    if (e.shape.ep > 1) comm[std::string(kEpName)] = e.time.comm_ep.seconds;
    // Which numbers the calibration gave (the others are HardwareModel's defaults).
    nlohmann::json calibrated = {{"compute", e.time.compute_calibrated}};
    for (Axis a : kAxes)
      if (listed(a)) calibrated[std::string(axis_name(a))] = e.time.comm_calibrated[a];
    nlohmann::json fitted = {{"compute", e.time.compute_fitted}};
    for (Axis a : kAxes)
      if (listed(a)) fitted[std::string(axis_name(a))] = e.time.comm_fitted[a];
    const MemoryBreakdown::Peak peak = e.memory.at_peak();  // parts sum to the total
    nlohmann::json entry = {
        {"dp_replicate", e.shape[Axis::dp_replicate]},
        {"dp_shard", e.shape[Axis::dp_shard]},
        {"cp", e.shape[Axis::cp]},
        {"tp", e.shape[Axis::tp]},
        {"fits", e.fits},
        {"memory_bytes",
         {{"params", peak.params},
          {"grads", peak.grads},
          {"optimizer", peak.optimizer},
          {"activations", peak.activations},
          {"buffers", peak.buffers},
          {"reserve", peak.reserve},
          {"total", peak.total}}},
        {"step_time_s", e.time.step_s},
        {"step_band", e.time.step_band},
        {"compute_s", e.time.compute_s},
        {"tokens_per_s", e.time.tokens_per_s},
        {"mfu", e.time.mfu},
        {"comm_s", comm},
        {"calibrated", calibrated},
        {"fitted", fitted},
        {"warnings", warnings},
        {"accelerate", e.accelerate_refusal.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.accelerate_refusal)},
    };
    if (e.shape.ep > 1) {  // written only for expert-parallel shapes: dense plans read as before
      entry["ep"] = e.shape.ep;
      entry["efsdp"] = e.shape.efsdp_size();
      entry["routing_imbalance"] = {{"step", e.step_imbalance}, {"memory", e.memory_imbalance}};
    }
    if (e.shape[Axis::pp] > 1) {  // written only for pipelined shapes: plans without pp read as before
      entry["pp"] = e.shape[Axis::pp];
      entry["pp_stage"] = e.memory.pp_stage;  // the stage whose memory is shown (the largest)
      entry["pp_bubble"] = e.time.pp_bubble_fraction;
    }
    shapes.push_back(std::move(entry));
  }
  nlohmann::json out = {{"world_size", plan.world_size},
                        {"model", {{"name", plan.model_name}, {"params", plan.model_params}}},
                        {"shapes", shapes}};
  if (!plan.routing_source.empty()) out["routing"] = plan.routing_source;
  return out;
}

namespace {

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100.0 * x);
  return buf;
}

std::string count(double x) {
  char buf[32];
  if (x >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", x / 1e6);
  else if (x >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", x / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", x);
  return buf;
}

}  // namespace

std::string explain_first(const Plan& plan, int64_t device_memory_bytes) {
  if (plan.shapes.empty()) return "";
  const PlanEntry& best = plan.shapes.front();
  std::string out = "#1 " + best.shape.to_string() + ": ";
  if (!best.fits) {
    // What the smallest shape needs, and whether the model state alone (AdamW's 16 B per
    // parameter spread over every rank) already exceeds a rank: then only more ranks help.
    const PlanEntry* least = &best;
    for (const PlanEntry& e : plan.shapes)
      if (e.memory.total() < least->memory.total()) least = &e;
    const double state = 16.0 * static_cast<double>(plan.model_params) / static_cast<double>(std::max<int64_t>(1, plan.world_size));
    out += "nothing fits in " + gib(device_memory_bytes) + " per rank; the smallest, " + least->shape.compact() + ", needs " +
           gib(least->memory.total()) + ". ";
    out += state > static_cast<double>(device_memory_bytes)
               ? "The model state alone (16 B per parameter: fp32 weights, gradients, AdamW moments) is " +
                     gib(static_cast<int64_t>(state)) + " per rank over all " + std::to_string(plan.world_size) +
                     " ranks: plan more nodes."
               : "Try --activation-checkpointing full, a shorter sequence, or more nodes.";
    return out;
  }
  int fitting = 0;
  for (const PlanEntry& e : plan.shapes) fitting += e.fits ? 1 : 0;
  out += "fits (" + gib(best.memory.total()) + " of " + gib(device_memory_bytes) + " per rank) and is the fastest of " +
         std::to_string(fitting) + " fitting shape(s) at " + count(best.time.tokens_per_s) + " tokens/s, MFU " +
         percent(best.time.mfu);
  if (plan.shapes.size() > 1 && plan.shapes[1].fits && plan.shapes[1].time.tokens_per_s > 0)
    out += ", " + percent(best.time.tokens_per_s / plan.shapes[1].time.tokens_per_s - 1.0) + " ahead of #2 (" +
           plan.shapes[1].shape.compact() + ")";
  out += ".";
  // The largest share of the step spent waiting on one axis, so the reader sees what limits it.
  std::string worst_axis;
  double worst_share = 0;
  for (Axis a : kAxes)
    if (best.time.exposed_share(a) > worst_share) {
      worst_share = best.time.exposed_share(a);
      worst_axis = std::string(axis_name(a));
    }
  if (best.time.exposed_share_ep() > worst_share) {
    worst_share = best.time.exposed_share_ep();
    worst_axis = std::string(kEpName);
  }
  if (worst_share > 0.01) out += " Most exposed communication: " + worst_axis + " (" + percent(worst_share) + " of the step).";
  const MeshShape& s = best.shape;
  if (s.ep > 1) {
    out += " Its experts are split over ep=" + std::to_string(s.ep) + " ranks borrowed from dp_shard*cp*tp=" +
           std::to_string(s.expert_block_size()) + " and FSDP-sharded over efsdp=" + std::to_string(s.efsdp_size()) +
           "; the all-to-all (" + percent(best.time.exposed_share_ep()) + " of the step) " +
           (best.time.comm_ep.crosses_nodes ? "crosses nodes (inter-node links)" : "stays inside a node") + ".";
  }
  // Against the best of the other kind: with ep for a dense-expert choice, without for an ep one.
  const bool best_ep = s.ep > 1;
  for (const PlanEntry& e : plan.shapes) {
    if ((e.shape.ep > 1) == best_ep || !e.fits) continue;
    out += std::string(" The best ") + (best_ep ? "without" : "with") + " expert parallel, " + e.shape.compact() + ", reaches " +
           count(e.time.tokens_per_s) + " tokens/s (" + gib(e.memory.total()) + ").";
    break;
  }
  return out;
}

}  // namespace meshwork
