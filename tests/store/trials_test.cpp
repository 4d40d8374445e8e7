// Trial groups in the store (core/store/trials.h): the tables made on first use, idempotently, in
// any store; a group's shapes with the planner's predictions, read back ranked by what their runs
// measured (tokens/s as the Runs view shows it, peak memory as the highest mem_peak_bytes of any
// rank at any step), failed and never-launched shapes kept with their reasons.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "core/mesh_json.h"
#include "core/store/trials.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::TempDir;
using testing::open_store;

bool has_table(RunStore& s, const std::string& name) {
  return testing::count(s, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '" + name + "'") == 1;
}

// A run of `shape` whose two ranks report `tokens_per_s` (rank 0's is what the summary reads) at
// every step and the given peaks per rank and step; ended with `status`.
RunId add_run(RunStore& s, const std::string& name, const MeshShape& shape, double tokens_per_s,
              const std::vector<std::array<int64_t, 2>>& peaks, const std::string& status,
              const std::string& reason = "") {
  const nlohmann::json config = {{"mesh", to_json(shape)}};
  auto id = s.create_run(name, config, nlohmann::json::object());
  EXPECT_TRUE(id.ok());
  for (int rank = 0; rank < 2; ++rank) {
    std::string text = testing::start_line(rank, 2, config);
    for (size_t step = 0; step < peaks.size(); ++step) {
      StepRecord r = testing::step_record(rank, static_cast<int64_t>(step), 3.0);
      r.tokens_per_s = tokens_per_s;
      r.mem_peak_bytes = peaks[step][static_cast<size_t>(rank)];
      text += to_json_line(r) + "\n";
    }
    text += testing::end_line(rank, status, reason);
    auto n = s.ingest_chunk(*id, "metrics-rank" + std::to_string(rank) + ".jsonl", 0, text);
    EXPECT_TRUE(n.ok()) << (n.ok() ? "" : n.error().message());
  }
  return *id;
}

TEST(TrialStore, TablesAreMadeOnFirstUseIdempotentlyWithoutChangingTheSchemaVersion) {
  TempDir dir;
  auto s = open_store(dir / "runs.db");
  ASSERT_TRUE(s);
  const int version = s->schema_version();
  EXPECT_FALSE(has_table(*s, "trials"));
  ASSERT_TRUE(ensure_trial_tables(s->handle()));
  ASSERT_TRUE(ensure_trial_tables(s->handle()));  // again: nothing happens
  EXPECT_TRUE(has_table(*s, "trials"));
  EXPECT_TRUE(has_table(*s, "trial_runs"));
  auto id = create_trial(*s, {{"planned_by", "test"}});
  ASSERT_TRUE(id.ok());
  s.reset();
  // Reopened (the store's own migration runs again): the group is still there.
  s = open_store(dir / "runs.db");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->schema_version(), version);
  auto list = list_trials(*s);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, *id);
  EXPECT_EQ((*list)[0].shapes, 0);
  // A fresh store answers the readers without any trial ever made.
  TempDir other;
  auto fresh = open_store(other / "runs.db");
  auto none = list_trials(*fresh);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(TrialStore, GroupIsRankedByMeasuredTokensPerSecondBesideThePrediction) {
  TempDir dir;
  auto s = open_store(dir / "runs.db");
  ASSERT_TRUE(s);
  const nlohmann::json plan = {{"planned_by", "test"}, {"steps", 3}, {"k", 5}};
  auto trial = create_trial(*s, plan);
  ASSERT_TRUE(trial.ok());
  // The planner's order: position 1 predicted best.
  const std::vector<TrialPrediction> predicted = {
      {MeshShape{1, 2, 1, 1}, 5000, 0.2, 3 << 20},
      {MeshShape{2, 1, 1, 1}, 4000, 0.25, 4 << 20},
      {MeshShape{1, 1, 1, 2}, 3000, 0.3, 2 << 20},
      {MeshShape{1, 1, 2, 1}, 2000, 0.4, 2 << 20},
      {MeshShape{1, 1, 1, 2}, 1000, 0.5, 1 << 20},
  };
  for (size_t i = 0; i < predicted.size(); ++i)
    ASSERT_TRUE(add_trial_entry(*s, *trial, static_cast<int>(i) + 1, predicted[i]));
  // Measured: #2 is faster than #1 (rank 0 reports per replica: x dp = 2 replicas each).
  const RunId r1 = add_run(*s, "trial #1", predicted[0].shape, 1500, {{{1000, 2000}}, {{3000, 2500}}, {{100, 200}}}, "ok");
  const RunId r2 = add_run(*s, "trial #2", predicted[1].shape, 2500, {{{7000, 1000}}, {{1000, 1000}}}, "ok");
  const RunId r3 = add_run(*s, "trial #3", predicted[2].shape, 9000, {{{1, 1}}}, "failed", "rank 1 failed: exit 137");
  ASSERT_TRUE(set_trial_run(*s, *trial, 1, r1));
  ASSERT_TRUE(set_trial_run(*s, *trial, 2, r2));
  ASSERT_TRUE(set_trial_run(*s, *trial, 3, r3));
  ASSERT_TRUE(set_trial_error(*s, *trial, 4, "--cp: 2: seq_len must divide 2 x cp"));
  // #5: never launched (the trials were stopped before it).

  auto t = load_trial(*s, *trial);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->id, *trial);
  EXPECT_EQ(t->plan, plan);
  EXPECT_GT(t->created, 0);
  ASSERT_EQ(t->results.size(), 5u);
  std::vector<int> order;
  for (const TrialResult& r : t->results) order.push_back(r.position);
  // Ended ok by measured tokens/s (5000 > 3000), then the failed run (measured, ranked below the
  // ok ones), then the unmeasured by position.
  EXPECT_EQ(order, (std::vector<int>{2, 1, 3, 4, 5}));

  const TrialResult& best = t->results[0];
  EXPECT_EQ(best.run, r2);
  EXPECT_EQ(best.run_name, "trial #2");
  EXPECT_EQ(best.status, "ok");
  ASSERT_TRUE(best.tokens_per_s);
  EXPECT_DOUBLE_EQ(*best.tokens_per_s, 2500.0 * 2);  // dp_replicate 2
  EXPECT_EQ(best.predicted.shape, predicted[1].shape);
  EXPECT_DOUBLE_EQ(best.predicted.tokens_per_s, 4000);
  EXPECT_DOUBLE_EQ(best.predicted.step_s, 0.25);
  EXPECT_EQ(best.predicted.peak_bytes, 4 << 20);
  ASSERT_TRUE(best.tokens_error_percent());
  EXPECT_DOUBLE_EQ(*best.tokens_error_percent(), 25.0);
  ASSERT_TRUE(best.peak_bytes);
  EXPECT_DOUBLE_EQ(*best.peak_bytes, 7000);  // rank 0 at step 0: the highest of any rank and step

  const TrialResult& second = t->results[1];
  EXPECT_DOUBLE_EQ(*second.tokens_per_s, 3000);  // dp_shard 2
  EXPECT_DOUBLE_EQ(*second.tokens_error_percent(), -40.0);
  EXPECT_DOUBLE_EQ(*second.peak_bytes, 3000);  // rank 0, step 1

  const TrialResult& failed = t->results[2];
  EXPECT_EQ(failed.status, "failed");
  EXPECT_NE(failed.reason.find("rank 1 failed: exit 137"), std::string::npos) << failed.reason;  // the run's exit reason
  EXPECT_DOUBLE_EQ(*failed.tokens_per_s, 9000);

  EXPECT_EQ(t->results[3].status, kTrialNotLaunched);
  EXPECT_EQ(t->results[3].reason, "--cp: 2: seq_len must divide 2 x cp");
  EXPECT_FALSE(t->results[3].run);
  EXPECT_FALSE(t->results[3].tokens_per_s);
  EXPECT_FALSE(t->results[3].tokens_error_percent());
  EXPECT_EQ(t->results[4].status, kTrialPending);
  EXPECT_TRUE(t->results[4].reason.empty());

  ASSERT_NE(t->winner(), nullptr);
  EXPECT_EQ(t->winner()->position, 2);

  const nlohmann::json j = to_json(*t);
  EXPECT_EQ(j["winner"], 2);
  ASSERT_EQ(j["results"].size(), 5u);
  EXPECT_EQ(j["results"][0]["shape"], to_json(predicted[1].shape));
  EXPECT_EQ(j["results"][0]["run"], r2);
  EXPECT_DOUBLE_EQ(j["results"][0]["measured"]["tokens_per_s"].get<double>(), 5000);
  EXPECT_DOUBLE_EQ(j["results"][0]["predicted"]["tokens_per_s"].get<double>(), 4000);
  EXPECT_TRUE(j["results"][3]["measured"]["tokens_per_s"].is_null());
  EXPECT_TRUE(j["results"][4]["run"].is_null());

  auto list = list_trials(*s);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].shapes, 5);

  // A run deleted from the store stays in the group, marked; the others keep their places.
  ASSERT_TRUE(s->delete_run(r2));
  t = load_trial(*s, *trial);
  ASSERT_TRUE(t.ok()) << t.error().message();
  EXPECT_EQ(t->results[0].position, 1);
  EXPECT_EQ(t->winner()->position, 1);
  const auto deleted = std::find_if(t->results.begin(), t->results.end(),
                                    [](const TrialResult& r) { return r.position == 2; });
  ASSERT_NE(deleted, t->results.end());
  EXPECT_EQ(deleted->status, kTrialRunDeleted);
  EXPECT_FALSE(deleted->tokens_per_s);
}

TEST(TrialStore, RefusesWhatDoesNotExist) {
  TempDir dir;
  auto s = open_store(dir / "runs.db");
  ASSERT_TRUE(s);
  EXPECT_FALSE(add_trial_entry(*s, 42, 1, {MeshShape{1, 1, 1, 1}, 1, 1, 1}));
  auto trial = create_trial(*s, nlohmann::json::object());
  ASSERT_TRUE(trial.ok());
  EXPECT_FALSE(add_trial_entry(*s, *trial, 0, {MeshShape{1, 1, 1, 1}, 1, 1, 1}));
  ASSERT_TRUE(add_trial_entry(*s, *trial, 1, {MeshShape{1, 1, 1, 1}, 1, 1, 1}));
  EXPECT_FALSE(add_trial_entry(*s, *trial, 1, {MeshShape{1, 1, 1, 1}, 1, 1, 1}));  // taken
  EXPECT_FALSE(set_trial_run(*s, *trial, 2, 1));
  EXPECT_FALSE(set_trial_error(*s, *trial, 2, "x"));
  auto missing = load_trial(*s, *trial + 1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().field, "trial");
  // No runs measured: no winner, the shape pending.
  auto t = load_trial(*s, *trial);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->winner(), nullptr);
  EXPECT_EQ(t->results.at(0).status, kTrialPending);
}

}  // namespace
}  // namespace meshwork::store
