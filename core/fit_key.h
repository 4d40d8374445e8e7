// The factors that correct the time model's terms (core/time_estimate.h) for the conditions a
// cluster really runs them under. Two sources make them, on the same keys:
//   - a calibration's own short training steps (Calibration::step_factors, core/calibration.h):
//     `meshtrain calibrate` trains a model cut to 2 layers on every split of a node's ranks;
//   - the cluster's stored runs (fit_runs, core/run_fit.h).
// Both are "measured seconds / formula seconds" of one term under one set of conditions.
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

enum class FitTerm { compute = 0, tp = 1, cp_ring = 2, fsdp = 3, dp_replicate = 4 };
inline constexpr int kFitTermCount = 5;
std::string_view to_string(FitTerm t);  // "compute" | "tp" | "cp_ring" | "fsdp" | "dp_replicate"
Result<FitTerm> parse_fit_term(std::string_view text, std::string_view field = "term");

// The conditions a factor holds for. compute: the matmuls split tp x cp ways (a = tp, b = cp) at
// a precision; communication: the link the group crosses and its size (a = n, b = 1).
struct FitKey {
  FitTerm term = FitTerm::compute;
  LinkKind link = LinkKind::intra_node;
  int a = 1, b = 1;
  Precision precision = Precision::fp32;  // compute only (communication: always fp32)
  bool operator==(const FitKey& o) const {
    return term == o.term && link == o.link && a == o.a && b == o.b && precision == o.precision;
  }
  bool operator<(const FitKey& o) const;
  std::string to_string() const;  // "compute fp32 tp 2 cp 1", "fsdp intra_node n=4"
};

struct FitFactor {
  FitKey key;
  double factor = 1;          // measured / formula
  int runs = 0;               // runs whose equations held this term
};

// The factor for `key` among `factors`: that key's; else the median factor of the same term over
// keys with the same link (for compute: the same precision, first those with the same split
// tp x cp); else, when `any_link`, the same term on any link; unset otherwise.
std::optional<double> lookup_factor(const std::vector<FitFactor>& factors, const FitKey& key, bool any_link);

// {"term", "factor", "runs"} and, for compute, "precision", "tp", "cp"; else "link", "group_size".
nlohmann::json to_json(const FitFactor& f);
// An Error names `where`'s field, the value and what is allowed.
Result<FitFactor> fit_factor_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace meshwork
