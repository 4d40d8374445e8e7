#include "core/run_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/time_estimate.h"

namespace meshwork {

namespace {

// One measured quantity: sum_u coef[u] * theta_u = measured.
struct Equation {
  std::vector<std::pair<size_t, double>> coef;  // (unknown, formula seconds)
  double measured = 0;
  double weight = 0;  // 1 / measured (relative errors)
};

// Solves the normal equations (A^T W^2 A) x = A^T W^2 m by Gaussian elimination with partial
// pivoting. A small ridge pulling each unknown towards its prior (1 for a factor: the formula as
// it is; 0 for per-step seconds) keeps the system solvable when two unknowns always appear
// together in the same proportion; it is 1e-12 of the diagonal, far below any residual that
// matters.
std::vector<double> least_squares(const std::vector<double>& prior, const std::vector<Equation>& eqs) {
  const size_t unknowns = prior.size();
  std::vector<std::vector<double>> m(unknowns, std::vector<double>(unknowns + 1, 0.0));
  for (const Equation& e : eqs) {
    const double w2 = e.weight * e.weight;
    for (const auto& [i, bi] : e.coef) {
      for (const auto& [j, bj] : e.coef) m[i][j] += w2 * bi * bj;
      m[i][unknowns] += w2 * bi * e.measured;
    }
  }
  for (size_t i = 0; i < unknowns; ++i) {
    const double ridge = 1e-12 * std::max(m[i][i], 1e-300);
    m[i][i] += ridge;
    m[i][unknowns] += ridge * prior[i];
  }
  for (size_t col = 0; col < unknowns; ++col) {
    size_t pivot = col;
    for (size_t r = col + 1; r < unknowns; ++r)
      if (std::abs(m[r][col]) > std::abs(m[pivot][col])) pivot = r;
    std::swap(m[col], m[pivot]);
    if (m[col][col] == 0) continue;
    for (size_t r = 0; r < unknowns; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      if (f == 0) continue;
      for (size_t c = col; c <= unknowns; ++c) m[r][c] -= f * m[col][c];
    }
  }
  std::vector<double> x = prior;
  for (size_t i = 0; i < unknowns; ++i)
    if (m[i][i] != 0) x[i] = m[i][unknowns] / m[i][i];
  return x;
}

// A key's formula values must spread at least this much (largest / smallest) over its
// observations for its per-step seconds to be an unknown: the split steps' 1 and 2..8
// micro-batches give 2x or more.
//
// That holds on every link, across nodes too: there a micro-batch costs more in a long run than
// between two short steps (the link's queue fills under sustained traffic), so the second split
// step is the run's own accumulation and theta and delta are read where the run is, not
// extrapolated; a factor alone would be a least-squares compromise between 1 micro-batch and the
// run's count, wrong at both. A delta that comes out negative (a micro-batch that costs more in
// the longer step) is still dropped and the factor carries both (the measurements behind this:
// docs/estimator.md, "Split steps").
constexpr double kSeparableSpread = 1.5;

}  // namespace

std::optional<TermCorrection> RunFit::factor(const FitKey& key) const {
  return lookup_factor(factors, key, /*any_link=*/true);
}

nlohmann::json to_json(const RunFit& fit) {
  nlohmann::json factors = nlohmann::json::array();
  for (const FitFactor& f : fit.factors) factors.push_back(to_json(f));
  nlohmann::json j = {{"cluster", fit.cluster},     {"base", fit.base},
                      {"runs", fit.runs},           {"factors", factors},
                      {"worst_residual", fit.worst_residual}, {"median_residual", fit.median_residual}};
  if (fit.out_of_sample)
    j["out_of_sample"] = {{"unknowns", fit.unknowns},
                          {"judged_runs", fit.judged_runs},
                          {"in_sample_worst_residual", fit.in_sample_worst_residual},
                          {"in_sample_median_residual", fit.in_sample_median_residual}};
  return j;
}

Result<RunFit> fit_runs(const std::vector<RunObservation>& runs, const std::optional<Calibration>& base) {
  std::map<FitKey, size_t> index;
  std::vector<FitKey> keys;
  std::vector<int> key_runs;
  auto unknown = [&](const FitKey& k) {
    auto [it, added] = index.emplace(k, keys.size());
    if (added) {
      keys.push_back(k);
      key_runs.push_back(0);
    }
    return it->second;
  };
  // The base is the calibration's formulas alone: its own step factors are what a fit of runs
  // replaces (estimate_time uses one or the other), so they must not be in the fitted b.
  std::optional<Calibration> raw = base;
  if (raw) raw->step_factors.clear();
  std::vector<Equation> eqs;
  int used = 0;
  for (const RunObservation& r : runs) {
    if (!r.query) continue;
    const RunMeasurement& m = r.measured;
    const double step = m.step_s();
    if (!(step > 0) || !std::isfinite(step)) continue;
    TimeQuery q = *r.query;
    q.calibration = raw;
    q.fit = nullptr;
    const TimeEstimate e = estimate_time(q);
    // A term under 0.1 % of the step is noise on either side: its equation would weigh a
    // microsecond's error like a whole step's.
    const double floor = 1e-3 * step;
    std::vector<size_t> touched;
    auto add = [&](std::initializer_list<FitTerm> terms, double measured) {
      if (!(measured > floor) || !std::isfinite(measured)) return;
      Equation eq;
      for (FitTerm t : terms) {
        const int ti = static_cast<int>(t);
        if (!(e.term_s[ti] > 0)) continue;
        const size_t u = unknown(e.term_key[ti]);
        eq.coef.push_back({u, e.term_s[ti]});
        touched.push_back(u);
      }
      if (eq.coef.empty()) return;
      eq.measured = measured;
      eq.weight = 1.0 / measured;
      eqs.push_back(std::move(eq));
    };
    const size_t before = eqs.size();
    add({FitTerm::compute}, m.compute_s);
    add({FitTerm::tp}, m.comm_s[Axis::tp]);
    add({FitTerm::dp_replicate}, m.comm_s[Axis::dp_replicate]);
    add({FitTerm::ep}, m.comm_ep_s);
    // meshtrain charges FSDP's collectives over dp_shard x cp to both axes (docs/metrics.md), so
    // only their sum separates FSDP from the ring: one equation with both terms.
    add({FitTerm::fsdp, FitTerm::expert_fsdp, FitTerm::cp_ring},
        m.comm_s[Axis::dp_shard] + m.comm_s[Axis::cp]);
    if (eqs.size() == before) continue;
    ++used;
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (size_t u : touched) ++key_runs[u];
  }
  if (eqs.empty())
    return Error{"runs", std::to_string(runs.size()) + " run(s)",
                 "finished runs that recorded compute_s and comm_s for at least 2 steps"};

  // Per-step seconds: one more unknown (index keys.size() + k) for each key whose formula values
  // spread enough to tell a per-step part from a proportional one.
  std::vector<double> lo(keys.size(), HUGE_VAL), hi(keys.size(), 0.0);
  for (const Equation& e : eqs)
    for (const auto& [u, b] : e.coef) {
      lo[u] = std::min(lo[u], b);
      hi[u] = std::max(hi[u], b);
    }
  std::vector<bool> per_step(keys.size());
  for (size_t u = 0; u < keys.size(); ++u) per_step[u] = hi[u] >= kSeparableSpread * lo[u];
  std::vector<double> theta, delta(keys.size(), 0.0);
  for (;;) {
    std::vector<size_t> delta_index(keys.size(), 0);
    std::vector<double> prior(keys.size(), 1.0);
    for (size_t u = 0; u < keys.size(); ++u)
      if (per_step[u]) {
        delta_index[u] = prior.size();
        prior.push_back(0.0);
      }
    std::vector<Equation> system = eqs;
    for (Equation& e : system) {
      const size_t n = e.coef.size();
      for (size_t k = 0; k < n; ++k)
        if (per_step[e.coef[k].first]) e.coef.push_back({delta_index[e.coef[k].first], 1.0});
    }
    const std::vector<double> x = least_squares(prior, system);
    theta.assign(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(keys.size()));
    bool dropped = false;
    for (size_t u = 0; u < keys.size(); ++u) {
      delta[u] = per_step[u] ? x[delta_index[u]] : 0.0;
      // Negative seconds per step, or a factor it pushed to <= 0, is noise read as structure.
      if (per_step[u] && (!(delta[u] >= 0) || !(theta[u] > 0))) {
        per_step[u] = false;
        dropped = true;
      }
    }
    if (!dropped) break;
  }
  // A term the equations cannot separate from another may come out negative: it then gets the
  // ratio its own equations give when the other terms are taken at their fitted values.
  for (size_t u = 0; u < theta.size(); ++u) {
    if (theta[u] > 0) continue;
    double num = 0, den = 0;
    for (const Equation& e : eqs) {
      double b = 0, rest = 0;
      for (const auto& [i, bi] : e.coef) {
        if (i == u)
          b += bi;
        else
          rest += std::max(theta[i], 0.0) * bi + delta[i];
      }
      if (b <= 0) continue;
      const double w2 = e.weight * e.weight;
      num += w2 * b * std::max(e.measured - rest, 0.0);
      den += w2 * b * b;
    }
    theta[u] = den > 0 && num > 0 ? num / den : 1.0;
  }

  RunFit fit;
  fit.base = base ? "calibration " + base->fingerprint.id() : "defaults";
  fit.runs = used;
  fit.unknowns = static_cast<int>(keys.size() + std::count(per_step.begin(), per_step.end(), true));
  for (const auto& [key, u] : index) fit.factors.push_back({key, theta[u], key_runs[u], delta[u]});
  std::vector<double> residuals;
  for (const Equation& e : eqs) {
    double fitted = 0;
    for (const auto& [i, bi] : e.coef) fitted += theta[i] * bi + delta[i];
    residuals.push_back(std::abs(fitted - e.measured) / e.measured);
  }
  fit.worst_residual = *std::max_element(residuals.begin(), residuals.end());
  fit.median_residual = median(residuals);
  return fit;
}

Result<RunFit> fit_runs_out_of_sample(const std::vector<RunObservation>& runs, const std::optional<Calibration>& base) {
  auto all = fit_runs(runs, base);
  if (!all) return all.error();
  const std::string counted = std::to_string(all->runs) + (all->runs == 1 ? " run" : " runs");
  const std::string needed = "a fit of " + std::to_string(all->unknowns) + " unknowns needs " +
                             std::to_string(all->unknowns + 1) +
                             " runs or more: fewer leave it no run to be judged on that it did not learn from";
  if (all->runs <= all->unknowns) return Error{"runs", counted, needed};
  std::optional<Calibration> raw = base;
  if (raw) raw->step_factors.clear();
  std::vector<double> errors;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunObservation& held = runs[i];
    const double measured = held.measured.step_s();
    if (!held.query || !(measured > 0) || !std::isfinite(measured)) continue;
    std::vector<RunObservation> others;
    others.reserve(runs.size() - 1);
    for (size_t k = 0; k < runs.size(); ++k)
      if (k != i) others.push_back(runs[k]);
    auto rest = fit_runs(others, base);
    if (!rest || rest->runs < rest->unknowns) continue;  // the others alone cannot be fitted
    TimeQuery q = *held.query;
    q.calibration = raw;
    q.fit = std::make_shared<const RunFit>(std::move(*rest));
    const double predicted = estimate_time(q).step_s;
    errors.push_back(std::abs(predicted - measured) / measured);
  }
  if (errors.empty()) return Error{"runs", counted, needed};
  RunFit fit = std::move(*all);
  fit.in_sample_worst_residual = fit.worst_residual;
  fit.in_sample_median_residual = fit.median_residual;
  fit.worst_residual = *std::max_element(errors.begin(), errors.end());
  fit.median_residual = median(errors);
  fit.judged_runs = static_cast<int>(errors.size());
  fit.out_of_sample = true;
  return fit;
}

PredictionCheck check_prediction(const TimeEstimate& p, const RunMeasurement& m) {
  PredictionCheck c;
  c.predicted_step_s = p.step_s;
  c.measured_step_s = m.step_s();
  c.predicted_compute_s = p.compute_s;
  c.measured_compute_s = m.compute_s;
  for (Axis a : kAxes) {
    c.predicted_comm_s[a] = p.axis(a).seconds;
    c.measured_comm_s[a] = m.comm_s[a];
  }
  return c;
}

}  // namespace meshwork
