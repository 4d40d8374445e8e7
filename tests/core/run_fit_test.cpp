// The fit of the time model to runs (core/run_fit.h): hand-made observations whose measurements
// are known multiples of the formulas' terms, so the factors and predictions have closed forms.
#include "core/run_fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "core/time_estimate.h"

using namespace meshwork;

namespace {

std::shared_ptr<const ModelSpec> tiny() {
  static auto spec = std::make_shared<const ModelSpec>(*load_model_spec("tiny"));
  return spec;
}

TimeQuery query(MeshShape shape, int gpus_per_node = 4) {
  TimeQuery q;
  q.model = *tiny();
  q.shape = shape;
  q.gpus_per_node = gpus_per_node;
  q.training.seq_len = 256;
  q.training.micro_batch = 1;
  q.training.global_batch = 8;
  q.training.precision = Precision::fp32;
  q.hardware = HardwareModel::cpu();
  return q;
}

// A run whose measurement is the formula's terms times the given factors (fsdp split over
// dp_shard and cp as the estimator splits it, so the sum is what meshtrain would report).
RunObservation observed(MeshShape shape, double k_compute, double k_tp, double k_ring, double k_fsdp,
                        double k_rep, int gpus_per_node = 4) {
  RunObservation o;
  o.query = std::make_shared<TimeQuery>(query(shape, gpus_per_node));
  const TimeEstimate e = estimate_time(*o.query);
  auto term = [&](FitTerm t) { return e.term_s[static_cast<int>(t)]; };
  o.measured.compute_s = k_compute * term(FitTerm::compute);
  o.measured.comm_s[Axis::tp] = k_tp * term(FitTerm::tp);
  o.measured.comm_s[Axis::dp_replicate] = k_rep * term(FitTerm::dp_replicate);
  // All of fsdp + ring on cp: only the sum of the two axes enters the fit.
  o.measured.comm_s[Axis::cp] = k_ring * term(FitTerm::cp_ring) + k_fsdp * term(FitTerm::fsdp);
  o.measured.steps = 5;
  o.name = shape.compact();
  return o;
}

double factor_of(const RunFit& fit, FitTerm term, int a, int b = 1, LinkKind link = LinkKind::intra_node) {
  auto f = fit.factor(FitKey{term, link, a, b, Precision::fp32});
  EXPECT_TRUE(f.has_value()) << "no factor for " << FitKey{term, link, a, b, Precision::fp32}.to_string();
  return f ? f->factor : -1;
}

// FSDP over 4 CPU ranks of one node with ep `ep`, a mixture of experts at balanced routing.
TimeQuery moe_query(int ep, int64_t global_batch) {
  static const ModelSpec moe = *load_model_spec("qwen3-30b-a3b");
  TimeQuery q;
  q.model = moe;
  q.shape = MeshShape{1, 4, 1, 1};
  q.shape.ep = ep;
  q.gpus_per_node = 4;
  q.training.seq_len = 256;
  q.training.micro_batch = 1;
  q.training.global_batch = global_batch;
  q.training.precision = Precision::fp32;
  q.hardware = HardwareModel::cpu();
  q.moe_imbalance = 1.0;
  return q;
}

}  // namespace

TEST(RunFit, TermsOfTheEstimateAddUpToIt) {
  const TimeEstimate e = estimate_time(query({1, 2, 2, 1}));
  const double fsdp = e.term_s[static_cast<int>(FitTerm::fsdp)];
  const double ring = e.term_s[static_cast<int>(FitTerm::cp_ring)];
  EXPECT_GT(fsdp, 0);
  EXPECT_GT(ring, 0);
  EXPECT_DOUBLE_EQ(e.term_s[static_cast<int>(FitTerm::compute)], e.compute_s);
  // FSDP is split over dp_shard and cp after the fact; the two axes hold fsdp + ring.
  EXPECT_NEAR(e.axis(Axis::dp_shard).seconds + e.axis(Axis::cp).seconds, fsdp + ring, 1e-12 * (fsdp + ring));
  EXPECT_EQ(e.term_key[static_cast<int>(FitTerm::fsdp)].a, 4);     // FSDP over dp_shard x cp
  EXPECT_EQ(e.term_key[static_cast<int>(FitTerm::cp_ring)].a, 2);  // the ring over cp
  EXPECT_EQ(e.term_key[static_cast<int>(FitTerm::compute)].a, 1);
  EXPECT_EQ(e.term_key[static_cast<int>(FitTerm::compute)].b, 2);
}

TEST(RunFit, RecoversEachTermsFactorAndPredictsTheRunsExactly) {
  // Every shape of 4 ranks that has the terms, one factor per term and condition.
  const double kc = 1.7, ktp = 2.1, kring = 1.9, kfsdp = 0.8, krep = 1.3;
  std::vector<RunObservation> runs = {
      observed({4, 1, 1, 1}, kc, ktp, kring, kfsdp, krep), observed({1, 4, 1, 1}, kc, ktp, kring, kfsdp, krep),
      observed({1, 1, 4, 1}, kc, ktp, kring, kfsdp, krep), observed({1, 1, 1, 4}, kc, ktp, kring, kfsdp, krep),
      observed({1, 2, 2, 1}, kc, ktp, kring, kfsdp, krep), observed({2, 1, 2, 1}, kc, ktp, kring, kfsdp, krep),
      observed({2, 2, 1, 1}, kc, ktp, kring, kfsdp, krep), observed({1, 1, 2, 2}, kc, ktp, kring, kfsdp, krep),
      observed({2, 1, 1, 2}, kc, ktp, kring, kfsdp, krep), observed({1, 2, 1, 2}, kc, ktp, kring, kfsdp, krep)};
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_EQ(fit->runs, 10);
  EXPECT_EQ(fit->base, "defaults");
  EXPECT_LT(fit->worst_residual, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::compute, 1, 1), kc, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::compute, 2, 2), kc, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::tp, 4), ktp, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::tp, 2), ktp, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::cp_ring, 2), kring, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::cp_ring, 4), kring, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::fsdp, 4), kfsdp, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::fsdp, 2), kfsdp, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::dp_replicate, 2), krep, 1e-6);

  // With the fit, each run's predicted step is its measured step: compute + every axis.
  auto shared = std::make_shared<const RunFit>(*fit);
  for (const RunObservation& r : runs) {
    TimeQuery q = *r.query;
    q.fit = shared;
    const TimeEstimate e = estimate_time(q);
    EXPECT_NEAR(e.step_s, r.measured.step_s(), 1e-6 * r.measured.step_s()) << r.name;
    EXPECT_NEAR(e.compute_s, r.measured.compute_s, 1e-6 * r.measured.compute_s) << r.name;
    EXPECT_TRUE(e.compute_fitted);
    EXPECT_NEAR(e.axis(Axis::tp).seconds, r.measured.comm_s[Axis::tp], 1e-9) << r.name;
  }
}

// A mixture of experts' all-to-alls are a term of their own (per link and ep): runs that spent
// 4x the formula's seconds in them, at two sizes of step, give the ep term a factor of 4 and the
// prediction the runs' ep time; a dense run's step has no ep term and leaves it unfitted.
TEST(RunFit, TheExpertAllToAllIsATermOfItsOwn) {
  std::vector<RunObservation> runs;
  for (int64_t batch : {4, 8}) {
    RunObservation o;
    const TimeQuery q = moe_query(4, batch);
    o.query = std::make_shared<TimeQuery>(q);
    const TimeEstimate e = estimate_time(q);
    ASSERT_GT(e.term_s[static_cast<int>(FitTerm::ep)], 0.0);
    EXPECT_EQ(e.term_key[static_cast<int>(FitTerm::ep)].a, 4);
    o.measured.compute_s = e.term_s[static_cast<int>(FitTerm::compute)];
    o.measured.comm_s[Axis::dp_shard] = e.term_s[static_cast<int>(FitTerm::fsdp)];
    o.measured.comm_ep_s = 4.0 * e.term_s[static_cast<int>(FitTerm::ep)];
    o.measured.steps = 5;
    o.name = "ep 4, batch " + std::to_string(batch);
    runs.push_back(o);
  }
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_NEAR(factor_of(*fit, FitTerm::ep, 4), 4.0, 1e-9);
  TimeQuery q = *runs[1].query;
  q.fit = std::make_shared<const RunFit>(*fit);
  const TimeEstimate predicted = estimate_time(q);
  EXPECT_TRUE(predicted.comm_ep_fitted);
  EXPECT_NEAR(predicted.comm_ep.seconds, runs[1].measured.comm_ep_s, 1e-9 * predicted.comm_ep.seconds);
  EXPECT_NEAR(runs[1].measured.step_s(),
              runs[1].measured.compute_s + runs[1].measured.comm_s[Axis::dp_shard] + runs[1].measured.comm_ep_s, 1e-12);
  for (const FitFactor& f : fit->factors) {  // a calibration's step factors hold it too
    auto back = fit_factor_from_json(to_json(f), "step_factors[0]");
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_TRUE(back->key == f.key) << f.key.to_string();
  }
}

// The experts' own FSDP collectives over efsdp (ep > 1, efsdp > 1) are a term of their own
// (expert_fsdp) beside the dense FSDP's: runs of FSDP over 4 with ep 2 (efsdp 2: dense over 4,
// experts over 2) and with ep 4 (dense over 4 alone), whose dense FSDP spent 0.5x its formula
// and whose experts' FSDP spent 3x, give each part its own factor (the ep 4 runs pin the dense
// one down, the ep 2 runs' sum then the experts'), and each prediction its own runs' time.
// Compute is a condition per ep too: 1.5x at ep 2 and 0.75x at ep 4 are two factors, and an ep
// no run had takes the median of its split's (1.125).
TEST(RunFit, TheExpertsOwnFsdpAndEachEpsComputeAreTermsAndConditionsOfTheirOwn) {
  std::vector<RunObservation> runs;
  const int fsdp = static_cast<int>(FitTerm::fsdp), expert_fsdp = static_cast<int>(FitTerm::expert_fsdp);
  for (int ep : {2, 4})
    for (int64_t batch : {4, 8}) {
      const TimeQuery q = moe_query(ep, batch);
      const TimeEstimate e = estimate_time(q);
      EXPECT_EQ(e.term_key[fsdp].a, 4);
      EXPECT_GT(e.term_s[fsdp], 0);
      if (ep == 2) {
        EXPECT_EQ(e.term_key[expert_fsdp].a, 2) << e.term_key[expert_fsdp].to_string();
        EXPECT_GT(e.term_s[expert_fsdp], 0);
      } else {
        EXPECT_EQ(e.term_s[expert_fsdp], 0);  // ep 4 over 4 ranks: each expert set whole on its rank
      }
      RunObservation o;
      o.query = std::make_shared<TimeQuery>(q);
      EXPECT_EQ(e.term_key[static_cast<int>(FitTerm::compute)].c, ep);
      o.measured.compute_s = (ep == 2 ? 1.5 : 0.75) * e.term_s[static_cast<int>(FitTerm::compute)];
      o.measured.comm_s[Axis::dp_shard] = 0.5 * e.term_s[fsdp] + 3.0 * e.term_s[expert_fsdp];
      o.measured.comm_ep_s = e.term_s[static_cast<int>(FitTerm::ep)];
      o.measured.steps = 5;
      o.name = "ep " + std::to_string(ep) + ", batch " + std::to_string(batch);
      runs.push_back(o);
    }
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_NEAR(factor_of(*fit, FitTerm::expert_fsdp, 2), 3.0, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::fsdp, 4), 0.5, 1e-6);
  auto compute_at = [&](int ep) {
    FitKey key{FitTerm::compute, LinkKind::intra_node, 1, 1, Precision::fp32, ep};
    auto f = lookup_factor(fit->factors, key, false);
    EXPECT_TRUE(f.has_value()) << key.to_string();
    return f ? f->factor : -1.0;
  };
  EXPECT_NEAR(compute_at(2), 1.5, 1e-6);
  EXPECT_NEAR(compute_at(4), 0.75, 1e-6);
  EXPECT_NEAR(compute_at(8), 1.125, 1e-6);
  for (const RunObservation& run : {runs[1], runs[3]}) {
    TimeQuery q = *run.query;
    q.fit = std::make_shared<const RunFit>(*fit);
    const TimeEstimate predicted = estimate_time(q);
    EXPECT_NEAR(predicted.comm[Axis::dp_shard].seconds, run.measured.comm_s[Axis::dp_shard],
                1e-6 * run.measured.comm_s[Axis::dp_shard])
        << run.name;
    EXPECT_NEAR(predicted.compute_s, run.measured.compute_s, 1e-6 * run.measured.compute_s) << run.name;
  }
  // A group size without a factor of its own takes its term's, not the other part's.
  auto efsdp_4 = lookup_factor(fit->factors, FitKey{FitTerm::expert_fsdp, LinkKind::intra_node, 4}, false);
  auto dense_2 = lookup_factor(fit->factors, FitKey{FitTerm::fsdp, LinkKind::intra_node, 2}, false);
  ASSERT_TRUE(efsdp_4 && dense_2);
  EXPECT_NEAR(efsdp_4->factor, 3.0, 1e-6);
  EXPECT_NEAR(dense_2->factor, 0.5, 1e-6);
  for (const FitFactor& f : fit->factors) {  // a calibration's step factors keep the term
    const nlohmann::json j = to_json(f);
    EXPECT_FALSE(j.contains("efsdp")) << j.dump();
    EXPECT_EQ(j.contains("ep"), f.key.term == FitTerm::compute) << j.dump();
    auto back = fit_factor_from_json(j, "step_factors[0]");
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_TRUE(back->key == f.key) << f.key.to_string();
  }
  // A calibration stored when the experts' factor was an fsdp condition ("efsdp": true) reads
  // as expert_fsdp; anything but a boolean there is an error naming the field.
  auto stored = fit_factor_from_json({{"term", "fsdp"}, {"factor", 2.0}, {"link", "intra_node"}, {"group_size", 2},
                                      {"efsdp", true}},
                                     "step_factors[2]");
  ASSERT_TRUE(stored.ok()) << stored.error().message();
  EXPECT_EQ(stored->key.term, FitTerm::expert_fsdp);
  EXPECT_EQ(stored->key.a, 2);
  auto bad = fit_factor_from_json({{"term", "fsdp"}, {"factor", 1.0}, {"link", "intra_node"}, {"group_size", 4},
                                   {"efsdp", "yes"}},
                                  "step_factors[3]");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "step_factors[3].efsdp");
}

TEST(RunFit, SeparatesFsdpFromTheRingThroughTheirSum) {
  // dp_shard x cp shapes report FSDP and the ring together; runs with one of them alone pin the
  // other down: the closed form is the two factors that made the data.
  std::vector<RunObservation> runs = {observed({1, 4, 1, 1}, 1, 1, 3.0, 0.5, 1),
                                      observed({1, 1, 4, 1}, 1, 1, 3.0, 0.5, 1),
                                      observed({1, 2, 2, 1}, 1, 1, 3.0, 0.5, 1)};
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_NEAR(factor_of(*fit, FitTerm::fsdp, 4), 0.5, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::cp_ring, 4), 3.0, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::cp_ring, 2), 3.0, 1e-6);
}

TEST(RunFit, RelativeLeastSquaresOfOneTermIsTheClosedForm) {
  // Two runs of one shape measured 2x and 4x the formula: minimising
  // ((t b - 2b)/2b)^2 + ((t b - 4b)/4b)^2 gives t = (1/2 + 1/4) / (1/4 + 1/16) = 2.4.
  std::vector<RunObservation> runs = {observed({4, 1, 1, 1}, 2, 1, 1, 1, 1), observed({4, 1, 1, 1}, 4, 1, 1, 1, 1)};
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(factor_of(*fit, FitTerm::compute, 1, 1), 2.4, 1e-9);
  // Residuals: |2.4 - 2| / 2 = 0.2 and |2.4 - 4| / 4 = 0.4 (the all-reduce fits exactly: 0).
  EXPECT_NEAR(fit->worst_residual, 0.4, 1e-9);
}

TEST(RunFit, UnseenConditionsTakeTheMedianOfTheTermsFactors) {
  std::vector<RunObservation> runs = {observed({1, 1, 1, 4}, 1.0, 2.0, 1, 1, 1),
                                      observed({2, 1, 1, 2}, 3.0, 5.0, 1, 1, 1),
                                      observed({4, 1, 1, 1}, 4.0, 1, 1, 1, 1)};
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok());
  // tp 8 was never run: the tp factors on the same link are 2 and 5, median 3.5.
  EXPECT_NEAR(fit->factor({FitTerm::tp, LinkKind::intra_node, 8, 1, Precision::fp32})->factor, 3.5, 1e-6);
  // Compute split 4 ways as tp 2 x cp 2: the same split as tp 4 (factor 1.0) wins over the rest.
  EXPECT_NEAR(fit->factor({FitTerm::compute, LinkKind::intra_node, 2, 2, Precision::fp32})->factor, 1.0, 1e-6);
  // Across nodes, no tp was ever measured: the term's factors on any link.
  EXPECT_NEAR(fit->factor({FitTerm::tp, LinkKind::inter_node, 2, 1, Precision::fp32})->factor, 3.5, 1e-6);
  // bf16 compute has no run at all: no factor (the formula stands and says it was not fitted).
  EXPECT_FALSE(fit->factor({FitTerm::compute, LinkKind::intra_node, 1, 1, Precision::bf16}).has_value());
  EXPECT_FALSE(fit->factor({FitTerm::cp_ring, LinkKind::intra_node, 2, 1, Precision::fp32}).has_value());
}

TEST(RunFit, InterNodeGroupsAreTheirOwnCondition) {
  // 2 nodes x 2 ranks: dp_replicate 2 crosses nodes, tp 2 stays inside.
  std::vector<RunObservation> runs = {observed({2, 1, 1, 2}, 1, 1, 1, 1, 6.0, 2), observed({4, 1, 1, 1}, 1, 1, 1, 1, 2.0, 4)};
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(factor_of(*fit, FitTerm::dp_replicate, 2, 1, LinkKind::inter_node), 6.0, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::dp_replicate, 4, 1, LinkKind::intra_node), 2.0, 1e-6);
}

TEST(RunFit, NothingToFitIsAnErrorThatSaysWhatIsNeeded) {
  auto none = fit_runs({}, std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message(),
            "runs: 0 run(s): finished runs that recorded compute_s and comm_s for at least 2 steps");
  RunObservation empty = observed({4, 1, 1, 1}, 1, 1, 1, 1, 1);
  empty.measured = RunMeasurement{};
  EXPECT_FALSE(fit_runs({empty}, std::nullopt).ok());
}

TEST(RunFit, AFitOnACalibrationScalesTheCalibratedTerms) {
  Calibration c;
  c.fingerprint.nodes = {{"a", 4, "cpu", 2}};
  c.matmul = {{Precision::fp32, 1, 4, 4e9}};
  c.step_efficiency = 0.5;
  std::vector<RunObservation> runs;
  RunObservation o = observed({4, 1, 1, 1}, 1, 1, 1, 1, 1);
  TimeQuery cq = *o.query;
  cq.calibration = c;
  const TimeEstimate base = estimate_time(cq);
  o.measured.compute_s = 3.0 * base.compute_s;  // three times the calibrated compute
  runs.push_back(o);
  auto fit = fit_runs(runs, c);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->base, "calibration " + c.fingerprint.id());
  EXPECT_NEAR(factor_of(*fit, FitTerm::compute, 1, 1), 3.0, 1e-6);
  cq.fit = std::make_shared<const RunFit>(*fit);
  const TimeEstimate fitted = estimate_time(cq);
  EXPECT_NEAR(fitted.compute_s, 3.0 * base.compute_s, 1e-9);
  EXPECT_TRUE(fitted.compute_calibrated);
  EXPECT_TRUE(fitted.compute_fitted);
}

TEST(RunFit, TheCalibrationsOwnStepFactorsAreNotInTheBase) {
  // A fit of runs replaces the calibration's step factors (estimate_time uses one or the other),
  // so it is made on the calibration's formulas alone: the same factors with or without them.
  Calibration c;
  c.fingerprint.nodes = {{"a", 4, "cpu", 2}};
  c.matmul = {{Precision::fp32, 1, 4, 4e9}};
  c.step_efficiency = 0.5;
  RunObservation o = observed({4, 1, 1, 1}, 1, 1, 1, 1, 1);
  TimeQuery cq = *o.query;
  cq.calibration = c;
  o.measured.compute_s = 3.0 * estimate_time(cq).compute_s;
  Calibration with = c;
  with.step_factors = {{{FitTerm::compute, LinkKind::intra_node, 1, 1, Precision::fp32}, 2.0, 1}};
  auto plain = fit_runs({o}, c);
  auto stepped = fit_runs({o}, with);
  ASSERT_TRUE(plain.ok() && stepped.ok());
  EXPECT_NEAR(factor_of(*stepped, FitTerm::compute, 1, 1), 3.0, 1e-6);
  EXPECT_EQ(factor_of(*stepped, FitTerm::compute, 1, 1), factor_of(*plain, FitTerm::compute, 1, 1));
}

TEST(RunFit, JsonNamesEveryFactor) {
  auto fit = fit_runs({observed({2, 1, 1, 2}, 2, 3, 1, 1, 4)}, std::nullopt);
  ASSERT_TRUE(fit.ok());
  const nlohmann::json j = to_json(*fit);
  ASSERT_EQ(j["factors"].size(), 3u);  // compute tp 2, tp n=2, dp_replicate n=2
  EXPECT_EQ(j["factors"][0]["term"], "compute");
  EXPECT_EQ(j["factors"][0]["tp"], 2);
  EXPECT_NEAR(j["factors"][0]["factor"].get<double>(), 2.0, 1e-6);
  EXPECT_EQ(j["factors"][1]["term"], "tp");
  EXPECT_NEAR(j["factors"][1]["factor"].get<double>(), 3.0, 1e-6);
  EXPECT_EQ(j["factors"][2]["term"], "dp_replicate");
  EXPECT_EQ(j["factors"][2]["link"], "intra_node");
  EXPECT_NEAR(j["factors"][2]["factor"].get<double>(), 4.0, 1e-6);
}

namespace {

// A run at `global_batch` whose compute and tp measure theta x formula + delta.
RunObservation observed_affine(MeshShape shape, int64_t global_batch, double theta_c, double delta_c,
                               double theta_tp, double delta_tp) {
  RunObservation o;
  TimeQuery q = query(shape);
  q.training.global_batch = global_batch;
  o.query = std::make_shared<TimeQuery>(q);
  const TimeEstimate e = estimate_time(q);
  o.measured.compute_s = theta_c * e.term_s[static_cast<int>(FitTerm::compute)] + delta_c;
  o.measured.comm_s[Axis::tp] = theta_tp * e.term_s[static_cast<int>(FitTerm::tp)] + delta_tp;
  o.measured.steps = 5;
  o.name = shape.compact() + " batch " + std::to_string(global_batch);
  return o;
}

}  // namespace

TEST(RunFit, APerStepPartIsSeparatedWhereTheFormulaVaries) {
  // tp 4 at 2 and 4 micro-batches: the formulas double, the per-step part stays. Two equations
  // per term and two unknowns: theta and delta come back exactly, and a run of 8 micro-batches
  // is predicted as theta x its formula + delta.
  const double tc = 1.4, dc = 0.003, ttp = 1.8, dtp = 0.002;
  std::vector<RunObservation> runs = {observed_affine({1, 1, 1, 4}, 2, tc, dc, ttp, dtp),
                                      observed_affine({1, 1, 1, 4}, 4, tc, dc, ttp, dtp)};
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  const auto c = fit->factor({FitTerm::compute, LinkKind::intra_node, 4, 1, Precision::fp32});
  const auto tp = fit->factor({FitTerm::tp, LinkKind::intra_node, 4, 1, Precision::fp32});
  ASSERT_TRUE(c && tp);
  EXPECT_NEAR(c->factor, tc, 1e-6);
  EXPECT_NEAR(c->per_step_s, dc, 1e-9);
  EXPECT_NEAR(tp->factor, ttp, 1e-6);
  EXPECT_NEAR(tp->per_step_s, dtp, 1e-9);
  EXPECT_LT(fit->worst_residual, 1e-6);
  const RunObservation eight = observed_affine({1, 1, 1, 4}, 8, tc, dc, ttp, dtp);
  TimeQuery q = *eight.query;
  q.fit = std::make_shared<const RunFit>(*fit);
  const TimeEstimate e = estimate_time(q);
  EXPECT_NEAR(e.compute_s, eight.measured.compute_s, 1e-9);
  EXPECT_NEAR(e.axis(Axis::tp).seconds, eight.measured.comm_s[Axis::tp], 1e-9);
  EXPECT_EQ(to_json(*fit)["factors"][0]["per_step_s"].get<double>(), c->per_step_s);

  // One batch only: nothing tells a per-step part from a proportional one, so none is fitted and
  // the factor is measured over formula.
  auto single = fit_runs({runs[1]}, std::nullopt);
  ASSERT_TRUE(single.ok());
  const auto s = single->factor({FitTerm::compute, LinkKind::intra_node, 4, 1, Precision::fp32});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->per_step_s, 0);
  TimeQuery sq = *runs[1].query;
  EXPECT_NEAR(s->factor, runs[1].measured.compute_s / estimate_time(sq).compute_s, 1e-9);
  EXPECT_FALSE(to_json(*single)["factors"][0].contains("per_step_s"));
}

TEST(RunFit, ANegativePerStepPartIsDroppedNotKept) {
  // Measurements that fall below proportional (theta x formula - 2 ms) would fit a negative
  // per-step time, which no step has: the fit keeps the factor alone, positive.
  std::vector<RunObservation> runs = {observed_affine({1, 1, 1, 4}, 2, 1.4, -0.002, 1, 0),
                                      observed_affine({1, 1, 1, 4}, 4, 1.4, -0.002, 1, 0)};
  ASSERT_GT(runs[0].measured.compute_s, 0);
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok());
  const auto c = fit->factor({FitTerm::compute, LinkKind::intra_node, 4, 1, Precision::fp32});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->per_step_s, 0);
  EXPECT_GT(c->factor, 1.0);
  EXPECT_LT(c->factor, 1.4);
}

TEST(RunFit, DdpAndHsdpAllReducesAreTheirOwnConditions) {
  // dp_replicate 2 over the whole gradient (2 x 1 x 1 x 2, DDP) and over FSDP's shard
  // (2 x 2 x 1 x 1, HSDP): two keys, each with its own factor.
  std::vector<RunObservation> runs = {observed({2, 1, 1, 2}, 1, 1, 1, 1, 3.0), observed({2, 2, 1, 1}, 1, 1, 1, 1, 0.5)};
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok());
  EXPECT_NEAR(factor_of(*fit, FitTerm::dp_replicate, 2, kDdpAllReduce), 3.0, 1e-6);
  EXPECT_NEAR(factor_of(*fit, FitTerm::dp_replicate, 2, kHsdpAllReduce), 0.5, 1e-6);
  int seen = 0;
  const nlohmann::json factors = to_json(*fit)["factors"];
  for (const auto& f : factors)
    if (f["term"] == "dp_replicate") {
      EXPECT_EQ(f["hsdp"].get<bool>(), f["factor"].get<double>() < 1) << f.dump();
      ++seen;
    }
  EXPECT_EQ(seen, 2);
  EXPECT_EQ((FitKey{FitTerm::dp_replicate, LinkKind::inter_node, 4, kHsdpAllReduce, Precision::fp32}.to_string()),
            "dp_replicate inter_node n=4 hsdp");
  // A factor read back keeps its kind; a kind that is not a boolean is refused by name.
  nlohmann::json j = to_json(fit->factors.back());
  auto back = fit_factor_from_json(j, "f");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->key, fit->factors.back().key);
  j["hsdp"] = "yes";
  EXPECT_EQ(fit_factor_from_json(j, "f").error().message(), "f.hsdp: \"yes\": true or false");
}

TEST(RunFit, TpBesideCpOrDpShardIsItsOwnCondition) {
  // The same tp 2 group beside replicas, beside dp_shard 2 and beside cp 2: three keys, each
  // with the factor its run measured, and each run predicted exactly from its own.
  std::vector<RunObservation> runs = {observed({2, 1, 1, 2}, 1, 0.9, 1, 1, 1), observed({1, 2, 1, 2}, 1, 1.1, 1, 1, 1),
                                      observed({1, 1, 2, 2}, 1, 1.4, 1, 1, 1), observed({1, 1, 1, 4}, 1, 3.0, 1, 1, 1)};
  auto fit = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  auto tp_factor = [&](int n, int cp, int dp_shard) {
    return fit->factor(FitKey{FitTerm::tp, LinkKind::intra_node, n, cp, Precision::fp32, dp_shard})->factor;
  };
  EXPECT_NEAR(tp_factor(2, 1, 1), 0.9, 1e-6);
  EXPECT_NEAR(tp_factor(2, 1, 2), 1.1, 1e-6);
  EXPECT_NEAR(tp_factor(2, 2, 1), 1.4, 1e-6);
  EXPECT_NEAR(tp_factor(4, 1, 1), 3.0, 1e-6);
  auto shared = std::make_shared<const RunFit>(*fit);
  for (const RunObservation& r : runs) {
    TimeQuery q = *r.query;
    q.fit = shared;
    EXPECT_NEAR(estimate_time(q).axis(Axis::tp).seconds, r.measured.comm_s[Axis::tp], 1e-9) << r.name;
  }
  // tp 2 beside cp 4 never ran: the median of the tp 2 keys (0.9, 1.1, 1.4), not of every tp
  // key (which would take tp 4's 3.0 in: 1.25).
  EXPECT_NEAR(tp_factor(2, 4, 1), 1.1, 1e-6);
  EXPECT_NEAR(tp_factor(8, 1, 1), (1.1 + 1.4) / 2, 1e-6);  // no tp 8 at all: every tp key's median
  EXPECT_EQ((FitKey{FitTerm::tp, LinkKind::intra_node, 2, 2, Precision::fp32, 1}.to_string()),
            "tp intra_node n=2 cp 2 dp_shard 1");

  // Read back with its cp and dp_shard; a calibration stored before they existed reads as 1;
  // a value out of range is refused by name.
  for (const FitFactor& f : fit->factors) {
    if (f.key.term != FitTerm::tp) continue;
    nlohmann::json j = to_json(f);
    EXPECT_EQ(j["cp"].get<int>(), f.key.b);
    EXPECT_EQ(j["dp_shard"].get<int>(), f.key.c);
    auto back = fit_factor_from_json(j, "f");
    ASSERT_TRUE(back.ok()) << back.error().message();
    EXPECT_EQ(back->key, f.key);
  }
  nlohmann::json old = {{"term", "tp"}, {"factor", 1.5}, {"link", "intra_node"}, {"group_size", 2}};
  auto read = fit_factor_from_json(old, "f");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->key, (FitKey{FitTerm::tp, LinkKind::intra_node, 2, 1, Precision::fp32, 1}));
  old["dp_shard"] = 0;
  EXPECT_EQ(fit_factor_from_json(old, "f").error().message(), "f.dp_shard: 0: an integer from 1 to 1048576");
}

TEST(RunFit, PerStepSecondsAreFittedAcrossNodesToo) {
  // 2 nodes x 2 ranks: tp 4 crosses the nodes. Runs at 2 and 4 micro-batches: theta and the
  // per-step seconds come back exactly, as inside a node, and a run of 8 is predicted as
  // theta x formula + delta (not the relative least-squares ratio of the two, which would put the
  // longer run over; docs/estimator.md has the measured case).
  auto across = [](int64_t batch, double theta_tp, double delta_tp) {
    RunObservation o = observed_affine({1, 1, 1, 4}, batch, 1.4, 0.003, theta_tp, delta_tp);
    TimeQuery q = *o.query;
    q.gpus_per_node = 2;
    const TimeEstimate e = estimate_time(q);
    o.query = std::make_shared<TimeQuery>(q);
    o.measured.compute_s = 1.4 * e.term_s[static_cast<int>(FitTerm::compute)] + 0.003;
    o.measured.comm_s[Axis::tp] = theta_tp * e.term_s[static_cast<int>(FitTerm::tp)] + delta_tp;
    EXPECT_EQ(e.term_key[static_cast<int>(FitTerm::tp)].link, LinkKind::inter_node);
    return o;
  };
  const FitKey tp_key{FitTerm::tp, LinkKind::inter_node, 4, 1, Precision::fp32};
  auto fit = fit_runs({across(2, 1.8, 0.002), across(4, 1.8, 0.002)}, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  const auto tp = fit->factor(tp_key);
  ASSERT_TRUE(tp);
  EXPECT_NEAR(tp->factor, 1.8, 1e-6);
  EXPECT_NEAR(tp->per_step_s, 0.002, 1e-9);
  const RunObservation eight = across(8, 1.8, 0.002);
  TimeQuery q = *eight.query;
  q.fit = std::make_shared<const RunFit>(*fit);
  EXPECT_NEAR(estimate_time(q).axis(Axis::tp).seconds, eight.measured.comm_s[Axis::tp], 1e-9);
  const auto c = fit->factor({FitTerm::compute, LinkKind::intra_node, 4, 1, Precision::fp32});
  ASSERT_TRUE(c);
  EXPECT_NEAR(c->per_step_s, 0.003, 1e-9);

  // A micro-batch that costs more in the longer run (the link's queue filling: measured below
  // proportional at 2, a negative per-step part) is not kept across nodes either: the factor
  // alone carries both, the relative least-squares ratio sum(b/m) / sum((b/m)^2).
  std::vector<RunObservation> runs = {across(2, 1.8, -0.002), across(4, 1.8, -0.002)};
  auto queued = fit_runs(runs, std::nullopt);
  ASSERT_TRUE(queued.ok());
  const auto tq = queued->factor(tp_key);
  ASSERT_TRUE(tq);
  EXPECT_EQ(tq->per_step_s, 0);
  double num = 0, den = 0;
  for (const RunObservation& r : runs) {
    const double ratio = estimate_time(*r.query).term_s[static_cast<int>(FitTerm::tp)] / r.measured.comm_s[Axis::tp];
    num += ratio;
    den += ratio * ratio;
  }
  EXPECT_NEAR(tq->factor, num / den, 1e-9);
}

// A fit a planner may use is judged on runs it did not learn from: none from fewer runs than
// its unknowns plus one; with enough, each run is predicted by the fit of the others.
TEST(RunFit, OutOfSampleNeedsMoreRunsThanUnknownsAndJudgesEachRunByTheOthers) {
  const MeshShape s{1, 4, 1, 1};
  auto one = fit_runs_out_of_sample({observed(s, 2, 1, 1, 1.5, 1)}, std::nullopt);
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.error().message(),
            "runs: 1 run: a fit of 2 unknowns needs 3 runs or more: fewer leave it no run to be judged on that it did "
            "not learn from");
  // In sample, the one run would be fitted exactly: the error a planner must not show.
  auto in_sample = fit_runs({observed(s, 2, 1, 1, 1.5, 1)}, std::nullopt);
  ASSERT_TRUE(in_sample.ok());
  EXPECT_LT(in_sample->worst_residual, 1e-9);
  EXPECT_EQ(in_sample->unknowns, 2);
  EXPECT_FALSE(fit_runs_out_of_sample({observed(s, 2, 1, 1, 1.5, 1), observed(s, 2.2, 1, 1, 1.5, 1)}, std::nullopt).ok());

  // Five runs measuring compute 2, 2.2, ... 2.8 x the formula (FSDP 1.5 x): each left out is
  // predicted by the mean factor of the others.
  std::vector<RunObservation> runs;
  for (int i = 0; i < 5; ++i) runs.push_back(observed(s, 2 + 0.2 * i, 1, 1, 1.5, 1));
  auto fit = fit_runs_out_of_sample(runs, std::nullopt);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_TRUE(fit->out_of_sample);
  EXPECT_EQ(fit->unknowns, 2);
  EXPECT_EQ(fit->judged_runs, 5);
  auto all = fit_runs(runs, std::nullopt);
  EXPECT_EQ(fit->in_sample_median_residual, all->median_residual);
  EXPECT_GT(fit->median_residual, 0.01);
  // Out of sample is worse than in sample: the held-out run pulled no factor towards itself.
  EXPECT_GT(fit->worst_residual, all->worst_residual);
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<RunObservation> others = runs;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    auto rest = fit_runs(others, std::nullopt);
    ASSERT_TRUE(rest.ok());
    TimeQuery q = *runs[i].query;
    q.fit = std::make_shared<const RunFit>(*rest);
    const double error = std::abs(estimate_time(q).step_s - runs[i].measured.step_s()) / runs[i].measured.step_s();
    EXPECT_LE(error, fit->worst_residual + 1e-12);
  }
}
