// Cross-rank aggregates and chart buckets kept at ingest (issue 26): the stored rows equal a
// recomputation from the raw points however the lines arrive (out of order, re-sent, several
// ranks per transaction, one shared file), the open bucket's points are visible before it closes,
// finished ranks are counted once, and a version-3 store migrates with its aggregates rebuilt.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <random>
#include <fstream>
#include <sstream>

#include "core/store/schema.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::count;
using testing::end_line;
using testing::open_store;
using testing::start_line;
using testing::step_line;
using testing::step_record;
using testing::TempDir;

// Every row of a query as text (doubles with 17 digits: exact).
std::string dump(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
  std::ostringstream out;
  out.precision(17);
  while (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st); ++c) {
      if (sqlite3_column_type(st, c) == SQLITE_NULL) out << "NULL";
      else if (sqlite3_column_type(st, c) == SQLITE_FLOAT) out << sqlite3_column_double(st, c);
      else out << sqlite3_column_text(st, c);
      out << '|';
    }
    out << '\n';
  }
  sqlite3_finalize(st);
  return out.str();
}

// The aggregates recomputed from the raw points, naively: every (key, step)'s values gathered
// from the step rows, then count, min and max with the lowest rank that has them, the lowest rank
// present and its time; as text in the order of kStored. Sums are compared apart (their rounding
// depends on the order of the additions).
struct Recomputed {
  std::string text;
  std::map<std::pair<int64_t, int64_t>, double> sums;
};
Recomputed recompute(sqlite3* db, RunId run) {
  std::map<std::pair<int64_t, int64_t>, std::vector<std::tuple<int, double, double>>> at;  // rank, value, time
  std::vector<int64_t> key_ids;
  {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT id FROM keys WHERE col IS NOT NULL ORDER BY col", -1, &st, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW) key_ids.push_back(sqlite3_column_int64(st, 0));
    sqlite3_finalize(st);
  }
  std::string cols;
  for (const std::string& c : value_columns()) cols += ", " + c;
  sqlite3_stmt* st = nullptr;
  const std::string sql = "SELECT rank, step, time, present" + cols + " FROM steps WHERE run = " + std::to_string(run);
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const int rank = sqlite3_column_int(st, 0);
    const int64_t step = sqlite3_column_int64(st, 1), present = sqlite3_column_int64(st, 3);
    for (size_t i = 0; i < key_ids.size(); ++i)
      if ((present >> i) & 1 && sqlite3_column_type(st, 4 + int(i)) != SQLITE_NULL)
        at[{key_ids[i], step}].emplace_back(rank, sqlite3_column_double(st, 4 + int(i)), sqlite3_column_double(st, 2));
  }
  sqlite3_finalize(st);
  Recomputed out;
  std::ostringstream text;
  text.precision(17);
  for (auto& [ks, v] : at) {
    std::sort(v.begin(), v.end());  // by rank: the first of equal values is the lowest rank
    double lo = std::get<1>(v[0]), hi = lo, sum = 0;
    int lo_rank = std::get<0>(v[0]), hi_rank = lo_rank;
    for (const auto& [rank, value, time] : v) {
      if (value < lo) lo = value, lo_rank = rank;
      if (value > hi) hi = value, hi_rank = rank;
      sum += value;
    }
    text << ks.first << '|' << ks.second << '|' << v.size() << '|' << lo << '|' << lo_rank << '|' << hi
         << '|' << hi_rank << '|' << std::get<0>(v[0]) << '|' << std::get<2>(v[0]) << "|\n";
    out.sums[ks] = sum;
  }
  out.text = text.str();
  return out;
}
const char* const kStored = "SELECT key, step, n, lo, lo_rank, hi, hi_rank, x_rank, time FROM rank_agg"
                            " WHERE run = ?RUN ORDER BY key, step";

std::string with_run(std::string sql, RunId run) {
  for (size_t at; (at = sql.find("?RUN")) != std::string::npos;) sql.replace(at, 4, std::to_string(run));
  return sql;
}

class StoreRankAgg : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = open_store(dir_ / "runs.db");
    ASSERT_TRUE(store_);
  }
  // The stored aggregates of `run` equal the recomputation; sums within rounding.
  void expect_aggregates_exact(RunId run) {
    const Recomputed want = recompute(store_->handle(), run);
    EXPECT_EQ(dump(store_->handle(), with_run(kStored, run)), want.text);
    sqlite3_stmt* st = nullptr;
    const std::string sql = "SELECT key, step, sum FROM rank_agg WHERE run = " + std::to_string(run);
    ASSERT_EQ(sqlite3_prepare_v2(store_->handle(), sql.c_str(), -1, &st, nullptr), SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      const double want_sum = want.sums.at({sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1)});
      EXPECT_NEAR(sqlite3_column_double(st, 2), want_sum, 1e-9 * (1 + std::abs(want_sum)));
    }
    sqlite3_finalize(st);
    EXPECT_EQ(count(*store_, with_run("SELECT points FROM run_stats WHERE run = ?RUN", run)),
              count(*store_, with_run("SELECT count(*) FROM metrics WHERE run = ?RUN AND value IS NOT NULL", run)));
  }
  TempDir dir_;
  std::unique_ptr<RunStore> store_;
};

// Random ranks and steps: each rank's file has late steps (out of order), is sent in chunks cut
// at random bytes, several ranks per transaction, some chunks re-sent from an earlier offset, and
// some ranks' files sent twice under a second source name (every line re-sent: all duplicates).
TEST_F(StoreRankAgg, AggregatesAndBucketsEqualARecomputationFromRawPoints) {
  std::mt19937 rng(26);
  const int ranks = 23, steps = 300;
  RunId run = *store_->create_run("agg", {}, {});
  std::vector<std::string> files(ranks);
  std::uniform_real_distribution<double> loss(1.0, 5.0);
  std::uniform_int_distribution<int> tie(0, 3);
  for (int r = 0; r < ranks; ++r) {
    std::vector<int> order(steps);
    for (int s = 0; s < steps; ++s) order[s] = s;
    // Late steps: swap a few blocks (a step arrives after later ones, into closed buckets).
    for (int k = 0; k < 6; ++k) {
      const int a = std::uniform_int_distribution<int>(0, steps - 40)(rng);
      std::swap_ranges(order.begin() + a, order.begin() + a + 5, order.begin() + a + 20);
    }
    for (int s : order) {
      StepRecord rec = step_record(r, s, loss(rng));
      rec.step_s = 0.25 + 0.01 * tie(rng);  // ties: the lowest rank must win
      files[r] += to_json_line(rec) + "\n";
    }
  }
  struct Chunk {
    int rank;
    std::string source;
    uint64_t start;
    std::string bytes;
  };
  std::vector<Chunk> chunks;
  for (int r = 0; r < ranks; ++r) {
    for (int copy = 0; copy < (r % 5 == 0 ? 2 : 1); ++copy) {
      const std::string source = "rank" + std::to_string(r) + (copy ? "-again" : "");
      for (size_t at = 0; at < files[r].size();) {
        const size_t len = std::uniform_int_distribution<size_t>(50, 4000)(rng);
        // A re-send from an earlier offset now and then (a lost link): overlapping bytes.
        const size_t from = (at > 200 && tie(rng) == 0) ? at - 150 : at;
        chunks.push_back({r, source, from, files[r].substr(from, std::min(len, files[r].size() - from))});
        at = std::min(files[r].size(), from + len);
      }
    }
  }
  // Interleave ranks (stable per source: a source's chunks keep their order) and commit several
  // chunks per transaction, as StoreWriter does.
  std::vector<std::vector<Chunk>> per_source;
  for (Chunk& c : chunks) {
    if (per_source.empty() || per_source.back().front().source != c.source) per_source.emplace_back();
    per_source.back().push_back(std::move(c));
  }
  std::vector<size_t> head(per_source.size(), 0);
  std::vector<Chunk> batch_owner;
  for (bool left = true; left;) {
    left = false;
    std::vector<RunStore::ChunkRef> batch;
    std::vector<size_t> order(per_source.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      if (head[i] >= per_source[i].size()) continue;
      left = true;
      const Chunk& c = per_source[i][head[i]];
      // A chunk may start past what is stored (its previous one ended mid-line): resend from
      // the stored offset, as the follower does.
      const uint64_t stored = *store_->source_offset(run, c.source);
      if (c.start > stored) {
        auto r = store_->ingest_chunk(run, c.source, stored, files[c.rank].substr(stored, c.start + c.bytes.size() - stored));
        ASSERT_TRUE(r.ok()) << r.error().message();
      } else {
        batch.push_back({run, c.source, c.start, c.bytes});
      }
      ++head[i];
      if (batch.size() >= 7) break;
    }
    if (batch.empty()) continue;
    auto done = store_->ingest_chunks(batch);
    ASSERT_TRUE(done.ok()) << done.error().message();
    for (const auto& r : *done) ASSERT_TRUE(r.ok()) << r.error().message();
  }
  // The tails: whatever the chunks left unconsumed.
  for (int r = 0; r < ranks; ++r)
    for (const std::string& source : {"rank" + std::to_string(r), "rank" + std::to_string(r) + "-again"}) {
      if (source.find("-again") != std::string::npos && r % 5 != 0) continue;
      const uint64_t stored = *store_->source_offset(run, source);
      auto c = store_->ingest_chunk(run, source, stored, files[r].substr(stored));
      ASSERT_TRUE(c.ok()) << c.error().message();
      EXPECT_EQ(c->offset, files[r].size());
    }
  ASSERT_EQ(count(*store_, "SELECT count(*) FROM steps"), ranks * steps);
  expect_aggregates_exact(run);

  // The fastest and slowest rank of each step come from the same rows.
  auto ex = store_->step_extremes(run, "step_s", 0, steps - 1);
  ASSERT_TRUE(ex.ok()) << ex.error().message();
  ASSERT_EQ(ex->size(), static_cast<size_t>(steps));
  for (const StepExtremes& e : *ex) {
    EXPECT_EQ(e.ranks, ranks);
    int lo_rank = -1;
    double lo = 1e300;
    for (int r = 0; r < ranks; ++r) {
      const std::string where = "WHERE run = " + std::to_string(run) + " AND rank = " + std::to_string(r) +
                                " AND step = " + std::to_string(e.step);
      const double v = std::stod(dump(store_->handle(), "SELECT v_step_s FROM steps " + where).substr(0, 20));
      if (v < lo) lo = v, lo_rank = r;
    }
    EXPECT_EQ(e.min_rank, lo_rank) << "step " << e.step;
    EXPECT_DOUBLE_EQ(e.min, lo);
  }

  // The mean over every rank (aggregates) equals the per-rank path over all ranks listed.
  SeriesQuery q;
  q.runs = {run};
  q.key = "loss";
  q.aggregate = Aggregate::mean;
  q.pixels = 2000;  // more columns than steps: nothing decimated away
  auto fast = store_->query_series(q);
  for (int r = 0; r < ranks; ++r) q.ranks.push_back(r);
  auto slow = store_->query_series(q);
  ASSERT_TRUE(fast.ok() && slow.ok());
  ASSERT_EQ((*fast)[0].points.size(), static_cast<size_t>(steps));
  ASSERT_EQ((*slow)[0].points.size(), static_cast<size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    EXPECT_EQ((*fast)[0].points[s].x, (*slow)[0].points[s].x);
    EXPECT_NEAR((*fast)[0].points[s].y, (*slow)[0].points[s].y, 1e-12);
  }

  // Chart buckets written when they close (+ late merges + the flush of the open ones) equal
  // buckets rebuilt from the raw points. The loss values have no ties, so even the step of each
  // min / max is decided; the other keys compare their counts.
  ASSERT_TRUE(store_->flush_open_buckets().ok());
  const std::string loss_rows = "SELECT b.* FROM buckets b JOIN keys k ON k.id = b.key AND k.name = 'loss'"
                                " ORDER BY b.key, b.rank, b.level, b.bucket";
  const std::string counts = "SELECT key, rank, level, bucket, n FROM buckets ORDER BY key, rank, level, bucket";
  const std::string live_loss = dump(store_->handle(), loss_rows), live_counts = dump(store_->handle(), counts);
  const std::string live_aggs = dump(store_->handle(), "SELECT * FROM rank_agg ORDER BY key, step");
  ASSERT_TRUE(store_->rebuild_derived(run).ok());
  EXPECT_EQ(live_loss, dump(store_->handle(), loss_rows));
  EXPECT_EQ(live_counts, dump(store_->handle(), counts));
  EXPECT_GT(count(*store_, "SELECT count(*) FROM buckets WHERE level = 2"), 0);
  expect_aggregates_exact(run);
}

// A shared metrics file (every rank's lines in one file) stores what per-rank files store.
TEST_F(StoreRankAgg, SharedFileImportStoresWhatPerRankFilesStore) {
  const int ranks = 16, steps = 100;
  std::string shared;
  std::vector<std::string> per(ranks);
  for (int s = 0; s < steps; ++s)
    for (int r = 0; r < ranks; ++r) {
      const std::string line = step_line(r, s, 3.0 + std::sin(s * 0.1 + r));
      shared += line;
      per[r] += line;
    }
  RunId a = *store_->create_run("shared", {}, {});
  RunId b = *store_->create_run("per-rank", {}, {});
  {
    std::ofstream(dir_ / "shared.jsonl") << shared;
    ASSERT_TRUE(store_->ingest_file(a, dir_ / "shared.jsonl", "", 4096).ok());
  }
  for (int r = 0; r < ranks; ++r) {
    const auto path = dir_ / ("rank" + std::to_string(r) + ".jsonl");
    std::ofstream(path) << per[r];
    ASSERT_TRUE(store_->ingest_file(b, path).ok());
  }
  auto rows = [&](const char* table, RunId run) {
    return dump(store_->handle(), std::string("SELECT * FROM ") + table + " WHERE run = " + std::to_string(run) +
                                      " ORDER BY 2, 3, 4, 5");
  };
  auto strip = [](std::string text) {  // drop the leading run column of each row
    std::string out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out += line.substr(line.find('|') + 1) + "\n";
    return out;
  };
  // (The sums are added in another order: compared by expect_aggregates_exact.)
  auto aggs = [&](RunId run) {
    return dump(store_->handle(), "SELECT key, step, n, lo, lo_rank, hi, hi_rank, x_rank, time, tokens, x_v"
                                  " FROM rank_agg WHERE run = " + std::to_string(run) + " ORDER BY key, step");
  };
  EXPECT_TRUE(aggs(a) == aggs(b));
  EXPECT_TRUE(strip(rows("buckets", a)) == strip(rows("buckets", b)));
  expect_aggregates_exact(b);
  // The per-rank files imported together (`runs import` of a run directory: round-robin chunks,
  // small ones here so it takes many transactions), and again: the same rows, nothing twice.
  RunId c = *store_->create_run("together", {}, {});
  std::vector<RunStore::ImportFile> files;
  for (int r = 0; r < ranks; ++r) files.push_back({dir_ / ("rank" + std::to_string(r) + ".jsonl"), ""});
  auto together = store_->ingest_files(c, files, 16384);
  ASSERT_TRUE(together.ok()) << together.error().message();
  ASSERT_EQ(together->size(), static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) EXPECT_EQ((*together)[r].offset, per[r].size());
  auto again = store_->ingest_files(c, files);
  ASSERT_TRUE(again.ok());
  for (const IngestCounts& n : *again) EXPECT_EQ(n.points + n.duplicates, 0);
  EXPECT_TRUE(aggs(c) == aggs(b));
  EXPECT_TRUE(strip(rows("buckets", c)) == strip(rows("buckets", b)));
  expect_aggregates_exact(c);
  EXPECT_EQ(count(*store_, "SELECT count(*) FROM buckets WHERE level = 0 AND run = " + std::to_string(a)), ranks * 15);
  expect_aggregates_exact(a);
}

// Queries see the points of a bucket still open in the writer's memory (read raw), from the
// writer's own connection and from another one, before the bucket is written.
TEST_F(StoreRankAgg, OpenBucketPointsAreVisibleBeforeItCloses) {
  RunId run = *store_->create_run("open", {}, {});
  std::string text;
  for (int s = 0; s < 5000; ++s) text += step_line(0, s, s == 4990 ? 99.0 : 1.0 + 0.001 * s);
  ASSERT_TRUE(store_->ingest_chunk(run, "rank0", 0, text).ok());
  // Step 4990 is in level-1 bucket 311 (steps 4976..4991), which closed when 4992 arrived;
  // steps 4992..4999 are in the open bucket 312: not written yet.
  EXPECT_EQ(count(*store_, "SELECT count(*) FROM buckets WHERE level = 1 AND bucket = 312"), 0);
  EXPECT_EQ(count(*store_, "SELECT count(*) FROM buckets WHERE level = 1 AND bucket = 311"), 15);
  auto reader = RunStore::open(dir_ / "runs.db", RunStore::Options{true, 5000});
  ASSERT_TRUE(reader.ok()) << reader.error().message();
  for (RunStore* s : {store_.get(), reader->get()}) {
    SeriesQuery q;
    q.runs = {run};
    q.key = "loss";
    q.pixels = 100;
    auto series = s->query_series(q);
    ASSERT_TRUE(series.ok()) << series.error().message();
    EXPECT_GT((*series)[0].lod_level, 0);  // the bucket path, with the open tail read raw
    EXPECT_EQ((*series)[0].points.back().x, 4999);
    EXPECT_DOUBLE_EQ((*series)[0].points.back().y, 1.0 + 0.001 * 4999);
    EXPECT_EQ((*series)[0].source_points, 5000);
    // A zoom onto the open bucket only.
    q.x_min = 4993;
    q.x_max = 4999;
    series = s->query_series(q);
    ASSERT_TRUE(series.ok());
    EXPECT_EQ((*series)[0].points.size(), 7u);
    auto info = s->get_run(run);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->summary.steps, 4999);
    EXPECT_EQ(info->summary.points, 5000 * 15);
    EXPECT_DOUBLE_EQ(*info->summary.final_loss, 1.0 + 0.001 * 4999);
  }
  // Written when the rank ends.
  ASSERT_TRUE(store_->ingest_chunk(run, "rank0", text.size(), end_line(0, "ok")).ok());
  EXPECT_EQ(count(*store_, "SELECT n FROM buckets WHERE level = 1 AND bucket = 312 AND key ="
                           " (SELECT id FROM keys WHERE name = 'loss')"), 8);
  EXPECT_EQ(count(*store_, "SELECT n FROM buckets WHERE level = 0 AND key ="
                           " (SELECT id FROM keys WHERE name = 'loss')"), 5000);
}

TEST_F(StoreRankAgg, FinishedRanksAreCountedOnceWithRepeatedEndRecords) {
  RunId run = *store_->create_run("end", {}, {});
  auto feed = [&](int rank, const std::string& line) {
    const std::string source = "rank" + std::to_string(rank);
    auto r = store_->ingest_chunk(run, source, *store_->source_offset(run, source), line);
    ASSERT_TRUE(r.ok()) << r.error().message();
  };
  auto ok_count = [&] { return count(*store_, "SELECT ranks_ok FROM run_stats WHERE run = " + std::to_string(run)); };
  auto status = [&] { return store_->get_run(run)->summary.status; };
  for (int r = 0; r < 3; ++r) feed(r, start_line(r, 3) + step_line(r, 0, 2.0));
  feed(0, end_line(0, "ok"));
  feed(0, end_line(0, "ok"));  // repeated: still one rank
  feed(0, end_line(0, "ok"));
  EXPECT_EQ(ok_count(), 1);
  feed(1, end_line(1, "ok"));
  EXPECT_EQ(ok_count(), 2);
  EXPECT_EQ(status(), "running");  // 2 of 3: a recount would say the same, a double count not
  feed(2, end_line(2, "ok"));
  EXPECT_EQ(ok_count(), 3);
  EXPECT_EQ(status(), "ok");
  // The same file re-sent from the start (a re-attach that lost its offset) counts nothing twice.
  RunId again = *store_->create_run("again", {}, {});
  const std::string lines = start_line(0, 2) + end_line(0, "ok") + end_line(0, "ok");
  ASSERT_TRUE(store_->ingest_chunk(again, "a", 0, lines).ok());
  ASSERT_TRUE(store_->ingest_chunk(again, "b", 0, lines).ok());
  EXPECT_EQ(count(*store_, "SELECT ranks_ok FROM run_stats WHERE run = " + std::to_string(again)), 1);
  EXPECT_EQ(store_->get_run(again)->summary.status, "running");
  // An ok rank re-reported failed leaves the count.
  ASSERT_TRUE(store_->ingest_chunk(again, "a", lines.size(), end_line(0, "failed", "exit 1")).ok());
  EXPECT_EQ(count(*store_, "SELECT ranks_ok FROM run_stats WHERE run = " + std::to_string(again)), 0);
}

// A version-3 store (the same tables without rank_agg and run_stats) opens as version 4 with its
// aggregates, totals and finished-rank counts rebuilt from the stored points.
TEST_F(StoreRankAgg, MigratesVersion3RebuildingAggregates) {
  RunId run = *store_->create_run("v3", {}, {});
  for (int r = 0; r < 4; ++r) {
    std::string text = start_line(r, 4);
    for (int s = 0; s < 200; ++s) text += step_line(r, s, 4.0 - 0.01 * s + 0.1 * r);
    if (r < 2) text += end_line(r, "ok");
    ASSERT_TRUE(store_->ingest_chunk(run, "rank" + std::to_string(r), 0, text).ok());
  }
  ASSERT_TRUE(store_->flush_open_buckets().ok());
  const std::string aggs = dump(store_->handle(), "SELECT * FROM rank_agg ORDER BY key, step");
  const std::string stats = dump(store_->handle(), "SELECT * FROM run_stats");
  const std::string buckets = dump(store_->handle(), "SELECT * FROM buckets ORDER BY key, rank, level, bucket");
  const auto before = store_->get_run(run);
  ASSERT_TRUE(before.ok());
  store_.reset();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "runs.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TABLE rank_agg; DROP TABLE run_stats; DELETE FROM buckets;"
                               " UPDATE schema_version SET version = 3;", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  store_ = open_store(dir_ / "runs.db");
  ASSERT_TRUE(store_);
  EXPECT_EQ(store_->schema_version(), kSchemaVersion);
  EXPECT_EQ(dump(store_->handle(), "SELECT * FROM rank_agg ORDER BY key, step"), aggs);
  EXPECT_EQ(dump(store_->handle(), "SELECT * FROM run_stats"), stats);
  EXPECT_EQ(dump(store_->handle(), "SELECT * FROM buckets ORDER BY key, rank, level, bucket"), buckets);
  const auto after = store_->get_run(run);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->summary.steps, before->summary.steps);
  EXPECT_EQ(after->summary.points, before->summary.points);
  EXPECT_EQ(after->summary.final_loss, before->summary.final_loss);
  EXPECT_EQ(count(*store_, "SELECT ranks_ok FROM run_stats"), 2);
  expect_aggregates_exact(run);
}

}  // namespace
}  // namespace meshwork::store
