// The factors that correct the time model's terms (core/time_estimate.h) for the conditions a
// cluster really runs them under. Two sources make them, on the same keys:
//   - a calibration's own short training steps (Calibration::step_factors, core/calibration.h):
//     `meshtrain calibrate` trains a model cut to at most 4 layers on every split of a node's
//     ranks, at 1 micro-batch and at the run's accumulation on the split (2 to 8);
//   - the cluster's stored runs (fit_runs, core/run_fit.h).
// Both are "measured = factor x formula seconds + per-step seconds" of one term under one set of
// conditions (TermCorrection).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/link_kind.h"
#include "core/run_config.h"

namespace meshwork {

// ep: a mixture of experts' all-to-alls over the ep group (a = ep). expert_fsdp: with ep > 1,
// the experts' own FSDP gathers and reduce-scatters over efsdp (a = efsdp), beside the dense
// part's (fsdp). Their groups stride over the ranks ep borrows and run between the all-to-alls,
// and they cost more against their formula than the dense FSDP's (docs/estimator.md, "Split
// steps"): a term of their own, so that their factor corrects them alone and not the dense part
// that a shape's dense FSDP factor already reads.
enum class FitTerm { compute = 0, tp = 1, cp_ring = 2, fsdp = 3, dp_replicate = 4, ep = 5, expert_fsdp = 6 };
inline constexpr int kFitTermCount = 7;
// "compute" | "tp" | "cp_ring" | "fsdp" | "dp_replicate" | "ep" | "expert_fsdp"
std::string_view to_string(FitTerm t);
Result<FitTerm> parse_fit_term(std::string_view text, std::string_view field = "term");

// The conditions a factor holds for. compute: the matmuls split tp x cp ways (a = tp, b = cp) at
// a precision, and for a mixture of experts the ep it runs at (c = ep; 1 for dense models): at
// each ep a rank's step does other work around its experts (the routing, the copies' packing, a
// different expert block), which the formula's FLOPs do not see alike; communication: the link the group crosses and its size (a = n), and b = 1, except
// dp_replicate, whose two ways of reducing differ in kind: b = kDdpAllReduce (the whole gradient
// once per step, in 25 MiB buckets) or kHsdpAllReduce (FSDP's shard, one all-reduce per module,
// between the backward's reduce-scatters), and tp, whose collectives sit between the other
// in-step groups' exchanges: b = cp, c = dp_shard. A tp collective waits for its slowest member,
// and members that also wait on ring steps or FSDP gathers reach it further apart, so the same tp
// group costs a different share of its formula beside each of them; one factor per group size
// alone mispredicts the shapes that mix them (the measurements: docs/estimator.md, "Split steps").
inline constexpr int kDdpAllReduce = 1;
inline constexpr int kHsdpAllReduce = 2;

struct FitKey {
  FitTerm term = FitTerm::compute;
  LinkKind link = LinkKind::intra_node;
  int a = 1, b = 1;
  Precision precision = Precision::fp32;  // compute only (communication: always fp32)
  int c = 1;
  bool operator==(const FitKey& o) const {
    return term == o.term && link == o.link && a == o.a && b == o.b && c == o.c && precision == o.precision;
  }
  bool operator<(const FitKey& o) const;
  // "compute fp32 tp 2 cp 1", "compute fp32 tp 1 cp 1 ep 4", "fsdp intra_node n=4", "expert_fsdp intra_node n=2",
  // "dp_replicate inter_node n=2 hsdp", "tp intra_node n=2 cp 2 dp_shard 1"
  std::string to_string() const;
};

// What one term of a step really costs against its formula b (seconds):
//   measured = factor x b + per_step_s.
// factor carries what grows with the work the formula counts (layers, micro-batches, bytes);
// per_step_s what a step pays once whatever that work: the optimizer and the gradient norm
// between the compute, a replica waiting on the others before the step's last all-reduce. Only
// observations where b varies enough (micro-batches 1 and 2 in the calibration's split steps)
// separate the two; elsewhere per_step_s is 0 and the factor carries both.
struct TermCorrection {
  double factor = 1;
  double per_step_s = 0;
  double apply(double formula_s) const { return factor * formula_s + per_step_s; }
};

struct FitFactor {
  FitKey key;
  double factor = 1;          // measured / formula (of the part that grows with the formula)
  int runs = 0;               // runs whose equations held this term
  double per_step_s = 0;      // seconds added once per step (TermCorrection)
  TermCorrection correction() const { return {factor, per_step_s}; }
};

// The middle value of v (the mean of the two middle ones for an even count); v must not be empty.
double median(std::vector<double> v);

// The correction for `key` among `factors`: that key's; else the median factor and median
// per_step_s of the same term over keys with the same link (for compute: the same precision,
// first those with the same tp and cp at any ep, then the same split tp x cp at the same ep, then
// at any ep; for dp_replicate: first the same way of reducing; for
// tp: first the same group size);
// else, when `any_link`, the same term on any link; unset otherwise.
std::optional<TermCorrection> lookup_factor(const std::vector<FitFactor>& factors, const FitKey& key, bool any_link);

// {"term", "factor", "runs"}, "per_step_s" when not 0, and, for compute, "precision", "tp", "cp"
// and "ep" (when not 1; absent reads as 1);
// else "link", "group_size", for dp_replicate "hsdp" (true or false), and for tp "cp" and
// "dp_shard" (read as 1 when absent, as calibrations stored before they existed have them).
// Calibrations stored before expert_fsdp was a term of its own wrote it as an fsdp factor with
// "efsdp": true (then on the whole FSDP time of such shapes, experts and dense part): read as
// expert_fsdp, the part it mostly corrected.
nlohmann::json to_json(const FitFactor& f);
// An Error names `where`'s field, the value and what is allowed.
Result<FitFactor> fit_factor_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace meshwork
