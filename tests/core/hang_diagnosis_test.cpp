// The diagnosis of hangs, mismatches and stragglers (core/hang_diagnosis.h) from ranks' reports
// built as the follower stores them.
#include "core/hang_diagnosis.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>

namespace meshwork {
namespace {

constexpr double kNow = 1'800'000'000.0;

FlightGroup group(GroupKind k) { return FlightGroup{false, k}; }

RankObservation rank_at(int rank, int per_node, int64_t last_step, double last_time) {
  RankObservation r;
  r.rank = rank;
  r.node = rank / per_node;
  r.host = "node" + std::to_string(r.node);
  r.pid = 4000 + rank;
  r.last_step = last_step;
  r.last_step_time = last_time;
  r.process = "running";
  return r;
}

// A rank inside `op` on `g` at `seq` since `enter`, having entered the others' last seqs.
void waiting_in(RankObservation& r, FlightGroup g, FlightOpKind op, int64_t seq, int64_t bytes, double enter,
                std::vector<std::pair<FlightGroup, int64_t>> last_seq = {}) {
  FlightState f;
  f.rank = r.rank;
  f.pid = r.pid;
  f.step = r.last_step + 1;
  f.phase = FlightPhase::backward;
  f.layer = 0;
  f.activity = enter;
  FlightOp cur;
  cur.group = g;
  cur.op = op;
  cur.seq = seq;
  cur.bytes = bytes;
  cur.enter = enter;
  f.current = cur;
  last_seq.push_back({g, seq});
  f.last_seq = last_seq;
  r.flight = f;
  r.stalled = true;
}

void busy_in(RankObservation& r, FlightPhase phase, int layer, double since,
             std::vector<std::pair<FlightGroup, int64_t>> last_seq) {
  FlightState f;
  f.rank = r.rank;
  f.pid = r.pid;
  f.step = r.last_step + 1;
  f.phase = phase;
  f.layer = layer;
  f.phase_since = since;
  f.activity = since;
  f.last_seq = std::move(last_seq);
  r.flight = f;
  r.stalled = true;
}

DiagnosisInput four_ranks() {
  DiagnosisInput in;
  in.shape = MeshShape(1, 2, 1, 2);  // dp_shard 2 x tp 2: rank = 2 * dp_shard + tp
  in.ranks_per_node = 2;
  in.now = kNow;
  in.started = kNow - 400;
  for (int r = 0; r < 4; ++r) in.ranks.push_back(rank_at(r, 2, 41, kNow - 130));
  for (int r = 0; r < 4; ++r) {
    RankTiming t;
    t.rank = r;
    t.steps = 10;
    t.step_s = 0.5;
    t.compute_s = 0.4;
    t.comm_s[Axis::dp_shard] = 0.1;
    in.timings.push_back(t);
  }
  return in;
}

TEST(HangDiagnosis, AStoppedRankIsTheCulpritThroughAChainOfWaits) {
  DiagnosisInput in = four_ranks();
  const double t0 = kNow - 125;
  // Rank 3 is stopped in backward layer 1; rank 1 waits for it on dp_shard ({1, 3}), rank 2 on
  // tp ({2, 3}), and rank 0 waits for rank 2 on dp_shard ({0, 2}): rank 3 alone is to blame.
  busy_in(in.ranks[3], FlightPhase::backward, 1, t0, {{group(GroupKind::dp_shard), 10}, {group(GroupKind::tp), 49}});
  in.ranks[3].process = "stopped";
  waiting_in(in.ranks[1], group(GroupKind::dp_shard), FlightOpKind::all_gather, 11, 4096, t0 + 1);
  waiting_in(in.ranks[2], group(GroupKind::tp), FlightOpKind::all_reduce, 50, 512, t0 + 2,
             {{group(GroupKind::dp_shard), 10}});
  waiting_in(in.ranks[0], group(GroupKind::dp_shard), FlightOpKind::all_gather, 11, 4096, t0 + 1,
             {{group(GroupKind::tp), 50}});

  const Diagnosis d = diagnose(in);
  EXPECT_EQ(d.state, HealthState::hang);
  EXPECT_DOUBLE_EQ(d.threshold_s, 60);  // 5 x 0.5 s is less than a minute
  EXPECT_NEAR(d.silent_s, 130, 1e-6);
  ASSERT_EQ(d.culprits.size(), 1u);
  const Culprit& c = d.culprits[0];
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.node, 1);
  EXPECT_EQ(c.pid, 4003);
  EXPECT_EQ(c.process, "stopped");
  EXPECT_EQ(c.phase, "backward layer 1");
  EXPECT_EQ(c.waited_by, (std::vector<int>{1, 2}));
  ASSERT_EQ(d.waiting.size(), 3u);  // dp_shard {0,2} #11, dp_shard {1,3} #11, tp {2,3} #50
  bool saw_rank1 = false;
  for (const WaitingGroup& g : d.waiting) {
    if (g.ranks == std::vector<int>{1}) {
      saw_rank1 = true;
      EXPECT_EQ(g.axis, "dp_shard");
      EXPECT_EQ(g.op, "all_gather");
      EXPECT_EQ(g.seq, 11);
      EXPECT_EQ(g.missing, std::vector<int>{3});
    }
  }
  EXPECT_TRUE(saw_rank1);
  const std::string s = d.summary();
  EXPECT_NE(s.find("hung for 2 min 10 s"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 3 (node1, pid 4003) never entered it: stopped, last in backward layer 1"),
            std::string::npos)
      << s;
  const nlohmann::json j = d.to_json();
  EXPECT_EQ(j["state"], "hang");
  EXPECT_EQ(j["culprits"][0]["rank"], 3);
  EXPECT_EQ(j["culprits"][0]["process"], "stopped");
  for (const char* key : {"rank", "node", "pid", "phase", "process"}) EXPECT_TRUE(j["culprits"][0].contains(key));
  for (const char* key : {"axis", "op", "seq", "ranks"}) EXPECT_TRUE(j["waiting"][0].contains(key));
}

TEST(HangDiagnosis, SilenceShorterThanTheThresholdIsHealthy) {
  DiagnosisInput in = four_ranks();
  for (RankObservation& r : in.ranks) r.last_step_time = kNow - 20;
  waiting_in(in.ranks[1], group(GroupKind::dp_shard), FlightOpKind::all_gather, 11, 4096, kNow - 19);
  Diagnosis d = diagnose(in);
  EXPECT_EQ(d.state, HealthState::healthy);
  EXPECT_TRUE(d.culprits.empty());
  // The threshold is settable: 10 s of silence with T = 5 s is a hang.
  in.hang_after_s = 5;
  d = diagnose(in);
  EXPECT_EQ(d.state, HealthState::hang);
  EXPECT_DOUBLE_EQ(d.threshold_s, 5);
}

TEST(HangDiagnosis, TheDefaultThresholdGrowsWithSlowSteps) {
  DiagnosisInput in = four_ranks();
  for (RankTiming& t : in.timings) t.step_s = 30;
  for (RankObservation& r : in.ranks) r.last_step_time = kNow - 130;
  const Diagnosis d = diagnose(in);
  EXPECT_DOUBLE_EQ(d.threshold_s, 150);
  EXPECT_EQ(d.state, HealthState::healthy);  // 130 s without a step is normal for 30 s steps
}

TEST(HangDiagnosis, DifferentOpsAtOneSequenceNumberAreAMismatchNamingBothSides) {
  DiagnosisInput in = four_ranks();
  waiting_in(in.ranks[0], group(GroupKind::tp), FlightOpKind::all_reduce, 7, 1024, kNow - 100);
  waiting_in(in.ranks[1], group(GroupKind::tp), FlightOpKind::broadcast, 7, 1024, kNow - 100);
  const Diagnosis d = diagnose(in);
  EXPECT_EQ(d.state, HealthState::mismatch);
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0].axis, "tp");
  EXPECT_EQ(d.mismatches[0].seq, 7);
  ASSERT_EQ(d.mismatches[0].sides.size(), 2u);
  const std::string s = d.summary();
  EXPECT_NE(s.find("rank 0 call all_reduce of 1024 bytes"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 1 call broadcast of 1024 bytes"), std::string::npos) << s;
  // The same op with another size is a mismatch too.
  waiting_in(in.ranks[1], group(GroupKind::tp), FlightOpKind::all_reduce, 7, 2048, kNow - 100);
  EXPECT_EQ(diagnose(in).state, HealthState::mismatch);
}

// A pipeline neighbour stopped inside its send while the other waits in the matching recv (the
// same pp sequence number, the same bytes): one exchange, so the stopped rank is the culprit and
// nothing is a mismatch. A send against a recv of another size still is one.
TEST(HangDiagnosis, ASendAndTheRecvItFeedsAreOneExchangeNotAMismatch) {
  DiagnosisInput in = four_ranks();
  in.shape = MeshShape(1, 1, 1, 2, 2);  // pp 2 x tp 2: ranks 1 and 3 are one pp pair
  waiting_in(in.ranks[1], group(GroupKind::pp), FlightOpKind::recv, 116, 8192, kNow - 100);
  waiting_in(in.ranks[3], group(GroupKind::pp), FlightOpKind::send, 116, 8192, kNow - 100);
  in.ranks[3].process = "stopped";
  const Diagnosis d = diagnose(in);
  EXPECT_TRUE(d.mismatches.empty());
  EXPECT_NE(d.state, HealthState::mismatch);
  ASSERT_FALSE(d.culprits.empty()) << d.summary();
  EXPECT_EQ(d.culprits[0].rank, 3);
  waiting_in(in.ranks[3], group(GroupKind::pp), FlightOpKind::send, 116, 4096, kNow - 100);
  const Diagnosis other = diagnose(in);
  EXPECT_EQ(other.state, HealthState::mismatch);
  ASSERT_EQ(other.mismatches.size(), 1u);
  EXPECT_NE(other.summary().find("rank 3 call send of 4096 bytes"), std::string::npos) << other.summary();
}

TEST(HangDiagnosis, AGoneRankIsNamedWithItsEnd) {
  DiagnosisInput in = four_ranks();
  in.ranks[1].process = "gone";
  in.ranks[1].ended = "failed: killed by signal KILL (9)";
  waiting_in(in.ranks[3], group(GroupKind::dp_shard), FlightOpKind::all_gather, 4, 64, kNow - 100);
  const Diagnosis d = diagnose(in);
  ASSERT_EQ(d.state, HealthState::hang);
  ASSERT_EQ(d.culprits.size(), 1u);
  EXPECT_EQ(d.culprits[0].rank, 1);
  EXPECT_EQ(d.culprits[0].process, "gone");
  EXPECT_NE(d.summary().find("killed by signal KILL (9)"), std::string::npos) << d.summary();
}

TEST(HangDiagnosis, AMemberPastTheSequenceNumberIsNotMissing) {
  DiagnosisInput in = four_ranks();
  // Rank 0 waits at dp_shard #11; its peer rank 2 has entered #11 already (and left it).
  waiting_in(in.ranks[0], group(GroupKind::dp_shard), FlightOpKind::all_gather, 11, 64, kNow - 100);
  busy_in(in.ranks[2], FlightPhase::forward, 0, kNow - 100, {{group(GroupKind::dp_shard), 11}});
  const Diagnosis d = diagnose(in);
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_TRUE(d.waiting[0].missing.empty());
  EXPECT_TRUE(d.culprits.empty());
}

TEST(HangDiagnosis, ASlowRankIsAComputeStragglerAndItsPeersWaitOnTheirAxis) {
  DiagnosisInput in = four_ranks();
  for (RankObservation& r : in.ranks) r.last_step_time = kNow - 1;
  for (RankTiming& t : in.timings) {
    t.step_s = 0.9;
    t.compute_s = 0.4;
    t.comm_s[Axis::dp_shard] = 0.5;
  }
  in.timings[2].compute_s = 0.85;
  in.timings[2].comm_s[Axis::dp_shard] = 0.05;
  const Diagnosis d = diagnose(in);
  EXPECT_EQ(d.state, HealthState::straggler);
  ASSERT_EQ(d.stragglers.size(), 1u);
  EXPECT_EQ(d.stragglers[0].rank, 2);
  EXPECT_EQ(d.stragglers[0].node, 1);
  EXPECT_EQ(d.stragglers[0].slow_in, "compute");
  EXPECT_EQ(d.stragglers[0].others_wait_on, "dp_shard");
  EXPECT_NE(d.summary().find("rank 2 (node1) is slow in compute"), std::string::npos) << d.summary();
}

TEST(HangDiagnosis, ARankWaitingLongerOnOneAxisIsSlowInThatAxis) {
  DiagnosisInput in = four_ranks();
  for (RankObservation& r : in.ranks) r.last_step_time = kNow - 1;
  in.timings[1].comm_s[Axis::tp] = 0.3;  // tp is 2: its link is slow; its compute is normal
  for (RankTiming& t : in.timings) t.comm_s[Axis::tp] = t.rank == 1 ? 0.3 : 0.02;
  const Diagnosis d = diagnose(in);
  ASSERT_EQ(d.stragglers.size(), 1u);
  EXPECT_EQ(d.stragglers[0].rank, 1);
  EXPECT_EQ(d.stragglers[0].slow_in, "waiting on tp");
}

// Per-step means measured on a real run (tiny, dp_shard 2 x tp 2, four ranks on two loaded
// cores, 96 steps): rank 3 under a SIGSTOP/SIGCONT duty cycle (150 ms of every 300 ms), or
// healthy (180 steps). Most of a tiny step is inside tp collectives, so the stops mostly land
// there: rank 3's own waits grow as its peers' do, and its CPU time is no more than theirs.
struct MeasuredRank {
  double step_s, compute_s, dp_shard_s, tp_s, cpu_s;
};
DiagnosisInput measured(const std::array<MeasuredRank, 4>& m) {
  DiagnosisInput in = four_ranks();
  for (RankObservation& r : in.ranks) r.last_step_time = kNow - 1;
  for (RankTiming& t : in.timings) {
    const MeasuredRank& r = m[static_cast<size_t>(t.rank)];
    t.step_s = t.step_mean_s = r.step_s;
    t.compute_s = r.compute_s;
    t.comm_s = t.comm_mean_s = AxisArray<double>::of(0, r.dp_shard_s, 0, r.tp_s);
    t.cpu_mean_s = r.cpu_s;
  }
  return in;
}
constexpr std::array<MeasuredRank, 4> kDutyCycledRank3 = {{{0.1556, 0.0074, 0.0747, 0.0736, 0.02125},
                                                          {0.1556, 0.0076, 0.0931, 0.0549, 0.02167},
                                                          {0.1556, 0.0076, 0.0233, 0.1247, 0.0225},
                                                          {0.1556, 0.0093, 0.0454, 0.1009, 0.0204}}};
constexpr std::array<MeasuredRank, 4> kHealthy = {{{0.0833, 0.0096, 0.01783, 0.05594, 0.03017},
                                                  {0.0833, 0.0089, 0.01917, 0.05528, 0.02811},
                                                  {0.0833, 0.0089, 0.01956, 0.05494, 0.02678},
                                                  {0.0833, 0.0092, 0.02083, 0.05333, 0.02822}}};

TEST(HangDiagnosis, ARankStoppedNowAndThenIsNotRunningAndItsWaitingPeersAreNotNamed) {
  const Diagnosis d = diagnose(measured(kDutyCycledRank3));
  ASSERT_EQ(d.state, HealthState::straggler) << d.summary();
  // Rank 2 waits on 3 in tp and so comes late to dp_shard, where rank 0 waits on it: held up by
  // rank 3 itself, it is not named; nor is rank 1, which waits on 3 in dp_shard.
  ASSERT_EQ(d.stragglers.size(), 1u) << d.summary();
  const Straggler& s = d.stragglers[0];
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.node, 1);
  EXPECT_EQ(s.slow_in, "not running");
  EXPECT_EQ(s.others_wait_on, "dp_shard");
  EXPECT_NEAR(s.seconds, 0.0931 - 0.0454, 1e-9);  // rank 1 waits that much longer on dp_shard
  EXPECT_NE(d.summary().find("rank 3 (node1) is not running"), std::string::npos) << d.summary();
  // Without CPU time (an older meshtrain's records) the old rules judge, and name a waiter.
  DiagnosisInput old = measured(kDutyCycledRank3);
  for (RankTiming& t : old.timings) t.cpu_mean_s.reset();
  const Diagnosis before = diagnose(old);
  EXPECT_TRUE(std::any_of(before.stragglers.begin(), before.stragglers.end(),
                          [](const Straggler& st) { return st.rank != 3; }))
      << before.summary();
}

TEST(HangDiagnosis, MeasuredHealthyRanksOnSharedCoresNameNoStraggler) {
  const Diagnosis d = diagnose(measured(kHealthy));
  EXPECT_EQ(d.state, HealthState::healthy) << d.summary();
}

TEST(HangDiagnosis, CpuTimeTellsALongerComputeFromARankThatWasNotRunning) {
  // Rank 2's steps hold 0.45 s more outside collectives; ranks 0 and 3 wait on it (dp_shard
  // {0, 2}, tp {2, 3}).
  DiagnosisInput in = four_ranks();
  for (RankObservation& r : in.ranks) r.last_step_time = kNow - 1;
  for (RankTiming& t : in.timings) {
    t.step_s = t.step_mean_s = 0.9;
    t.compute_s = t.rank == 2 ? 0.85 : 0.4;
    t.comm_s = t.comm_mean_s = AxisArray<double>::of(0, t.rank == 2 ? 0.05 : 0.5, 0, 0);
    t.cpu_mean_s = 0.4;
  }
  // It used that much more CPU time: it computed longer.
  in.timings[2].cpu_mean_s = 0.85;
  Diagnosis d = diagnose(in);
  ASSERT_EQ(d.stragglers.size(), 1u) << d.summary();
  EXPECT_EQ(d.stragglers[0].rank, 2);
  EXPECT_EQ(d.stragglers[0].slow_in, "compute");
  EXPECT_DOUBLE_EQ(d.stragglers[0].seconds, 0.85);
  EXPECT_DOUBLE_EQ(d.stragglers[0].median_s, 0.4);
  EXPECT_EQ(d.stragglers[0].others_wait_on, "dp_shard");
  // The same wall times on the CPU time of its peers (a cgroup limit throttles it): not running.
  in.timings[2].cpu_mean_s = 0.4;
  d = diagnose(in);
  ASSERT_EQ(d.stragglers.size(), 1u) << d.summary();
  EXPECT_EQ(d.stragglers[0].rank, 2);
  EXPECT_EQ(d.stragglers[0].slow_in, "not running");
  EXPECT_NEAR(d.stragglers[0].seconds, 0.45, 1e-9);
}

TEST(HangDiagnosis, EvenRanksNameNoStraggler) {
  DiagnosisInput in = four_ranks();
  for (RankObservation& r : in.ranks) r.last_step_time = kNow - 1;
  in.timings[0].compute_s = 0.41;  // noise
  const Diagnosis d = diagnose(in);
  EXPECT_EQ(d.state, HealthState::healthy);
  EXPECT_TRUE(d.stragglers.empty());
}

TEST(HangDiagnosis, EightThousandRanksWaitingOnOneStoppedRank) {
  // 1,024 nodes x 8: every rank but 5000 waits in the world's all-reduce; 5000 is stopped.
  DiagnosisInput in;
  in.shape = MeshShape(16, 64, 1, 8);
  in.ranks_per_node = 8;
  in.now = kNow;
  in.started = kNow - 1000;
  const FlightGroup world{true, GroupKind::dp};
  for (int r = 0; r < 8192; ++r) {
    in.ranks.push_back(rank_at(r, 8, 99, kNow - 300));
    if (r == 5000) {
      busy_in(in.ranks.back(), FlightPhase::data, -1, kNow - 299, {{world, 200}});
      in.ranks.back().process = "stopped";
    } else {
      waiting_in(in.ranks.back(), world, FlightOpKind::all_reduce, 201, 8, kNow - 298);
    }
  }
  const Diagnosis d = diagnose(in);
  ASSERT_EQ(d.culprits.size(), 1u);
  EXPECT_EQ(d.culprits[0].rank, 5000);
  EXPECT_EQ(d.culprits[0].node, 625);
  EXPECT_EQ(d.culprits[0].phase, "data");
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_EQ(d.waiting[0].axis, "world");
  EXPECT_EQ(d.waiting[0].ranks.size(), 8191u);
  EXPECT_NE(d.summary().find("ranks 0-4999, 5001-8191 wait in all_reduce on world #201"), std::string::npos)
      << d.summary().substr(0, 300);
}

TEST(HangDiagnosis, ARankStoppedInsideACollectiveHoldsItUp) {
  // SIGSTOP lands mid-collective more often than not: rank 3 is stopped inside dp_shard #12 with
  // rank 1 ({1, 3}); rank 2 waits for it on tp #50 ({2, 3}); rank 0 waits for rank 1 on tp #40.
  DiagnosisInput in = four_ranks();
  const double t0 = kNow - 125;
  waiting_in(in.ranks[3], group(GroupKind::dp_shard), FlightOpKind::reduce_scatter, 12, 4096, t0,
             {{group(GroupKind::tp), 49}});
  in.ranks[3].process = "stopped";
  in.ranks[3].flight->layer = 1;
  waiting_in(in.ranks[1], group(GroupKind::dp_shard), FlightOpKind::reduce_scatter, 12, 4096, t0,
             {{group(GroupKind::tp), 39}});
  waiting_in(in.ranks[2], group(GroupKind::tp), FlightOpKind::all_gather, 50, 512, t0);
  waiting_in(in.ranks[0], group(GroupKind::tp), FlightOpKind::all_gather, 40, 512, t0);
  const Diagnosis d = diagnose(in);
  ASSERT_EQ(d.state, HealthState::hang) << d.summary();
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary();
  EXPECT_EQ(d.culprits[0].rank, 3);
  EXPECT_EQ(d.culprits[0].phase, "inside reduce_scatter on dp_shard #12, backward layer 1");
  EXPECT_EQ(d.culprits[0].waited_by, (std::vector<int>{1, 2}));
  for (const WaitingGroup& g : d.waiting) {
    for (int r : g.ranks) EXPECT_NE(r, 3) << "a stopped rank is not a waiter";
  }
  EXPECT_NE(d.summary().find("rank 3 (node1, pid 4003) holds it up: stopped"), std::string::npos) << d.summary();
}

TEST(HangDiagnosis, PipelineStagesAreComparedWithinTheirStage) {
  // pp 2 x tp 2: stage 0 (ranks 0, 1) waits on pp for the bubble; nobody is a straggler.
  DiagnosisInput in = four_ranks();
  in.shape = MeshShape(1, 1, 1, 2, 2);
  for (RankObservation& r : in.ranks) r.last_step_time = kNow - 1;
  for (RankTiming& t : in.timings) {
    t.comm_s = {};
    t.comm_s[Axis::pp] = t.rank < 2 ? 0.36 : 0.19;
    t.compute_s = t.rank < 2 ? 0.1 : 0.27;
    t.step_s = 0.46;
  }
  Diagnosis d = diagnose(in);
  EXPECT_EQ(d.state, HealthState::healthy) << d.summary();
  // Within stage 1, rank 3 computing twice as long as rank 2 is one.
  in.timings[3].compute_s = 0.6;
  d = diagnose(in);
  ASSERT_EQ(d.stragglers.size(), 1u) << d.summary();
  EXPECT_EQ(d.stragglers[0].rank, 3);
}

TEST(HangDiagnosis, AFailedRunBlamesTheRankItsRootCauseNames) {
  DiagnosisInput in = four_ranks();
  for (int r = 0; r < 3; ++r) in.ranks[static_cast<size_t>(r)].ended = "failed: Connection closed by peer";
  in.ranks[3].ended = "failed: rank 3 on node 1: killed by signal KILL (9)";
  const Diagnosis d = diagnose_ended(in, "failed", "node 1 (node1), rank 3: killed by signal 9 (SIGKILL) after step 4\nmore");
  EXPECT_EQ(d.state, HealthState::failed);
  ASSERT_EQ(d.culprits.size(), 1u);
  EXPECT_EQ(d.culprits[0].rank, 3);
  EXPECT_EQ(d.culprits[0].process, "gone");
  EXPECT_NE(d.summary().find("killed by signal KILL (9)"), std::string::npos) << d.summary();
  EXPECT_EQ(diagnose_ended(in, "ok", "").state, HealthState::healthy);
}

TEST(HangDiagnosis, AFailedSlurmRunBlamesTheRankItsExitRecordNamesBelowTheJobsState) {
  DiagnosisInput in = four_ranks();
  for (int r = 0; r < 3; ++r) in.ranks[static_cast<size_t>(r)].ended = "failed: Connection reset by peer";
  in.ranks[3].ended = "failed: rank 3 on node 1: killed by signal KILL (9)";
  const Diagnosis d = diagnose_ended(in, "failed",
                                     "Slurm job 2: FAILED (NonZeroExitCode), exit code 3:0: the job ended with a "
                                     "non-zero exit code\nnode 1 (Slurm node n2), rank 3: killed by signal 9 (SIGKILL) "
                                     "after step 4");
  EXPECT_EQ(d.state, HealthState::failed);
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary();
  EXPECT_EQ(d.culprits[0].rank, 3);
  EXPECT_EQ(d.culprits[0].process, "gone");
}

TEST(HangDiagnosis, RankRangesAndDurations) {
  EXPECT_EQ(rank_ranges({5, 0, 1, 2, 3, 7, 8}), "0-3, 5, 7, 8");
  EXPECT_EQ(rank_ranges({}), "");
  EXPECT_EQ(duration_words(130), "2 min 10 s");
  EXPECT_EQ(duration_words(45), "45 s");
  EXPECT_EQ(duration_words(3780), "1 h 3 min");
}

}  // namespace
}  // namespace meshwork

namespace meshwork {
namespace {

FlightGroup expert_group(ExpertGroupKind k) { return FlightGroup{false, GroupKind::dp, k}; }

TEST(HangDiagnosis, AHangInTheExpertsAllToAllIsNamedOnEp) {
  // dp_shard 2 x tp 2 with ep 2: ep groups {0, 1} and {2, 3}, efsdp groups {0, 2} and {1, 3}.
  DiagnosisInput in = four_ranks();
  in.shape.ep = 2;
  const double t0 = kNow - 125;
  const FlightGroup ep = expert_group(ExpertGroupKind::ep), efsdp = expert_group(ExpertGroupKind::efsdp);
  // Rank 1 is stopped in forward layer 2 before the dispatch; rank 0 waits for it in the
  // all-to-all on ep, rank 3 in the experts' all-gather on efsdp, and rank 2 for rank 0 on efsdp.
  busy_in(in.ranks[1], FlightPhase::forward, 2, t0, {{ep, 6}, {efsdp, 3}});
  in.ranks[1].process = "stopped";
  waiting_in(in.ranks[0], ep, FlightOpKind::all_to_all, 7, 2048, t0 + 1, {{efsdp, 3}});
  waiting_in(in.ranks[2], efsdp, FlightOpKind::all_gather, 4, 8192, t0 + 2, {{ep, 7}});
  waiting_in(in.ranks[3], efsdp, FlightOpKind::all_gather, 4, 8192, t0 + 2, {{ep, 7}});

  const Diagnosis d = diagnose(in);
  ASSERT_EQ(d.state, HealthState::hang) << d.summary();
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary();
  EXPECT_EQ(d.culprits[0].rank, 1);
  EXPECT_EQ(d.culprits[0].process, "stopped");
  EXPECT_EQ(d.culprits[0].phase, "forward layer 2");
  EXPECT_EQ(d.culprits[0].waited_by, (std::vector<int>{0, 3}));
  ASSERT_EQ(d.waiting.size(), 3u) << d.summary();
  int seen = 0;
  for (const WaitingGroup& g : d.waiting) {
    if (g.axis == "ep") {
      ++seen;
      EXPECT_EQ(g.op, "all_to_all");
      EXPECT_EQ(g.seq, 7);
      EXPECT_EQ(g.ranks, std::vector<int>{0});
      EXPECT_EQ(g.missing, std::vector<int>{1});
    } else {
      ++seen;
      EXPECT_EQ(g.axis, "efsdp");
      EXPECT_EQ(g.op, "all_gather");
      EXPECT_EQ(g.missing, std::vector<int>{g.ranks == std::vector<int>{2} ? 0 : 1});
    }
  }
  EXPECT_EQ(seen, 3);
  const std::string s = d.summary();
  EXPECT_NE(s.find("rank 0 waits in all_to_all on ep #7"), std::string::npos) << s;
  EXPECT_NE(s.find("rank 1 (node0, pid 4001) never entered it: stopped, last in forward layer 2"), std::string::npos)
      << s;
}

TEST(HangDiagnosis, DifferentOpsAtOneEpSequenceNumberAreAMismatch) {
  DiagnosisInput in = four_ranks();
  in.shape.ep = 2;
  const double t0 = kNow - 125;
  const FlightGroup ep = expert_group(ExpertGroupKind::ep);
  waiting_in(in.ranks[2], ep, FlightOpKind::all_to_all, 9, 2048, t0);
  waiting_in(in.ranks[3], ep, FlightOpKind::all_gather, 9, 2048, t0);
  const Diagnosis d = diagnose(in);
  ASSERT_EQ(d.state, HealthState::mismatch) << d.summary();
  ASSERT_EQ(d.mismatches.size(), 1u);
  EXPECT_EQ(d.mismatches[0].axis, "ep");
  EXPECT_EQ(d.mismatches[0].seq, 9);
  EXPECT_NE(d.summary().find("at ep #9"), std::string::npos) << d.summary();
}

}  // namespace
}  // namespace meshwork
