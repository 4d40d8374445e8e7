// Calibration (core/calibration.h): the alpha-beta fit, the fingerprint, the JSON form, records
// to a calibration, and the step-time estimate with calibrated inputs against the closed-form
// values of its formulas on hand-made inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/calibration.h"
#include "core/calibration_records.h"
#include "core/model_spec.h"
#include "core/run_fit.h"
#include "core/time_estimate.h"

using namespace meshwork;

namespace {

// t = alpha + x / beta exactly, x = the ring bytes of a tensor of `bytes`.
CollectiveSample sample(Collective op, int n, double bytes, double alpha, double beta,
                        LinkKind link = LinkKind::intra_node) {
  return {op, link, n, bytes, alpha + ring_bytes_sent(op, bytes, n) / beta};
}

ClusterFingerprint two_nodes() {
  ClusterFingerprint f;
  f.device = DeviceKind::cpu;
  f.nodes = {{"node-a", 2, "cpu", 2}, {"node-b", 2, "cpu", 2}};
  f.links = {"intra_node", "inter_node"};
  return f;
}

}  // namespace

TEST(Calibration, RingBytesAndSteps) {
  EXPECT_DOUBLE_EQ(ring_bytes_sent(Collective::all_reduce, 1000, 4), 1500);  // 2 (3/4) M
  EXPECT_DOUBLE_EQ(ring_bytes_sent(Collective::all_gather, 1000, 4), 750);
  EXPECT_DOUBLE_EQ(ring_bytes_sent(Collective::reduce_scatter, 1000, 4), 750);
  EXPECT_DOUBLE_EQ(ring_bytes_sent(Collective::send_recv, 1000, 4), 1000);
  EXPECT_EQ(ring_steps(Collective::all_reduce, 4), 6);
  EXPECT_EQ(ring_steps(Collective::all_gather, 4), 3);
  EXPECT_EQ(ring_steps(Collective::send_recv, 4), 1);
  EXPECT_DOUBLE_EQ(ring_bytes_sent(Collective::all_reduce, 1000, 1), 0);
}

TEST(Calibration, FitRecoversAlphaAndBeta) {
  std::vector<CollectiveSample> s;
  for (double bytes : {4e3, 64e3, 1e6, 16e6}) s.push_back(sample(Collective::all_reduce, 4, bytes, 2e-4, 1.5e9));
  auto fit = fit_alpha_beta(s);
  ASSERT_TRUE(fit.ok()) << fit.error().message();
  EXPECT_NEAR(fit->latency_s, 2e-4, 1e-12);
  EXPECT_NEAR(fit->bytes_per_s, 1.5e9, 1.5e9 * 1e-9);
}

TEST(Calibration, NegativeInterceptIsRefittedThroughTheOrigin) {
  // t = x / 1e9 - 1e-5 (a latency below zero is noise): fit through the origin,
  // b = sum w x t / sum w x^2 with w = 1/t^2 (relative errors).
  std::vector<CollectiveSample> s = {sample(Collective::send_recv, 2, 1e6, -1e-5, 1e9),
                                     sample(Collective::send_recv, 2, 2e6, -1e-5, 1e9)};
  auto fit = fit_alpha_beta(s);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->latency_s, 0);
  const double t1 = 1e-3 - 1e-5, t2 = 2e-3 - 1e-5;
  const double b = (1e6 * t1 / (t1 * t1) + 2e6 * t2 / (t2 * t2)) / (1e12 / (t1 * t1) + 4e12 / (t2 * t2));
  EXPECT_NEAR(fit->bytes_per_s, 1 / b, 1e-3);
}

TEST(Calibration, FitNeedsTwoSizes) {
  auto fit = fit_alpha_beta({sample(Collective::all_gather, 2, 1e6, 1e-4, 1e9), sample(Collective::all_gather, 2, 1e6, 1e-4, 1e9)});
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.error().allowed, "at least two message sizes");
  EXPECT_FALSE(fit_alpha_beta({}).ok());
}

TEST(Calibration, FingerprintChangesWhenANodeIsReplaced) {
  const ClusterFingerprint a = two_nodes();
  ClusterFingerprint same = two_nodes();
  EXPECT_EQ(a.id(), same.id());
  EXPECT_EQ(a.id().size(), 16u);
  ClusterFingerprint replaced = two_nodes();
  replaced.nodes[1].host = "node-c";
  EXPECT_NE(a.id(), replaced.id());
  ClusterFingerprint more_devices = two_nodes();
  more_devices.nodes[0].devices = 4;
  EXPECT_NE(a.id(), more_devices.id());
  ClusterFingerprint one_link = two_nodes();
  one_link.links = {"intra_node"};
  EXPECT_NE(a.id(), one_link.id());
}

TEST(Calibration, JsonRoundTripAndErrorsNameTheField) {
  Calibration c;
  c.fingerprint = two_nodes();
  c.measured_at = "2026-11-25T05:00:00Z";
  c.step_efficiency = 0.6;
  c.matmul = {{Precision::fp32, 1, 2, 3e10}};
  c.collectives = {{LinkKind::inter_node, Collective::all_reduce, 2, {1e-4, 1e9}, 4, 0.01}};
  nlohmann::json j = to_json(c);
  EXPECT_EQ(j["fingerprint_id"], c.fingerprint.id());
  auto back = calibration_from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->fingerprint.id(), c.fingerprint.id());
  EXPECT_EQ(back->measured_at, c.measured_at);
  EXPECT_DOUBLE_EQ(back->step_efficiency, 0.6);
  ASSERT_EQ(back->collectives.size(), 1u);
  EXPECT_EQ(back->collectives[0].link, LinkKind::inter_node);
  EXPECT_DOUBLE_EQ(back->collectives[0].fit.bytes_per_s, 1e9);

  nlohmann::json bad = j;
  bad["collectives"][0]["op"] = "broadcast";
  auto e = calibration_from_json(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().field, "collectives[0].op");
  EXPECT_EQ(e.error().value, "broadcast");
  bad = j;
  bad["matmul"][0]["flops_per_s"] = -1.0;
  e = calibration_from_json(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().field, "matmul[0].flops_per_s");
  bad = j;
  bad["fingerprint"]["nodes"] = nlohmann::json::array();
  EXPECT_FALSE(calibration_from_json(bad).ok());
}

// All-to-all: a block of M/n to each of the n-1 others, (n-1)/n M sent in n-1 messages. A file
// written before all-to-all was measured has none and still loads; the estimator falls back.
TEST(Calibration, AllToAllRoundTripsAndOldFilesWithoutItStillLoad) {
  EXPECT_DOUBLE_EQ(ring_bytes_sent(Collective::all_to_all, 1000, 4), 750);
  EXPECT_EQ(ring_steps(Collective::all_to_all, 4), 3);
  ASSERT_TRUE(parse_collective("all_to_all").ok());
  EXPECT_EQ(*parse_collective("all_to_all"), Collective::all_to_all);
  EXPECT_EQ(to_string(Collective::all_to_all), "all_to_all");
  Calibration c;
  c.fingerprint = two_nodes();
  c.collectives = {{LinkKind::intra_node, Collective::all_to_all, 2, {4e-5, 1.5e9}, 4, 0.02},
                   {LinkKind::inter_node, Collective::all_to_all, 2, {3e-4, 0.2e9}, 4, 0.03}};
  auto back = calibration_from_json(to_json(c));
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_TRUE(back->collective(LinkKind::inter_node, Collective::all_to_all, 2).has_value());
  EXPECT_DOUBLE_EQ(back->collective(LinkKind::inter_node, Collective::all_to_all, 2)->bytes_per_s, 0.2e9);
  // Measured at 2, asked at 4: 3 messages instead of 1.
  EXPECT_DOUBLE_EQ(back->collective(LinkKind::intra_node, Collective::all_to_all, 4)->latency_s, 3 * 4e-5);

  const nlohmann::json old_file = nlohmann::json::parse(R"({"v": 1,
    "fingerprint": )" + to_json(two_nodes()).dump() + R"(, "measured_at": "2026-11-25T05:00:00Z",
    "step_efficiency": 0.6, "matmul": [],
    "collectives": [{"link": "intra_node", "op": "all_reduce", "group_size": 2, "latency_s": 1e-4,
                     "bytes_per_s": 1e9}]})");
  auto old = calibration_from_json(old_file);
  ASSERT_TRUE(old.ok()) << old.error().message();
  EXPECT_TRUE(old->collective(LinkKind::intra_node, Collective::all_reduce, 2).has_value());
  EXPECT_FALSE(old->collective(LinkKind::intra_node, Collective::all_to_all, 2).has_value());
}

TEST(Calibration, NearestGroupSizeScalesLatencyByRingSteps) {
  Calibration c;
  c.fingerprint = two_nodes();
  c.collectives = {{LinkKind::intra_node, Collective::all_reduce, 2, {1e-4, 2e9}, 3, 0}};
  auto exact = c.collective(LinkKind::intra_node, Collective::all_reduce, 2);
  ASSERT_TRUE(exact);
  EXPECT_DOUBLE_EQ(exact->latency_s, 1e-4);
  // n = 4: 2 (4-1) = 6 ring steps instead of 2: three times the latency, the same bandwidth.
  auto four = c.collective(LinkKind::intra_node, Collective::all_reduce, 4);
  ASSERT_TRUE(four);
  EXPECT_DOUBLE_EQ(four->latency_s, 3e-4);
  EXPECT_DOUBLE_EQ(four->bytes_per_s, 2e9);
  EXPECT_FALSE(c.collective(LinkKind::inter_node, Collective::all_reduce, 2));
  EXPECT_FALSE(c.collective(LinkKind::intra_node, Collective::all_gather, 2));
}

TEST(Calibration, CpuMatmulRateScalesWithRanksSharingANode) {
  Calibration c;
  c.fingerprint = two_nodes();
  c.matmul = {{Precision::fp32, 1, 2, 3e10}};
  EXPECT_DOUBLE_EQ(*c.matmul_flops(Precision::fp32, 2), 3e10);
  EXPECT_DOUBLE_EQ(*c.matmul_flops(Precision::fp32, 4), 1.5e10);  // 4 ranks share what 2 had
  EXPECT_FALSE(c.matmul_flops(Precision::bf16, 2));
}

TEST(Calibration, FromRecords) {
  std::vector<CalibrationRecord> recs;
  for (int node = 0; node < 2; ++node)
    recs.push_back({node * 2, 100.0 + node, "node",
                    {{"node", node}, {"host", "same-hostname"}, {"ranks_per_node", 2}, {"cores", 2}, {"device_name", "cpu"}}});
  // Two ranks time the same all-gathers; the slower one is the group's time.
  for (int rank = 0; rank < 2; ++rank)
    for (double bytes : {1e5, 1e6}) {
      const double t = 5e-5 + ring_bytes_sent(Collective::all_gather, bytes, 2) / 1e9;
      recs.push_back({rank, 200, "collective",
                      {{"op", "all_gather"}, {"link", "inter_node"}, {"group_size", 2}, {"bytes", bytes},
                       {"seconds", rank == 1 ? t : t / 2}, {"iterations", 5}}});
    }
  recs.push_back({0, 150, "matmul",
                  {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"m", 100}, {"n", 200},
                   {"k", 300}, {"seconds", 1e-3}, {"iterations", 3}}});
  recs.push_back({0, 150, "matmul", {{"precision", "fp64"}}});  // skipped, counted
  auto cal = calibration_from_records(recs, {"ns1", "ns2"});
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  EXPECT_EQ(cal->fingerprint.nodes.size(), 2u);
  EXPECT_EQ(cal->fingerprint.nodes[1].host, "ns2");  // the launcher's names win
  EXPECT_EQ(cal->fingerprint.device, DeviceKind::cpu);
  EXPECT_EQ(cal->measured_at, iso_utc(200));
  ASSERT_EQ(cal->matmul.size(), 1u);
  EXPECT_DOUBLE_EQ(cal->matmul[0].flops_per_s, 2.0 * 100 * 200 * 300 / 1e-3);
  auto ag = cal->collective(LinkKind::inter_node, Collective::all_gather, 2);
  ASSERT_TRUE(ag);
  EXPECT_NEAR(ag->latency_s, 5e-5, 1e-12);
  EXPECT_NEAR(ag->bytes_per_s, 1e9, 1e-3);
  EXPECT_EQ(samples_from_records(recs).errors.size(), 1u);
  EXPECT_EQ(cal->step_efficiency, 0);  // no step record: not measured
}

TEST(Calibration, StepEfficiencyIsTheMedianRanksStepRateOverItsMatmulRate) {
  std::vector<CalibrationRecord> recs;
  recs.push_back({0, 100, "node", {{"node", 0}, {"host", "h"}, {"ranks_per_node", 2}, {"cores", 2}, {"device_name", "cpu"}}});
  // Matmul rate: 2 * 100 * 200 * 300 FLOPs in 1 ms = 12 GFLOP/s per rank (fp32, 2 ranks per node).
  recs.push_back({0, 150, "matmul",
                  {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"m", 100}, {"n", 200},
                   {"k", 300}, {"seconds", 1e-3}, {"iterations", 3}}});
  // Three ranks' steps at 6, 9 and 3 GFLOP/s: efficiencies 0.5, 0.75, 0.25; the median 0.5.
  for (double gflops : {6.0, 9.0, 3.0})
    recs.push_back({0, 160, "step",
                    {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"layers", 2}, {"tokens", 64},
                     {"flops", gflops * 1e9 * 0.01}, {"seconds", 0.01}, {"iterations", 5}}});
  recs.push_back({0, 160, "step", {{"precision", "fp32"}, {"flops", -1}}});  // skipped, counted
  auto cal = calibration_from_records(recs);
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  EXPECT_NEAR(cal->step_efficiency, 0.5, 1e-12);
  EXPECT_EQ(samples_from_records(recs).errors.size(), 1u);
  EXPECT_EQ(samples_from_records(recs).errors[0],
            "calibration record of rank 0: kind step: needs precision, ranks_per_node, flops and seconds");
}

// A mixture of experts' expert blocks are "matmul" records with experts_ep: fitted per ep apart
// from the dense matmuls, written and read back, and the step's efficiency is of the FLOPs
// outside them once the ep 1 block's time is taken out.
TEST(Calibration, ExpertBlocksAreRatesOfTheirOwnAndLeaveTheStepEfficiencyToTheRest) {
  std::vector<CalibrationRecord> recs;
  recs.push_back({0, 100, "node", {{"node", 0}, {"host", "h"}, {"ranks_per_node", 2}, {"cores", 2}, {"device_name", "cpu"}}});
  recs.push_back({0, 150, "matmul",
                  {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"m", 100}, {"n", 200},
                   {"k", 300}, {"seconds", 1e-3}, {"iterations", 3}}});  // 12 GFLOP/s
  for (auto [ep, seconds] : {std::pair{1, 4e-3}, std::pair{4, 1e-3}})
    recs.push_back({0, 150, "matmul",
                    {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"m", 100}, {"n", 200},
                     {"k", 300}, {"count", 6}, {"experts_ep", ep}, {"seconds", seconds}, {"iterations", 3}}});
  // A step of 0.02 s: its 0.03 GFLOP of experts at the ep 1 block's 3 GFLOP/s take 0.01 s, so
  // the other 0.06 GFLOP took 0.01 s: 6 GFLOP/s, an efficiency of 0.5 against 12.
  recs.push_back({0, 160, "step",
                  {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"layers", 2}, {"tokens", 64},
                   {"flops", 0.09e9}, {"expert_flops", 0.03e9}, {"seconds", 0.02}, {"iterations", 5}}});
  recs.push_back({0, 160, "step",
                  {{"precision", "fp32"}, {"ranks_per_node", 2}, {"flops", 1e9}, {"expert_flops", 2e9},
                   {"seconds", 0.02}}});  // more experts than FLOPs: skipped, counted
  recs.push_back({0, 150, "matmul",
                  {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"m", 1}, {"n", 1}, {"k", 1},
                   {"experts_ep", -1}, {"seconds", 1e-3}}});  // skipped, counted
  auto cal = calibration_from_records(recs);
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  EXPECT_EQ(samples_from_records(recs).errors.size(), 2u);
  ASSERT_EQ(cal->matmul.size(), 3u);
  EXPECT_DOUBLE_EQ(*cal->matmul_flops(Precision::fp32, 2), 12e9);
  EXPECT_DOUBLE_EQ(*cal->expert_flops(Precision::fp32, 2, 1, 1), 3e9);
  EXPECT_DOUBLE_EQ(*cal->expert_flops(Precision::fp32, 2, 1, 4), 12e9);
  EXPECT_DOUBLE_EQ(*cal->expert_flops(Precision::fp32, 2, 1, 8), 12e9);  // nearest ep measured
  EXPECT_DOUBLE_EQ(*cal->expert_flops(Precision::fp32, 4, 1, 4), 6e9);   // 4 ranks share what 2 had
  EXPECT_NEAR(cal->step_efficiency, 0.5, 1e-12);
  auto back = calibration_from_json(to_json(*cal));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_DOUBLE_EQ(*back->expert_flops(Precision::fp32, 2, 1, 4), 12e9);
  EXPECT_DOUBLE_EQ(*back->matmul_flops(Precision::fp32, 2), 12e9);
  nlohmann::json bad = to_json(*cal);
  for (auto& e : bad["matmul"])
    if (e.contains("experts_ep")) e["experts_ep"] = 1.5;
  auto refused = calibration_from_json(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("experts_ep"), std::string::npos) << refused.error().message();
}

// ---- The estimator with calibrated inputs: each term in closed form. ----

namespace {

ModelSpec preset(const std::string& name) { return *load_model_spec(name); }

// Defaults that must NOT show up anywhere a calibrated number exists.
TimeQuery calibrated_query(const ModelSpec& m, MeshShape shape, int gpus_per_node) {
  TimeQuery q;
  q.model = m;
  q.shape = shape;
  q.gpus_per_node = gpus_per_node;
  q.training.seq_len = 256;
  q.training.micro_batch = 1;
  q.training.precision = Precision::fp32;
  q.hardware.peak_flops_fp32 = 1;  // absurd: a test fails loudly if a default leaks in
  q.hardware.intra_node_bytes_per_s = q.hardware.inter_node_bytes_per_s = 1;
  q.hardware.latency_s = 1;
  q.hardware.efficiency = 0.1;
  Calibration c;
  c.fingerprint = two_nodes();
  c.step_efficiency = 0.5;
  c.matmul = {{Precision::fp32, 1, gpus_per_node, 2e9}};
  c.collectives = {
      {LinkKind::intra_node, Collective::all_gather, 2, {1e-4, 1e9}, 3, 0},
      {LinkKind::intra_node, Collective::reduce_scatter, 2, {2e-4, 0.5e9}, 3, 0},
      {LinkKind::intra_node, Collective::all_reduce, 2, {3e-4, 0.25e9}, 3, 0},
      {LinkKind::inter_node, Collective::all_reduce, 2, {1e-3, 0.1e9}, 3, 0},
      {LinkKind::intra_node, Collective::send_recv, 2, {5e-5, 2e9}, 3, 0},
  };
  q.calibration = c;
  return q;
}

}  // namespace

TEST(CalibratedEstimate, ComputeUsesMeasuredRateAndStepEfficiency) {
  ModelSpec tiny = preset("tiny");
  TimeQuery q = calibrated_query(tiny, {1, 1, 1, 1}, 1);
  q.training.global_batch = 4;
  TimeEstimate t = estimate_time(q);
  // 4 sequences x 256 tokens x 935,808 FLOPs / (1 rank x 2 GFLOP/s x 0.5).
  EXPECT_DOUBLE_EQ(t.compute_s, 4 * 256 * 935'808.0 / (2e9 * 0.5));
  EXPECT_TRUE(t.compute_calibrated);
  EXPECT_DOUBLE_EQ(t.mfu, t.model_flops_per_token * t.tokens_per_s / 2e9);
}

TEST(CalibratedEstimate, DataParallelAllReduceIntraAndInterNode) {
  ModelSpec tiny = preset("tiny");
  // DDP over 2 ranks: one all-reduce of G = 4 N bytes (one 25 MiB bucket), 2 (1/2) G sent.
  const double G = 4.0 * static_cast<double>(tiny.parameter_count());
  TimeEstimate intra = estimate_time(calibrated_query(tiny, {2, 1, 1, 1}, 2));
  EXPECT_DOUBLE_EQ(intra.axis(Axis::dp_replicate).seconds, 3e-4 + G / 0.25e9);
  EXPECT_FALSE(intra.axis(Axis::dp_replicate).crosses_nodes);
  EXPECT_TRUE(intra.comm_calibrated[Axis::dp_replicate]);
  // One rank per node: the group crosses nodes, the inter-node fit applies.
  TimeEstimate inter = estimate_time(calibrated_query(tiny, {2, 1, 1, 1}, 1));
  EXPECT_TRUE(inter.axis(Axis::dp_replicate).crosses_nodes);
  EXPECT_DOUBLE_EQ(inter.axis(Axis::dp_replicate).seconds, 1e-3 + G / 0.1e9);
  EXPECT_DOUBLE_EQ(inter.step_s, inter.compute_s + inter.comm_s);  // CPU: nothing hidden
}

TEST(CalibratedEstimate, TensorParallelEachCollectiveItsOwnFit) {
  ModelSpec tiny = preset("tiny");
  TimeEstimate t = estimate_time(calibrated_query(tiny, {1, 1, 1, 2}, 2));
  // Per micro-batch: L x 4 + 2 all-gathers and as many reduce-scatters of M = T h c bytes
  // ((t-1)/t M = M/2 sent each), and 3 all-reduces of T fp32 values (2 (1/2) 4T sent each).
  const double L = tiny.num_hidden_layers, T = 256, M = T * tiny.hidden_size * 4;
  const double k = L * 4 + 2;
  const double expected = k * (1e-4 + M / 2 / 1e9) + k * (2e-4 + M / 2 / 0.5e9) + 3 * (3e-4 + 4 * T / 0.25e9);
  EXPECT_NEAR(t.axis(Axis::tp).seconds, expected, expected * 1e-12);
  EXPECT_DOUBLE_EQ(t.axis(Axis::tp).bytes, 2 * k * M / 2 + 3 * 4 * T);
  EXPECT_EQ(t.axis(Axis::tp).collectives, static_cast<int>(2 * k + 3));
  EXPECT_TRUE(t.comm_calibrated[Axis::tp]);
}

TEST(CalibratedEstimate, MissingFitFallsBackToDefaultsAndSaysSo) {
  ModelSpec tiny = preset("tiny");
  TimeQuery q = calibrated_query(tiny, {1, 2, 1, 1}, 1);  // FSDP across nodes: no inter-node AG/RS fit
  q.hardware.inter_node_bytes_per_s = 1e9;
  q.hardware.latency_s = 1e-5;
  TimeEstimate t = estimate_time(q);
  EXPECT_FALSE(t.comm_calibrated[Axis::dp_shard]);
  // Defaults: alpha = (n-1) latency per collective, beta = the link's bandwidth.
  const AxisComm& ax = t.axis(Axis::dp_shard);
  EXPECT_NEAR(ax.seconds, ax.bytes / 1e9 + ax.collectives * 1e-5, 1e-12);
}

TEST(CalibratedEstimate, ContextParallelSendRecv) {
  ModelSpec tiny = preset("tiny");
  TimeEstimate t = estimate_time(calibrated_query(tiny, {1, 1, 2, 1}, 2));
  const AxisComm& ax = t.axis(Axis::cp);
  // L (cp-1) ring steps x 2 send/recvs, each alpha + its bytes / beta; plus the FSDP traffic
  // over dp_shard x cp = 2, all charged to cp (dp_shard is 1): what FSDP over dp_shard 2 costs.
  const AxisComm fsdp = estimate_time(calibrated_query(tiny, {1, 2, 1, 1}, 2)).axis(Axis::dp_shard);
  const double ring_count = tiny.num_hidden_layers * 2;
  EXPECT_EQ(ax.collectives, static_cast<int>(ring_count) + fsdp.collectives);
  EXPECT_NEAR(ax.seconds, ring_count * 5e-5 + (ax.bytes - fsdp.bytes) / 2e9 + fsdp.seconds, 1e-12);
  EXPECT_EQ(t.axis(Axis::dp_shard).seconds, 0);
  EXPECT_TRUE(t.comm_calibrated[Axis::cp]);
}

TEST(CalibratedEstimate, TensorParallelUsesTheRateOfSplitMatmuls) {
  ModelSpec tiny = preset("tiny");
  TimeQuery q = calibrated_query(tiny, {1, 1, 1, 2}, 2);
  // Matmuls split 2 ways run at 1 GFLOP/s here, whole ones at 2: tp 2 takes the split rate.
  q.calibration->matmul.push_back({Precision::fp32, 1, 2, 1e9, 2});
  TimeEstimate t = estimate_time(q);
  EXPECT_DOUBLE_EQ(t.compute_s, 256 * 935'808.0 / (2 * 1e9 * 0.5));
  EXPECT_DOUBLE_EQ(*q.calibration->matmul_flops(Precision::fp32, 2, 4), 1e9);  // nearest split
  EXPECT_DOUBLE_EQ(*q.calibration->matmul_flops(Precision::fp32, 2, 1), 2e9);
}

TEST(CalibratedEstimate, AnUnmeasuredStepEfficiencyIsNotTheDatasheetEfficiencyAgain) {
  // A calibrated matmul rate is already what the matmuls reach: without a measured step
  // efficiency the compute is tokens x flops / (world x rate x kUnmeasuredStepEfficiency), and
  // HardwareModel::efficiency (here an absurd 0.1) plays no part.
  const ModelSpec tiny = preset("tiny");
  TimeQuery q = calibrated_query(tiny, {1, 1, 1, 1}, 1);
  q.calibration->step_efficiency = 0;
  const TimeEstimate e = estimate_time(q);
  EXPECT_TRUE(e.compute_calibrated);
  EXPECT_NEAR(e.compute_s, e.tokens_per_step * e.hardware_flops_per_token / (1 * 2e9 * kUnmeasuredStepEfficiency),
              1e-12);
  // No calibrated rate (bf16 was not measured): the datasheet peak x HardwareModel::efficiency.
  q.training.precision = Precision::bf16;
  const TimeEstimate d = estimate_time(q);
  EXPECT_FALSE(d.compute_calibrated);
  EXPECT_NEAR(d.compute_s, d.tokens_per_step * d.hardware_flops_per_token / (1 * q.hardware.peak_flops_bf16 * 0.1),
              1e-9 * d.compute_s);
}

TEST(Calibration, CountsThatAreNotWholeNumbersAreRefusedNotConverted) {
  // A fuzz find (tests/fuzz/regressions/calibration): a matmul split of 1.67e17 was converted to
  // int (undefined behaviour); a worst_residual that is not a number threw.
  Calibration c;
  c.fingerprint.nodes = {{"h", 2, "cpu", 2}};
  c.measured_at = "2026-11-27T10:00:00Z";
  c.matmul = {{Precision::fp32, 1, 2, 1e9, 2}};
  c.collectives = {{LinkKind::intra_node, Collective::all_reduce, 2, {1e-4, 1e9}, 3, 0.1}};
  nlohmann::json j = to_json(c);
  ASSERT_TRUE(calibration_from_json(j).ok());
  nlohmann::json bad = j;
  bad["matmul"][0]["split"] = 1.6666666666666666e17;
  auto r = calibration_from_json(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "matmul[0].split: 1.6666666666666666e+17: a whole number >= 1");
  bad = j;
  bad["collectives"][0]["samples"] = 2.5;
  EXPECT_EQ(calibration_from_json(bad).error().message(), "collectives[0].samples: 2.5: a whole number >= 0");
  bad = j;
  bad["collectives"][0]["worst_residual"] = "x";
  EXPECT_EQ(calibration_from_json(bad).error().message(), "collectives[0].worst_residual: \"x\": a number");
  bad = j;
  bad["v"] = 1.5;
  EXPECT_EQ(calibration_from_json(bad).error().message(), "v: 1.5: 1");
}

// ---- Step factors: the calibration's own short training steps (Calibration::step_factors). ----

namespace {

// A split step's run config: tiny cut to 2 layers (inline), seq 64, on `mesh`.
RunConfig split_config(MeshShape mesh) {
  ModelSpec cut = preset("tiny");
  cut.num_hidden_layers = 2;
  RunConfig config;
  config.model = model_spec_to_json(cut);
  config.mesh = mesh;
  config.training.seq_len = 64;
  return config;
}

// One node of 2 CPU ranks: its node record, matmuls whole and split 2 ways, and tp's collectives
// (all-gather, reduce-scatter, all-reduce) inside the node at two sizes.
std::vector<CalibrationRecord> node_of_two_records() {
  std::vector<CalibrationRecord> recs;
  recs.push_back({0, 100, "node", {{"node", 0}, {"host", "h"}, {"ranks_per_node", 2}, {"cores", 2}, {"device_name", "cpu"}}});
  for (int split : {1, 2})
    recs.push_back({0, 150, "matmul",
                    {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 2}, {"m", 256}, {"n", 64 / split},
                     {"k", 64}, {"seconds", 1e-4}, {"iterations", 3}, {"split", split}}});
  for (const char* op : {"all_gather", "reduce_scatter", "all_reduce"})
    for (double bytes : {4096.0, 1048576.0})
      recs.push_back({0, 160, "collective",
                      {{"op", op}, {"link", "intra_node"}, {"group_size", 2}, {"bytes", bytes},
                       {"seconds", 5e-5 + bytes / 1e9}, {"iterations", 5}}});
  return recs;
}

}  // namespace

TEST(CalibratedEstimate, StepFactorsScaleTheirTermOnTheirOwnLinkOnly) {
  const ModelSpec tiny = preset("tiny");
  const TimeQuery intra = calibrated_query(tiny, {2, 1, 1, 1}, 2);
  const TimeQuery inter = calibrated_query(tiny, {2, 1, 1, 1}, 1);
  const TimeEstimate intra0 = estimate_time(intra), inter0 = estimate_time(inter);
  const std::vector<FitFactor> factors = {
      {{FitTerm::compute, LinkKind::intra_node, 1, 1, Precision::fp32}, 1.5, 1},
      {{FitTerm::dp_replicate, LinkKind::intra_node, 2, 1, Precision::fp32}, 2.0, 1}};
  TimeQuery q = intra;
  q.calibration->step_factors = factors;
  TimeEstimate t = estimate_time(q);
  EXPECT_DOUBLE_EQ(t.compute_s, 1.5 * intra0.compute_s);
  EXPECT_DOUBLE_EQ(t.axis(Axis::dp_replicate).seconds, 2.0 * intra0.axis(Axis::dp_replicate).seconds);
  EXPECT_DOUBLE_EQ(t.step_s, t.compute_s + t.comm_s);
  // Calibrated numbers, not a fit of past runs.
  EXPECT_TRUE(t.compute_calibrated);
  EXPECT_FALSE(t.compute_fitted);
  EXPECT_FALSE(t.comm_fitted[Axis::dp_replicate]);
  // The replicas on two nodes: the all-reduce crosses nodes, which no split step measured.
  q = inter;
  q.calibration->step_factors = factors;
  t = estimate_time(q);
  EXPECT_DOUBLE_EQ(t.compute_s, 1.5 * inter0.compute_s);
  EXPECT_DOUBLE_EQ(t.axis(Axis::dp_replicate).seconds, inter0.axis(Axis::dp_replicate).seconds);
  // A fit of stored runs replaces them (it was made on the calibration without them).
  auto fit = std::make_shared<RunFit>();
  fit->factors = {{{FitTerm::compute, LinkKind::intra_node, 1, 1, Precision::fp32}, 3.0, 2}};
  q = intra;
  q.calibration->step_factors = factors;
  q.fit = fit;
  t = estimate_time(q);
  EXPECT_DOUBLE_EQ(t.compute_s, 3.0 * intra0.compute_s);
  EXPECT_DOUBLE_EQ(t.axis(Axis::dp_replicate).seconds, intra0.axis(Axis::dp_replicate).seconds);
  EXPECT_TRUE(t.compute_fitted);
}

TEST(Calibration, StepFactorsRoundTripAndErrorsNameTheField) {
  Calibration c;
  c.fingerprint.nodes = {{"h", 2, "cpu", 2}};
  c.measured_at = "2026-11-27T10:00:00Z";
  c.matmul = {{Precision::fp32, 1, 2, 1e9, 1}};
  c.step_factors = {{{FitTerm::compute, LinkKind::intra_node, 2, 1, Precision::bf16}, 1.25, 1},
                    {{FitTerm::cp_ring, LinkKind::intra_node, 4, 1, Precision::fp32}, 1.5, 2}};
  const nlohmann::json j = to_json(c);
  auto back = calibration_from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_EQ(back->step_factors.size(), 2u);
  EXPECT_EQ(back->step_factors[0].key, c.step_factors[0].key);
  EXPECT_EQ(back->step_factors[1].key, c.step_factors[1].key);
  EXPECT_EQ(back->step_factors[1].factor, 1.5);
  EXPECT_EQ(to_json(*back), j);
  nlohmann::json bad = j;
  bad["step_factors"][1]["factor"] = 0;
  EXPECT_EQ(calibration_from_json(bad).error().message(), "step_factors[1].factor: 0: a finite number > 0");
  bad = j;
  bad["step_factors"][0]["term"] = "pp";
  EXPECT_EQ(calibration_from_json(bad).error().message(),
            "step_factors[0].term: pp: compute, tp, cp_ring, fsdp, dp_replicate, ep or expert_fsdp");
  bad = j;
  bad["step_factors"][1]["group_size"] = 1;
  EXPECT_EQ(calibration_from_json(bad).error().message(),
            "step_factors[1].group_size: 1: an integer from 2 to 1048576");
  bad = j;
  bad["step_factors"] = "x";
  EXPECT_EQ(calibration_from_json(bad).error().message(), "step_factors: \"x\": a list");
  // Older calibrations have none.
  bad = j;
  bad.erase("step_factors");
  ASSERT_TRUE(calibration_from_json(bad).ok());
  EXPECT_TRUE(calibration_from_json(bad)->step_factors.empty());
}

TEST(Calibration, SplitStepsGiveEachTermMeasuredOverItsFormula) {
  // One node of 2 CPU ranks: a matmul rate, tp's collectives, and a tp 2 split step that both
  // ranks report. Each equation has one term, so each factor is the ranks' mean measurement
  // over the formula's seconds on the calibration without factors.
  std::vector<CalibrationRecord> recs = node_of_two_records();
  auto base = calibration_from_records(recs);
  ASSERT_TRUE(base.ok()) << base.error().message();
  EXPECT_TRUE(base->step_factors.empty());

  RunConfig config = split_config(MeshShape{1, 1, 1, 2});
  config.training.micro_batch = 1;
  config.training.global_batch = 1;
  config.training.precision = Precision::fp32;
  const double compute[2] = {0.010, 0.014}, tp[2] = {0.004, 0.006};
  for (int rank = 0; rank < 2; ++rank)
    recs.push_back({rank, 170, "split_step",
                    {{"config", to_json(config)}, {"world", 2}, {"ranks_per_node", 2}, {"step_s", compute[rank] + tp[rank]},
                     {"compute_s", compute[rank]}, {"comm_s", {{"tp", tp[rank]}, {"cp", 0.0}}}, {"iterations", 3}}});
  recs.push_back({0, 170, "split_step", {{"config", {{"mesh", "x"}}}, {"world", 2}}});  // skipped, counted
  const CalibrationSamples samples = samples_from_records(recs);
  ASSERT_EQ(samples.split_steps.size(), 1u);
  EXPECT_EQ(samples.split_steps[0].ranks, 2);
  EXPECT_DOUBLE_EQ(samples.split_steps[0].measured.compute_s, 0.012);
  EXPECT_DOUBLE_EQ(samples.split_steps[0].measured.comm_s[Axis::tp], 0.005);
  ASSERT_EQ(samples.errors.size(), 1u);
  EXPECT_EQ(samples.errors[0].rfind("calibration record of rank 0: kind split_step: config: ", 0), 0u) << samples.errors[0];

  auto cal = calibration_from_records(recs);
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  const auto obs = split_step_observations(samples.split_steps);
  ASSERT_EQ(obs.size(), 1u);
  TimeQuery q = *obs[0].query;
  q.calibration = *base;
  const TimeEstimate b = estimate_time(q);
  ASSERT_GT(b.term_s[static_cast<int>(FitTerm::compute)], 0);
  ASSERT_GT(b.term_s[static_cast<int>(FitTerm::tp)], 0);
  const FitKey compute_key{FitTerm::compute, LinkKind::intra_node, 2, 1, Precision::fp32};
  const FitKey tp_key{FitTerm::tp, LinkKind::intra_node, 2, 1, Precision::fp32};
  EXPECT_EQ(b.term_key[static_cast<int>(FitTerm::compute)], compute_key);
  ASSERT_EQ(cal->step_factors.size(), 2u);
  auto factor = [&](const FitKey& k) { return lookup_factor(cal->step_factors, k, false)->factor; };
  EXPECT_NEAR(factor(compute_key), 0.012 / b.term_s[static_cast<int>(FitTerm::compute)], 1e-9);
  EXPECT_NEAR(factor(tp_key), 0.005 / b.term_s[static_cast<int>(FitTerm::tp)], 1e-9);
  // The estimate with them then reproduces the split step's own measurement.
  q.calibration = *cal;
  const TimeEstimate t = estimate_time(q);
  EXPECT_NEAR(t.compute_s, 0.012, 1e-9);
  EXPECT_NEAR(t.axis(Axis::tp).seconds, 0.005, 1e-9);
}

TEST(Calibration, SplitStepsAtOneAndTwoMicroBatchesSeparateThePerStepPart) {
  // The same tp 2 split step at 1 and 2 micro-batches per dp rank, measured as
  // theta x formula + delta per term: two equations, two unknowns per term, so the fit gives back
  // theta and delta exactly, and a run of 8 micro-batches is predicted as theta x its formula
  // + delta (delta once, not 8 times).
  std::vector<CalibrationRecord> recs = node_of_two_records();
  auto base = calibration_from_records(recs);
  ASSERT_TRUE(base.ok()) << base.error().message();

  const double theta_c = 1.6, delta_c = 0.004, theta_tp = 1.2, delta_tp = 0.0015;
  RunConfig config = split_config(MeshShape{1, 1, 1, 2});
  config.training.micro_batch = 1;
  config.training.precision = Precision::fp32;
  // The query core makes of a split step of this config at `global_batch` (its measurement is
  // irrelevant here), and the formulas' terms for it on the calibration without factors.
  auto query_at = [&](int64_t global_batch) {
    RunConfig c = config;
    c.training.global_batch = global_batch;
    std::vector<CalibrationRecord> one = {{0, 170, "split_step",
                                           {{"config", to_json(c)}, {"world", 2}, {"ranks_per_node", 2}, {"step_s", 1.0},
                                            {"compute_s", 1.0}, {"comm_s", {{"tp", 1.0}}}, {"iterations", 3}}}};
    const auto obs = split_step_observations(samples_from_records(one).split_steps);
    EXPECT_EQ(obs.size(), 1u);
    return *obs.at(0).query;
  };
  auto formula = [&](int64_t global_batch) {
    TimeQuery q = query_at(global_batch);
    q.calibration = *base;
    return estimate_time(q);
  };
  for (int64_t global_batch : {1, 2}) {
    const TimeEstimate f = formula(global_batch);
    const double c = theta_c * f.term_s[static_cast<int>(FitTerm::compute)] + delta_c;
    const double tp = theta_tp * f.term_s[static_cast<int>(FitTerm::tp)] + delta_tp;
    RunConfig cfg = config;
    cfg.training.global_batch = global_batch;
    for (int rank = 0; rank < 2; ++rank)
      recs.push_back({rank, 170, "split_step",
                      {{"config", to_json(cfg)}, {"world", 2}, {"ranks_per_node", 2}, {"step_s", c + tp},
                       {"compute_s", c}, {"comm_s", {{"tp", tp}}}, {"iterations", 8}}});
  }
  auto cal = calibration_from_records(recs);
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  const FitKey compute_key{FitTerm::compute, LinkKind::intra_node, 2, 1, Precision::fp32};
  const FitKey tp_key{FitTerm::tp, LinkKind::intra_node, 2, 1, Precision::fp32};
  const auto c = lookup_factor(cal->step_factors, compute_key, false);
  const auto t = lookup_factor(cal->step_factors, tp_key, false);
  ASSERT_TRUE(c && t);
  EXPECT_NEAR(c->factor, theta_c, 1e-6);
  EXPECT_NEAR(c->per_step_s, delta_c, 1e-9);
  EXPECT_NEAR(t->factor, theta_tp, 1e-6);
  EXPECT_NEAR(t->per_step_s, delta_tp, 1e-9);

  // A run of 8 micro-batches: the formula's 8 micro-batches times theta, delta once.
  const TimeEstimate run_formula = formula(8);
  TimeQuery q = query_at(8);
  EXPECT_EQ(run_formula.grad_accum_steps, 8);
  q.calibration = *cal;
  const TimeEstimate run = estimate_time(q);
  EXPECT_NEAR(run.compute_s, theta_c * run_formula.term_s[static_cast<int>(FitTerm::compute)] + delta_c, 1e-9);
  EXPECT_NEAR(run.axis(Axis::tp).seconds, theta_tp * run_formula.term_s[static_cast<int>(FitTerm::tp)] + delta_tp, 1e-9);

  // Stored and read back with the calibration.
  auto back = calibration_from_json(to_json(*cal));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_NEAR(lookup_factor(back->step_factors, tp_key, false)->per_step_s, delta_tp, 1e-12);
  nlohmann::json bad = to_json(*cal);
  bad["step_factors"][0]["per_step_s"] = -1;
  EXPECT_EQ(calibration_from_json(bad).error().message(), "step_factors[0].per_step_s: -1: a finite number of seconds >= 0");
}

TEST(Calibration, ARecordTimeOutOfRangeIsClampedNotConverted) {
  // A fuzz find (tests/fuzz/regressions/calibration): a record's time of 1.8e83 was converted to
  // time_t for the calibration's date (undefined behaviour).
  EXPECT_EQ(iso_utc(1.79222e83), "9999-12-31T23:59:59Z");
  EXPECT_EQ(iso_utc(-5), "1970-01-01T00:00:00Z");
  EXPECT_EQ(iso_utc(std::nan("")), "1970-01-01T00:00:00Z");
  EXPECT_EQ(iso_utc(1795337043.45), "2026-11-22T08:44:03Z");
  std::vector<CalibrationRecord> recs;
  recs.push_back({0, 1.79222e83, "node", {{"node", 0}, {"host", "h"}, {"ranks_per_node", 1}, {"device_name", "cpu"}}});
  recs.push_back({0, 150, "matmul",
                  {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 1}, {"m", 8}, {"n", 8}, {"k", 8},
                   {"seconds", 1e-6}, {"iterations", 3}}});
  auto cal = calibration_from_records(recs);
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  EXPECT_EQ(cal->measured_at, "9999-12-31T23:59:59Z");
}

TEST(Calibration, RecordsACalibrationFileCouldNotHoldAreSkipped) {
  // A fuzz find (tests/fuzz/regressions/calibration): a matmul record with split 0 was fitted into
  // a calibration whose file then refused "matmul[0].split: 0".
  std::vector<CalibrationRecord> recs;
  recs.push_back({0, 100, "node", {{"node", 0}, {"host", "h"}, {"ranks_per_node", 1}, {"device_name", "cpu"}}});
  auto matmul = [](int split) {
    return CalibrationRecord{0, 150, "matmul",
                             {{"precision", "fp32"}, {"threads", 1}, {"ranks_per_node", 1}, {"m", 8}, {"n", 8},
                              {"k", 8}, {"seconds", 1e-6}, {"iterations", 3}, {"split", split}}};
  };
  recs.push_back(matmul(0));
  recs.push_back(matmul(1));
  const CalibrationSamples samples = samples_from_records(recs);
  ASSERT_EQ(samples.errors.size(), 1u);
  EXPECT_EQ(samples.errors[0],
            "calibration record of rank 0: kind matmul: precision fp32|bf16, seconds > 0, m, n, k, threads, "
            "ranks_per_node, count, split >= 1 and experts_ep >= 0");
  auto cal = calibration_from_records(recs);
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  ASSERT_EQ(cal->matmul.size(), 1u);
  EXPECT_EQ(cal->matmul[0].split, 1);
  auto back = calibration_from_json(to_json(*cal));
  ASSERT_TRUE(back.ok()) << back.error().message();
}

TEST(Calibration, ASplitStepOnAPlacementThatCannotExistIsSkipped) {
  // A fuzz find (tests/fuzz/regressions/calibration, a timeout): 137,727,366 ranks per node on a
  // world of 4 was estimated, and took seconds.
  const RunConfig config = split_config(MeshShape{1, 4, 1, 1});
  auto split = [&](int64_t world, int64_t per_node) {
    return CalibrationRecord{0, 170, "split_step",
                             {{"config", to_json(config)}, {"world", world}, {"ranks_per_node", per_node},
                              {"compute_s", 0.01}, {"comm_s", {{"dp_shard", 0.002}}}}};
  };
  const std::string why =
      "calibration record of rank 0: kind split_step: world from 1 to 1048576 and a multiple of ranks_per_node >= 1, "
      "compute_s and each comm_s a finite number >= 0";
  for (auto [world, per_node] : {std::pair<int64_t, int64_t>{4, 137727366}, {4, 3}, {int64_t{1} << 21, 8}, {0, 1}}) {
    const CalibrationSamples s = samples_from_records({split(world, per_node)});
    EXPECT_TRUE(s.split_steps.empty()) << world << " " << per_node;
    ASSERT_EQ(s.errors.size(), 1u);
    EXPECT_EQ(s.errors[0], why);
  }
  EXPECT_EQ(samples_from_records({split(4, 2)}).split_steps.size(), 1u);
}

// The splits calibrate trains: written out by hand from docs/estimator.md's rule, not computed.
TEST(Calibration, SplitStepShapesInsideANodeAndAcrossTwo) {
  auto compact = [](const std::vector<MeshShape>& shapes) {
    std::vector<std::string> out;
    for (const MeshShape& s : shapes) out.push_back(s.compact());
    return out;
  };
  // One node of 4: the step alone, every tp x cp of 2 and 4, FSDP over 2 and 4.
  const std::vector<std::string> one_node = {"4x1x1x1", "2x1x2x1", "2x1x1x2", "2x2x1x1",
                                             "1x1x4x1", "1x1x2x2", "1x1x1x4", "1x4x1x1"};
  EXPECT_EQ(compact(split_step_shapes(4, 4)), one_node);
  // Two nodes of 4: the same with every shape doubled in dp_replicate, then across both nodes
  // (d = 8): tp x cp, FSDP over 8, and FSDP across the nodes with tp 2 and tp 4 inside each.
  const std::vector<std::string> two_nodes = {"8x1x1x1", "4x1x2x1", "4x1x1x2", "4x2x1x1", "2x1x4x1",
                                              "2x1x2x2", "2x1x1x4", "2x4x1x1", "1x1x8x1", "1x1x4x2",
                                              "1x1x2x4", "1x1x1x8", "1x8x1x1", "1x4x1x2", "1x2x1x4"};
  EXPECT_EQ(compact(split_step_shapes(8, 4)), two_nodes);
  // A mixture of 8 experts: every tp x cp split of d inside a node again with ep = d (not across
  // the nodes: d = 8 takes its tp x cp's factors), FSDP over d with ep = d beside each FSDP split
  // (ep 8 across the nodes), and from d = 4 with ep = d / 2 (the experts FSDP-sharded over
  // pairs); of 6 experts: ep 2 at d = 2 (tp x cp and FSDP) and, at d = 4, ep 2 with efsdp 2
  // (neither 4 nor 8 divides 6).
  const std::vector<std::string> moe_8 = {
      "8x1x1x1",     "4x1x2x1",     "4x1x1x2",     "4x1x2x1/ep2", "4x1x1x2/ep2", "4x2x1x1",     "4x2x1x1/ep2",
      "2x1x4x1",     "2x1x2x2",     "2x1x1x4",     "2x1x4x1/ep4", "2x1x2x2/ep4", "2x1x1x4/ep4", "2x4x1x1",
      "2x4x1x1/ep4", "2x4x1x1/ep2", "1x1x8x1",     "1x1x4x2",     "1x1x2x4",     "1x1x1x8",     "1x8x1x1",
      "1x8x1x1/ep8", "1x8x1x1/ep4", "1x4x1x2",     "1x2x1x4"};
  EXPECT_EQ(compact(split_step_shapes(8, 4, 8)), moe_8);
  const auto moe_6 = compact(split_step_shapes(8, 4, 6));
  EXPECT_EQ(moe_6.size(), two_nodes.size() + 4);
  for (const char* s : {"4x1x2x1/ep2", "4x1x1x2/ep2", "4x2x1x1/ep2", "2x4x1x1/ep2"})
    EXPECT_EQ(std::count(moe_6.begin(), moe_6.end(), s), 1) << s;
  // One node of 4, 8 experts: tp x cp with ep = d at d = 2 and 4, ep 2 and 4 over pairs and over
  // 4, and ep 2 over 4 (efsdp 2).
  const auto moe_4 = compact(split_step_shapes(4, 4, 8));
  EXPECT_EQ(moe_4.size(), one_node.size() + 8);
  for (const char* s : {"2x1x2x1/ep2", "2x1x1x2/ep2", "1x1x4x1/ep4", "1x1x2x2/ep4", "1x1x1x4/ep4", "1x4x1x1/ep2"})
    EXPECT_EQ(std::count(moe_4.begin(), moe_4.end(), s), 1) << s;
  // 1,024 nodes of 8: 13 splits inside a node, 9 across two; every split covers the world.
  const auto big = split_step_shapes(8192, 8);
  EXPECT_EQ(big.size(), 22u);
  for (const MeshShape& s : big) EXPECT_EQ(s.world_size(), 8192) << s.compact();
  // One rank per node: only the step alone and the pair across two nodes.
  EXPECT_EQ(compact(split_step_shapes(2, 1)), (std::vector<std::string>{"2x1x1x1", "1x1x2x1", "1x1x1x2", "1x2x1x1"}));
  EXPECT_TRUE(split_step_shapes(0, 4).empty());
}

// ---- How far a prediction can be trusted: the calibration's own noise. ----

TEST(Calibration, StepNoiseFromTheSplitStepsDriftCheckAndSpread) {
  // Two splits, two ranks each. Split A was measured again at the end (the drift check):
  // rank 0 100 -> 112 ms (+12 %), rank 1 100 -> 104 ms (+4 %): its drift is their mean, +8 %.
  // Split B was not. Spreads: A 0.10 and 0.20 (mean 0.15), B 0.02 and 0.04 (mean 0.03), so
  // the median of the splits' spreads is (0.03 + 0.15) / 2 = 0.09; the band is max(0.08, 0.09).
  std::vector<CalibrationRecord> recs = node_of_two_records();
  const RunConfig a = split_config(MeshShape{1, 1, 1, 2}), b = split_config(MeshShape{1, 1, 2, 1});
  auto split = [](int rank, const RunConfig& c, double spread, double again) {
    nlohmann::json f = {{"config", to_json(c)}, {"world", 2}, {"ranks_per_node", 2}, {"step_s", 0.1},
                        {"compute_s", 0.08}, {"comm_s", {{"tp", 0.02}}}, {"iterations", 8}, {"spread", spread}};
    if (again > 0) f["again_step_s"] = again;
    return CalibrationRecord{rank, 170, "split_step", f};
  };
  recs.push_back(split(0, a, 0.10, 0.112));
  recs.push_back(split(1, a, 0.20, 0.104));
  recs.push_back(split(0, b, 0.02, 0));
  recs.push_back(split(1, b, 0.04, 0));
  const CalibrationSamples samples = samples_from_records(recs);
  ASSERT_EQ(samples.split_steps.size(), 2u);
  EXPECT_NEAR(samples.split_steps[0].drift, 0.08, 1e-12);
  EXPECT_EQ(samples.split_steps[0].drift_ranks, 2);
  EXPECT_EQ(samples.split_steps[1].drift_ranks, 0);
  EXPECT_NEAR(samples.split_steps[0].spread, 0.15, 1e-12);
  auto cal = calibration_from_records(recs);
  ASSERT_TRUE(cal.ok()) << cal.error().message();
  EXPECT_NEAR(cal->step_drift, 0.08, 1e-12);
  EXPECT_NEAR(cal->step_spread, 0.09, 1e-12);
  EXPECT_NEAR(cal->step_band(), 0.09, 1e-12);
  // A split that came back faster drifts as much as one that came back slower.
  recs[recs.size() - 4] = split(0, a, 0.10, 0.080);
  recs[recs.size() - 3] = split(1, a, 0.20, 0.080);
  EXPECT_NEAR(calibration_from_records(recs)->step_drift, 0.20, 1e-12);
  EXPECT_NEAR(calibration_from_records(recs)->step_band(), 0.20, 1e-12);
  // 100 ms, then 2.2 s: a drift of 21, a machine busy with something else. Refused in words,
  // never made into a calibration a store could not read back.
  recs[recs.size() - 4] = split(0, a, 0.10, 2.2);
  recs[recs.size() - 3] = split(1, a, 0.20, 2.2);
  auto busy = calibration_from_records(recs);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().field, "step_noise.drift");
  EXPECT_EQ(busy.error().kind, ErrorKind::does_not_fit);
  EXPECT_NE(busy.error().message().find("calibrate again when they are quiet"), std::string::npos);
  // Splits timed in two passes: step_s is both passes together, and the drift is the last
  // pass over the first (first_step_s), not over their mean: 90 -> 110 ms is +22 %, not +10 %.
  for (int rank : {0, 1}) {
    CalibrationRecord r = split(rank, a, 0.10, 0.110);
    r.fields["first_step_s"] = 0.090;
    recs[recs.size() - 4 + static_cast<size_t>(rank)] = r;
  }
  EXPECT_NEAR(samples_from_records(recs).split_steps[0].drift, 0.110 / 0.090 - 1, 1e-12);
  EXPECT_NEAR(calibration_from_records(recs)->step_drift, 0.110 / 0.090 - 1, 1e-12);
  // A first_step_s that is not a number gives no drift, not one over the two passes' mean.
  for (int rank : {0, 1}) recs[recs.size() - 4 + static_cast<size_t>(rank)].fields["first_step_s"] = "fast";
  EXPECT_EQ(samples_from_records(recs).split_steps[0].drift_ranks, 0);
  // Records from before the drift check have neither field: no noise measured, no band.
  std::vector<CalibrationRecord> old = node_of_two_records();
  nlohmann::json f = split(0, a, 0, 0).fields;
  f.erase("spread");
  old.push_back({0, 170, "split_step", f});
  auto before = calibration_from_records(old);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->step_band(), 0.0);
}

TEST(Calibration, StepNoiseRoundTripsAndErrorsNameTheField) {
  Calibration c;
  c.fingerprint.nodes = {{"h", 2, "cpu", 2}};
  c.measured_at = "2026-11-28T10:00:00Z";
  c.matmul = {{Precision::fp32, 1, 2, 1e9, 1}};
  c.step_drift = 0.125;
  c.step_spread = 0.0625;
  const nlohmann::json j = to_json(c);
  auto back = calibration_from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->step_drift, 0.125);
  EXPECT_EQ(back->step_spread, 0.0625);
  EXPECT_EQ(to_json(*back), j);
  nlohmann::json bad = j;
  bad["step_noise"]["drift"] = -0.5;
  EXPECT_EQ(calibration_from_json(bad).error().message(), "step_noise.drift: -0.500000: a share from 0 to 10 (0: not measured)");
  bad = j;
  bad["step_noise"]["spread"] = "wide";
  EXPECT_EQ(calibration_from_json(bad).error().message(), "step_noise.spread: \"wide\": a number");
  bad = j;
  bad["step_noise"] = 3;
  EXPECT_EQ(calibration_from_json(bad).error().message(), "step_noise: 3: an object {drift, spread}");
  bad = j;
  bad.erase("step_noise");
  ASSERT_TRUE(calibration_from_json(bad).ok());
  EXPECT_EQ(calibration_from_json(bad)->step_band(), 0.0);
}

TEST(CalibratedEstimate, StepBandIsTheCalibrationsNoiseOrTheFitsResidual) {
  ModelSpec tiny = preset("tiny");
  TimeQuery q = calibrated_query(tiny, {1, 1, 1, 2}, 2);
  EXPECT_EQ(estimate_time(q).step_band, 0.0);  // noise not measured
  q.calibration->step_drift = 0.12;
  q.calibration->step_spread = 0.05;
  EXPECT_DOUBLE_EQ(estimate_time(q).step_band, 0.12);
  // A fit that corrected a term: its median residual when larger than the calibration's band.
  auto fit = std::make_shared<RunFit>();
  fit->runs = 3;
  fit->median_residual = 0.2;
  fit->factors = {{{FitTerm::compute, LinkKind::intra_node, 2, 1, Precision::fp32}, 1.1, 3}};
  q.fit = fit;
  const TimeEstimate fitted = estimate_time(q);
  ASSERT_TRUE(fitted.compute_fitted);
  EXPECT_DOUBLE_EQ(fitted.step_band, 0.2);
  fit->median_residual = 0.03;
  EXPECT_DOUBLE_EQ(estimate_time(q).step_band, 0.12);
  // Hardware defaults alone: nothing measured, no band.
  q.calibration.reset();
  q.fit.reset();
  EXPECT_EQ(estimate_time(q).step_band, 0.0);
}

TEST(Calibration, SplitStepsAreMeasuredUpToTheRunsOwnAccumulation) {
  RunConfig run;
  run.training.micro_batch = 1;
  run.training.global_batch = 8;
  // 4 ranks: dp 4 accumulates 2, dp 2 accumulates 4, dp 1 (tp x cp = 4) accumulates 8.
  EXPECT_EQ(split_step_micro_batches(run, MeshShape{4, 1, 1, 1}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(split_step_micro_batches(run, MeshShape{1, 4, 1, 1}), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(split_step_micro_batches(run, MeshShape{2, 1, 1, 2}), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(split_step_micro_batches(run, MeshShape{1, 1, 2, 2}), (std::vector<int64_t>{1, 8}));
  // At least 2 (the slope needs two counts), at most kMaxSplitStepMicroBatches.
  run.training.global_batch = 4;
  EXPECT_EQ(split_step_micro_batches(run, MeshShape{4, 1, 1, 1}), (std::vector<int64_t>{1, 2}));
  run.training.global_batch = 256;
  EXPECT_EQ(split_step_micro_batches(run, MeshShape{1, 1, 1, 4}), (std::vector<int64_t>{1, kMaxSplitStepMicroBatches}));
  // No global batch, or one the split's dp ranks cannot share: 1 and 2.
  run.training.global_batch = 0;
  EXPECT_EQ(split_step_micro_batches(run, MeshShape{1, 1, 1, 4}), (std::vector<int64_t>{1, 2}));
  run.training.global_batch = 6;
  run.training.micro_batch = 4;
  EXPECT_EQ(split_step_micro_batches(run, MeshShape{1, 1, 1, 4}), (std::vector<int64_t>{1, 2}));
}

// The experts' dispatch and combine (ep > 1): count all-to-alls of (ep - 1)/ep R h c bytes each at
// the calibration's all-to-all fit for the ep group's link and size; without that fit, at
// HardwareModel's (ep - 1) latencies and link bandwidth, as the other axes fall back.
TEST(CalibratedEstimate, ExpertAllToAllUsesItsOwnFit) {
  ModelSpec moe = preset("qwen3-30b-a3b");
  TimeQuery q = calibrated_query(moe, {1, 4, 1, 1}, 4);
  q.shape.ep = 4;
  q.moe_imbalance = 1.0;
  const TimeEstimate before = estimate_time(q);  // no all-to-all fit yet: the defaults
  const double count = 5.0 * 48;  // per sparse layer 4 of the rows, 1 of the 128 int64 counts
  const double R = 8.0 * 256;      // top-k 8 x T 256 routed copies
  const double bytes = 3.0 / 4.0 * (4.0 * 48 * R * 2048 * 4 + 48 * 128 * 8);
  EXPECT_DOUBLE_EQ(before.comm_ep.bytes, bytes);
  EXPECT_FALSE(before.comm_ep_calibrated);
  EXPECT_NEAR(before.comm_ep.seconds, count * 3 * q.hardware.latency_s + bytes / q.hardware.intra_node_bytes_per_s,
              1e-9 * before.comm_ep.seconds);

  q.calibration->collectives.push_back({LinkKind::intra_node, Collective::all_to_all, 4, {2e-4, 0.8e9}, 4, 0});
  const TimeEstimate after = estimate_time(q);
  EXPECT_TRUE(after.comm_ep_calibrated);
  EXPECT_DOUBLE_EQ(after.comm_ep.bytes, bytes);
  EXPECT_NEAR(after.comm_ep.seconds, count * 2e-4 + bytes / 0.8e9, 1e-12 * after.comm_ep.seconds);
  EXPECT_NEAR(after.step_s, after.compute_s + after.comm_s - after.hidden_comm_s, 1e-12 * after.step_s);
  // An inter-node fit does not answer for a group inside a node.
  q.calibration->collectives.back().link = LinkKind::inter_node;
  EXPECT_FALSE(estimate_time(q).comm_ep_calibrated);
}
