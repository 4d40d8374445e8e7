// Ingest of metrics JSON lines: records to rows, exactly-once offsets, idempotent re-ingest,
// malformed and unknown lines counted and reported, run status from end records.
#include <algorithm>
#include <fstream>

#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::count;
using testing::end_line;
using testing::open_store;
using testing::start_line;
using testing::step_line;
using testing::TempDir;

std::string two_rank_run(int steps) {
  nlohmann::json config = {{"name", "demo"}, {"model", "tiny"},
                           {"mesh", {{"dp_shard", 2}}}, {"v", 1}};
  std::string text = start_line(0, 2, config) + start_line(1, 2, config);
  for (int s = 0; s < steps; ++s)
    for (int r = 0; r < 2; ++r) text += step_line(r, s, 5.0 - 0.01 * s + r);
  return text + end_line(0, "ok") + end_line(1, "ok");
}

TEST(StoreIngest, StoresStartStepAndEndRecords) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  auto run = store->create_run("demo", nlohmann::json::object(), {{"nodes", {{{"host", "local"}}}}});
  ASSERT_TRUE(run.ok());
  const std::string text = two_rank_run(50);
  auto c = store->ingest_chunk(*run, "metrics.jsonl", 0, text);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->lines, 104);
  EXPECT_EQ(c->points, 2 * 50 * 15);
  EXPECT_EQ(c->malformed + c->unknown + c->duplicates, 0);
  EXPECT_EQ(c->offset, text.size());
  auto info = store->get_run(*run);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary.status, "ok");  // both ranks of world 2 ended ok
  EXPECT_EQ(info->summary.shape, (MeshShape{1, 2, 1, 1}));  // config taken from the start record
  EXPECT_EQ(info->summary.model, "tiny");
  EXPECT_EQ(info->summary.world, 2);
  EXPECT_EQ(info->summary.steps, 49);
  EXPECT_EQ(info->summary.points, 1500);
  ASSERT_TRUE(info->summary.final_loss && info->summary.tokens_per_s);
  EXPECT_DOUBLE_EQ(*info->summary.final_loss, 5.0 - 0.49);  // rank 0, last step
  EXPECT_DOUBLE_EQ(*info->summary.tokens_per_s, 4000);
  auto ranks = store->ranks(*run);
  ASSERT_EQ(ranks->size(), 2u);
  EXPECT_EQ((*ranks)[1].host, "node0");
  EXPECT_EQ((*ranks)[1].pid, 4001);
  EXPECT_EQ((*ranks)[1].status, "ok");
  // Time and cumulative tokens per step; the long view for plain SQL users.
  EXPECT_EQ(count(*store, "SELECT tokens FROM steps WHERE rank = 1 AND step = 9"), 1000);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE key = 'comm_s.tp'"), 100);
  auto keys = store->keys(*run);
  ASSERT_TRUE(keys.ok());
  // Every series of the step record but comm_s.pp and comm_s.ep (this run has neither pipeline
  // stages nor experts) and cpu_s (its records carry none, as an older meshtrain's).
  std::vector<std::string> expected = step_series_keys();
  expected.erase(std::find(expected.begin(), expected.end(), "comm_s.pp"));
  expected.erase(std::find(expected.begin(), expected.end(), "comm_s.ep"));
  expected.erase(std::find(expected.begin(), expected.end(), "cpu_s"));
  EXPECT_EQ(*keys, expected);
}

TEST(StoreIngest, ReingestingTheSameLinesStoresNothingTwice) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  RunId run = *store->create_run("r", {}, {});
  const std::string text = two_rank_run(30);
  ASSERT_TRUE(store->ingest_chunk(run, "a", 0, text).ok());
  const int64_t points = count(*store, "SELECT count(*) FROM metrics");
  const int64_t n = count(*store, "SELECT sum(n) FROM buckets WHERE level = 0");
  // The same lines under another source name (e.g. a file copied and imported again).
  auto again = store->ingest_chunk(run, "b", 0, text);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->points, 0);
  EXPECT_EQ(again->duplicates, 2 * 30 * 15);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics"), points);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM steps"), 60);
  EXPECT_EQ(count(*store, "SELECT sum(n) FROM buckets WHERE level = 0"), n);
  // A changed value for a stored point does not overwrite it: the first stored value wins.
  auto changed = store->ingest_chunk(run, "c", 0, step_line(0, 3, 123.0));
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->duplicates, 15);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE value = 123"), 0);
}

TEST(StoreIngest, ChunksAtAnyByteBoundaryAndResendsAreExactlyOnce) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  RunId run = *store->create_run("r", {}, {});
  const std::string text = two_rank_run(40);
  // Feed 37-byte pieces the way a follower reads a growing file: every call sends the bytes
  // from the stored offset up to what is "written" so far; every third call also resends 100
  // bytes before the offset (a retry after a lost link).
  size_t written = 0;
  int64_t points = 0, lines = 0;
  int call = 0;
  while (written < text.size()) {
    written = std::min(text.size(), written + 37);
    uint64_t from = *store->source_offset(run, "f");
    if (++call % 3 == 0 && from >= 100) from -= 100;
    auto c = store->ingest_chunk(run, "f", from, std::string_view(text).substr(from, written - from));
    ASSERT_TRUE(c.ok()) << c.error().message();
    points += c->points;
    lines += c->lines;
    EXPECT_EQ(c->duplicates, 0);
  }
  EXPECT_EQ(points, 2 * 40 * 15);
  EXPECT_EQ(lines, 84);
  EXPECT_EQ(*store->source_offset(run, "f"), text.size());
  // A chunk that starts beyond the stored offset would lose bytes: refused, nothing stored.
  auto gap = store->ingest_chunk(run, "g", 10, step_line(0, 999, 1));
  ASSERT_FALSE(gap.ok());
  EXPECT_EQ(gap.error().field, "offset");
  EXPECT_EQ(*store->source_offset(run, "g"), 0u);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM steps WHERE step = 999"), 0);
}

TEST(StoreIngest, MalformedAndUnknownLinesAreCountedAndReportedNeverFatal) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  RunId run = *store->create_run("r", {}, {});
  std::string text = step_line(0, 0, 1.0);
  text += "this is not json\n";                                       // malformed
  text += "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0,\"loss\":\n";  // truncated
  text += "[1,2,3]\n";                                                // not an object
  text += "{\"v\":1,\"type\":\"step\",\"loss\":1}\n";                 // no step/rank
  text += "{\"v\":2,\"type\":\"step\",\"step\":1,\"rank\":0}\n";      // unknown version
  text += "{\"v\":1,\"type\":\"heartbeat\",\"rank\":0}\n";            // unknown type
  text += "\n";                                                       // blank: ignored
  text += step_line(0, 1, 0.9);
  auto c = store->ingest_chunk(run, "node0/metrics-rank0.jsonl", 0, text);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->lines, 9);
  EXPECT_EQ(c->malformed, 4);
  EXPECT_EQ(c->unknown, 2);
  EXPECT_EQ(c->points, 30);
  auto sources = store->sources(run);
  ASSERT_TRUE(sources.ok());
  ASSERT_EQ(sources->size(), 1u);
  EXPECT_EQ((*sources)[0].malformed, 4);
  EXPECT_EQ((*sources)[0].unknown, 2);
  EXPECT_EQ((*sources)[0].lines, 9);
  auto events = store->events(run);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 6u);
  const std::string second_line_at = "node0/metrics-rank0.jsonl at byte " +
                                     std::to_string(step_line(0, 0, 1.0).size());
  EXPECT_EQ((*events)[0].level, "warning");
  EXPECT_NE((*events)[0].text.find(second_line_at), std::string::npos) << (*events)[0].text;
  EXPECT_NE((*events)[5].text.find("heartbeat"), std::string::npos) << (*events)[5].text;
  // Floods are counted but only the first 20 are logged.
  std::string junk;
  for (int i = 0; i < 100; ++i) junk += "junk\n";
  auto j = store->ingest_chunk(run, "node0/metrics-rank0.jsonl", c->offset, junk);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->malformed, 100);
  EXPECT_EQ(store->events(run)->size(), 20u);
  EXPECT_EQ((*store->sources(run))[0].malformed, 104);
}

TEST(StoreIngest, AFailedRankFailsTheRunWithItsReason) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  RunId run = *store->create_run("r", {}, {});
  std::string text = start_line(0, 2) + start_line(1, 2) + step_line(0, 0, 1) +
                     end_line(1, "failed", "exit 137 (killed)\nstderr tail: oom") +
                     end_line(0, "ok");
  ASSERT_TRUE(store->ingest_chunk(run, "m", 0, text).ok());
  auto info = store->get_run(run);
  EXPECT_EQ(info->summary.status, "failed");
  EXPECT_EQ(info->summary.exit_reason, "rank 1: exit 137 (killed)\nstderr tail: oom");
  auto events = store->events(run);
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].level, "error");
  EXPECT_NE((*events)[0].text.find("rank 1 failed"), std::string::npos);
  EXPECT_TRUE(store->set_status(run, "stopped", "by user").ok());
  EXPECT_FALSE(store->set_status(run, "exploded").ok());
}

TEST(StoreIngest, IngestFileImportsToTheEndAndResumes) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  RunId run = *store->create_run("r", {}, {});
  const auto file = dir / "metrics-rank0.jsonl";
  {
    std::ofstream out(file, std::ios::binary);
    for (int s = 0; s < 1000; ++s) out << step_line(0, s, 1.0 / (s + 1));
  }
  auto first = store->ingest_file(run, file, "rank0", 4096);  // many small transactions
  ASSERT_TRUE(first.ok()) << first.error().message();
  EXPECT_EQ(first->points, 15000);
  {
    std::ofstream out(file, std::ios::binary | std::ios::app);
    out << step_line(0, 1000, 0.5);
    out << step_line(0, 1001, 0.25).substr(0, 40);  // no newline at the end: an import takes it
  }
  auto second = store->ingest_file(run, file, "rank0");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->points, 15);
  EXPECT_EQ(second->malformed, 1);  // the cut line is counted, not lost silently
  auto third = store->ingest_file(run, file, "rank0");
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->lines, 0);
  auto missing = store->ingest_file(run, dir / "nope.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().field, "PATH");
}

TEST(StoreIngest, RunsAreRenamedResolvedAndDeletedWithEverything) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  RunId a = *store->create_run("same", {}, {});
  RunId b = *store->create_run("same", {}, {});
  RunId c = *store->create_run("other", {}, {}, "/data/run-c");
  ASSERT_TRUE(store->ingest_chunk(a, "m", 0, two_rank_run(10)).ok());
  ASSERT_TRUE(store->ingest_chunk(b, "m", 0, two_rank_run(10)).ok());
  EXPECT_EQ(*store->resolve_run(std::to_string(b)), b);
  EXPECT_EQ(*store->resolve_run("other"), c);
  auto ambiguous = store->resolve_run("same");
  ASSERT_FALSE(ambiguous.ok());
  EXPECT_NE(ambiguous.error().allowed.find(std::to_string(a) + ", " + std::to_string(b)),
            std::string::npos);
  EXPECT_FALSE(store->resolve_run("nothing").ok());
  EXPECT_EQ(**store->find_run_by_origin("/data/run-c"), c);
  ASSERT_TRUE(store->rename_run(b, "renamed").ok());
  EXPECT_EQ(*store->resolve_run("same"), a);
  ASSERT_TRUE(store->delete_run(a).ok());
  EXPECT_FALSE(store->delete_run(a).ok());
  for (const char* t : {"metrics", "steps", "buckets", "rank_agg", "run_stats", "ranks", "events", "sources"})
    EXPECT_EQ(count(*store, std::string("SELECT count(*) FROM ") + t + " WHERE run = " +
                                std::to_string(a)),
              0)
        << t;
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics WHERE run = " + std::to_string(b)), 300);
  auto runs = store->list_runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].name, "other");  // newest first
}

}  // namespace
}  // namespace meshwork::store

namespace meshwork::store {
namespace {

std::string eval_line(int rank, int64_t step, double loss) {
  EvalRecord e;
  e.rank = rank;
  e.step = step;
  e.time = 1000.0 + static_cast<double>(step);
  e.loss = loss;
  e.tokens = 512;
  e.eval_s = 0.1;
  return to_json_line(e) + "\n";
}

// Eval records (--eval-data) become the "eval_loss" series: one point per record at its step,
// queryable like any series (step and tokens axes), stored once however often re-ingested.
TEST(StoreIngest, EvalRecordsAreTheEvalLossSeries) {
  testing::TempDir dir;
  auto store = testing::open_store(dir / "runs.db");
  auto run = store->create_run("eval", nlohmann::json::object(), nlohmann::json::object());
  ASSERT_TRUE(run.ok());
  std::string text = testing::start_line(0, 1);
  for (int s = 0; s < 20; ++s) {
    text += testing::step_line(0, s, 5.0 - 0.1 * s);
    if ((s + 1) % 10 == 0) text += eval_line(0, s, 4.0 - 0.01 * s);
  }
  text += testing::end_line(0, "ok");
  auto c = store->ingest_chunk(*run, "metrics.jsonl", 0, text);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->malformed + c->unknown + c->duplicates, 0);
  EXPECT_EQ(c->points, 20 * 15 + 2);
  auto keys = store->keys(*run);
  ASSERT_TRUE(keys.ok());
  EXPECT_NE(std::find(keys->begin(), keys->end(), kEvalLossKey), keys->end());

  SeriesQuery q;
  q.runs = {*run};
  q.key = kEvalLossKey;
  auto s = store->query_series(q);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(s->size(), 1u);
  ASSERT_EQ((*s)[0].points.size(), 2u);
  EXPECT_EQ((*s)[0].points[0].x, 9);
  EXPECT_DOUBLE_EQ((*s)[0].points[0].y, 4.0 - 0.09);
  EXPECT_EQ((*s)[0].points[1].x, 19);
  EXPECT_DOUBLE_EQ((*s)[0].points[1].y, 4.0 - 0.19);
  // On the tokens axis an eval point sits at the cumulative tokens of the step it follows.
  q.x = XAxis::tokens;
  auto by_tokens = store->query_series(q);
  ASSERT_TRUE(by_tokens.ok()) << by_tokens.error().message();
  ASSERT_EQ((*by_tokens)[0].points.size(), 2u);
  EXPECT_EQ((*by_tokens)[0].points[0].x, testing::count(*store, "SELECT tokens FROM steps WHERE step = 9"));
  EXPECT_EQ((*by_tokens)[0].points[1].x, testing::count(*store, "SELECT tokens FROM steps WHERE step = 19"));

  // A second ingest of the same lines from the start (another source name) stores nothing new.
  auto again = store->ingest_chunk(*run, "copy.jsonl", 0, text);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->points, 0);
  EXPECT_EQ(testing::count(*store, "SELECT count(*) FROM metrics_extra"), 2);
}

}  // namespace
}  // namespace meshwork::store
