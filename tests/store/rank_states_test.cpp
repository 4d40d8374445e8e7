// The ranks' stall reports in a real SQLite file (core/store/rank_states.h) and the diagnosis'
// inputs gathered from a run's stored steps, ranks and reports.
#include "core/store/rank_states.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::open_store;
using testing::start_line;
using testing::step_record;
using testing::TempDir;

nlohmann::json config_4() {
  return {{"v", 1}, {"name", "hang"}, {"mesh", {{"dp_replicate", 1}, {"dp_shard", 2}, {"cp", 1}, {"tp", 2}}}};
}

// Four ranks (two per node), 6 steps each; rank 3 computes twice as long and the others wait for
// it on dp_shard. `rank3_cpu_s`: the CPU seconds rank 3's steps report (the others 0.1); unset:
// no cpu_s in any record, as an older meshtrain writes them.
std::string four_rank_steps(std::optional<double> rank3_cpu_s = std::nullopt) {
  std::string text;
  for (int r = 0; r < 4; ++r) text += start_line(r, 4, config_4());
  for (int64_t s = 0; s < 6; ++s) {
    for (int r = 0; r < 4; ++r) {
      StepRecord rec = step_record(r, s, 2.0);
      rec.comm_s = AxisArray<double>::of(0.0, r == 3 ? 0.01 : 0.2, 0.0, 0.01);
      rec.compute_s = r == 3 ? 0.3 : 0.1;
      rec.step_s = 0.32;
      if (rank3_cpu_s) rec.cpu_s = r == 3 ? *rank3_cpu_s : 0.1;
      text += to_json_line(rec) + "\n";
    }
  }
  return text;
}

FlightState waiting(int rank, int64_t seq) {
  FlightState f;
  f.rank = rank;
  f.pid = 4000 + rank;
  f.step = 6;
  f.phase = FlightPhase::backward;
  f.layer = 1;
  FlightOp op;
  op.group = FlightGroup{false, GroupKind::dp_shard};
  op.op = FlightOpKind::all_gather;
  op.seq = seq;
  op.bytes = 4096;
  op.enter = 1010;
  f.current = op;
  f.last_seq = {{op.group, seq}};
  return f;
}

TEST(RankStatesIntegration, ReportsAreKeptPerRankReplacedAndForgottenWithTheRun) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  auto run = store->create_run("hang", config_4(), nlohmann::json::object());
  ASSERT_TRUE(run.ok());
  // No report yet: none, and no beat (the tables do not even exist).
  auto none = rank_states(*store, *run);
  ASSERT_TRUE(none.ok()) << none.error().message();
  EXPECT_TRUE(none->empty());
  auto no_beat = follow_beat(*store, *run);
  ASSERT_TRUE(no_beat.ok());
  EXPECT_FALSE(no_beat->has_value());

  StoredRankState a{1, 0, true, "running", waiting(1, 12)};
  StoredRankState b{3, 0, true, "stopped", std::nullopt};
  ASSERT_TRUE(put_rank_states(*store, *run, {a, b}, 1234.5).ok());
  StoredRankState a2{1, 0, false, "running", waiting(1, 13)};  // rank 1 moved again
  ASSERT_TRUE(put_rank_states(*store, *run, {a2}).ok());

  auto states = rank_states(*store, *run);
  ASSERT_TRUE(states.ok()) << states.error().message();
  ASSERT_EQ(states->size(), 2u);
  EXPECT_EQ((*states)[0].rank, 1);
  EXPECT_FALSE((*states)[0].stalled);
  ASSERT_TRUE((*states)[0].flight.has_value());
  ASSERT_TRUE((*states)[0].flight->current.has_value());
  EXPECT_EQ((*states)[0].flight->current->seq, 13);
  EXPECT_EQ((*states)[1].process, "stopped");
  EXPECT_FALSE((*states)[1].flight.has_value());
  auto beat = follow_beat(*store, *run);
  ASSERT_TRUE(beat.ok());
  ASSERT_TRUE(beat->has_value());
  EXPECT_DOUBLE_EQ(**beat, 1234.5);

  ASSERT_TRUE(store->delete_run(*run).ok());
  auto gone = rank_states(*store, *run);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->empty());
  EXPECT_FALSE(follow_beat(*store, *run)->has_value());
}

// With cpu_s stored: rank 3's peers wait on it; it used the CPU time of its longer compute
// (slow in compute), or no more than they did (not running: stopped, descheduled, throttled).
TEST(RankStatesIntegration, TheDiagnosisSourceCarriesCpuTimeThatTellsNotRunningFromCompute) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  for (const auto& [rank3_cpu, slow_in] : {std::pair{0.3, "compute"}, std::pair{0.1, "not running"}}) {
    auto run = store->create_run(slow_in, config_4(), nlohmann::json::object());
    ASSERT_TRUE(run.ok());
    auto c = store->ingest_chunk(*run, "metrics-rank0.jsonl", 0, four_rank_steps(rank3_cpu));
    ASSERT_TRUE(c.ok()) << c.error().message();
    auto src = diagnosis_source(*store, *run, 1006);
    ASSERT_TRUE(src.ok()) << src.error().message();
    ASSERT_EQ(src->input.timings.size(), 4u);
    for (const RankTiming& t : src->input.timings) {
      ASSERT_TRUE(t.cpu_mean_s.has_value()) << t.rank;
      EXPECT_DOUBLE_EQ(*t.cpu_mean_s, t.rank == 3 ? rank3_cpu : 0.1);
      EXPECT_DOUBLE_EQ(t.comm_mean_s[Axis::dp_shard], t.rank == 3 ? 0.01 : 0.2);
    }
    const Diagnosis d = diagnose(src->input);
    ASSERT_EQ(d.state, HealthState::straggler) << d.summary();
    ASSERT_EQ(d.stragglers.size(), 1u) << d.summary();
    EXPECT_EQ(d.stragglers[0].rank, 3);
    EXPECT_EQ(d.stragglers[0].slow_in, slow_in) << d.summary();
    EXPECT_EQ(d.stragglers[0].others_wait_on, "dp_shard");
  }
  // Records without cpu_s (an older meshtrain) leave it unset.
  auto old = store->create_run("old", config_4(), nlohmann::json::object());
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(store->ingest_chunk(*old, "metrics-rank0.jsonl", 0, four_rank_steps()).ok());
  auto src = diagnosis_source(*store, *old, 1006);
  ASSERT_TRUE(src.ok());
  for (const RankTiming& t : src->input.timings) EXPECT_FALSE(t.cpu_mean_s.has_value()) << t.rank;
}

TEST(RankStatesIntegration, TheDiagnosisSourceNamesTheStoppedRankAndTheSlowOne) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  auto run = store->create_run("hang", config_4(), nlohmann::json::object());
  ASSERT_TRUE(run.ok());
  auto c = store->ingest_chunk(*run, "metrics-rank0.jsonl", 0, four_rank_steps());
  ASSERT_TRUE(c.ok()) << c.error().message();

  // While steps arrive: rank 3 is the straggler, slow in compute; the others wait on dp_shard.
  auto alive = diagnosis_source(*store, *run, 1006);
  ASSERT_TRUE(alive.ok()) << alive.error().message();
  EXPECT_EQ(alive->input.ranks.size(), 4u);
  EXPECT_EQ(alive->input.ranks_per_node, 2);
  EXPECT_EQ(alive->input.timings.size(), 4u);
  Diagnosis d = diagnose(alive->input);
  ASSERT_EQ(d.state, HealthState::straggler) << d.summary();
  ASSERT_EQ(d.stragglers.size(), 1u);
  EXPECT_EQ(d.stragglers[0].rank, 3);
  EXPECT_EQ(d.stragglers[0].host, "node1");
  EXPECT_EQ(d.stragglers[0].slow_in, "compute");
  EXPECT_EQ(d.stragglers[0].others_wait_on, "dp_shard");

  // Then rank 3 stops in backward layer 1 and rank 1 waits for it on dp_shard ({1, 3}).
  FlightState stopped;
  stopped.rank = 3;
  stopped.pid = 4003;
  stopped.step = 6;
  stopped.phase = FlightPhase::backward;
  stopped.layer = 1;
  stopped.last_seq = {{FlightGroup{false, GroupKind::dp_shard}, 11}};
  ASSERT_TRUE(put_rank_states(*store, *run,
                              {{1, 0, true, "running", waiting(1, 12)}, {3, 0, true, "stopped", stopped}}, 1100)
                  .ok());
  auto hung = diagnosis_source(*store, *run, 1100);
  ASSERT_TRUE(hung.ok()) << hung.error().message();
  ASSERT_TRUE(hung->follow_beat.has_value());
  hung->input.hang_after_s = 30;
  d = diagnose(hung->input);
  ASSERT_EQ(d.state, HealthState::hang) << d.summary();
  ASSERT_EQ(d.culprits.size(), 1u);
  EXPECT_EQ(d.culprits[0].rank, 3);
  EXPECT_EQ(d.culprits[0].host, "node1");
  EXPECT_EQ(d.culprits[0].pid, 4003);
  EXPECT_EQ(d.culprits[0].process, "stopped");
  EXPECT_EQ(d.culprits[0].phase, "backward layer 1");
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_EQ(d.waiting[0].axis, "dp_shard");
  EXPECT_EQ(d.waiting[0].missing, std::vector<int>{3});
}

}  // namespace
}  // namespace meshwork::store
