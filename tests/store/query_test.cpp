// Decimation and chart queries: bounded output, spikes kept, exact ends, x axes, aggregates.
#include <algorithm>
#include <cmath>

#include "core/store/decimate.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::open_store;
using testing::step_line;
using testing::TempDir;

TEST(StoreDecimate, KeepsASingleSpikeInAMillionPointsAndTheExactEnds) {
  std::vector<Point> pts;
  pts.reserve(1000000);
  for (int i = 0; i < 1000000; ++i) pts.push_back({double(i), std::sin(i * 1e-4)});
  pts[777777].y = 50.0;
  pts[123456].y = -50.0;
  const auto out = decimate(pts, 800);
  EXPECT_LE(out.size(), 2u * 800 + 2);
  EXPECT_GE(out.size(), 800u);
  EXPECT_EQ(out.front().x, 0);
  EXPECT_EQ(out.back().x, 999999);
  EXPECT_EQ(out.back().y, pts.back().y);
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end(), [](auto& a, auto& b) { return a.x < b.x; }));
  auto has = [&](double x, double y) {
    return std::any_of(out.begin(), out.end(), [&](const Point& p) { return p.x == x && p.y == y; });
  };
  EXPECT_TRUE(has(777777, 50.0));
  EXPECT_TRUE(has(123456, -50.0));
}

TEST(StoreDecimate, SmallInputsPassThroughAndOneColumnWorks) {
  std::vector<Point> three = {{0, 1}, {1, 5}, {2, 3}};
  EXPECT_EQ(decimate(three, 800).size(), 3u);
  const auto one = decimate(three, 1);
  EXPECT_EQ(one.front().x, 0);
  EXPECT_EQ(one.back().x, 2);
  EXPECT_TRUE(decimate({}, 10).empty());
}

class StoreQuery : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = open_store(dir_ / "runs.db");
    ASSERT_TRUE(store_);
  }
  RunId ingest(int ranks, int steps, double spike_at = -1, int spike_rank = 0) {
    RunId run = *store_->create_run("q", {}, {});
    for (int r = 0; r < ranks; ++r) {
      std::string text;
      for (int s = 0; s < steps; ++s)
        text += step_line(r, s, s == spike_at && r == spike_rank ? 1e6 : r * 10.0 + std::cos(s * 0.01));
      auto c = store_->ingest_chunk(run, "rank" + std::to_string(r), 0, text);
      EXPECT_TRUE(c.ok()) << c.error().message();
    }
    return run;
  }
  TempDir dir_;
  std::unique_ptr<RunStore> store_;
};

TEST_F(StoreQuery, SmallSeriesComeBackExactly) {
  RunId run = ingest(1, 200);
  SeriesQuery q;
  q.runs = {run};
  auto s = store_->query_series(q);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(s->size(), 1u);
  EXPECT_EQ((*s)[0].lod_level, 0);
  EXPECT_EQ((*s)[0].points.size(), 200u);
  EXPECT_EQ((*s)[0].source_points, 200);
  EXPECT_DOUBLE_EQ((*s)[0].points[17].y, std::cos(0.17));
}

TEST_F(StoreQuery, RangesAxesAndAggregatesOverRanks) {
  RunId run = ingest(4, 300);
  SeriesQuery q;
  q.runs = {run};
  q.aggregate = Aggregate::mean;
  auto mean = store_->query_series(q);
  ASSERT_TRUE(mean.ok());
  ASSERT_EQ((*mean)[0].points.size(), 300u);
  EXPECT_DOUBLE_EQ((*mean)[0].points[5].y, 15.0 + std::cos(0.05));  // (0+10+20+30)/4 + cos
  q.aggregate = Aggregate::max;
  EXPECT_DOUBLE_EQ((*store_->query_series(q))[0].points[5].y, 30.0 + std::cos(0.05));
  q.aggregate = Aggregate::sum;
  EXPECT_DOUBLE_EQ((*store_->query_series(q))[0].points[5].y, 60.0 + 4 * std::cos(0.05));
  // x = tokens (100 per step, cumulative) and x = time (1000 + step), each with a range.
  q.aggregate = Aggregate::none;
  q.rank = 2;
  q.x = XAxis::tokens;
  q.x_min = 1000;
  q.x_max = 2000;
  auto tok = store_->query_series(q);
  ASSERT_TRUE(tok.ok());
  ASSERT_EQ((*tok)[0].points.size(), 11u);  // steps 9..19 have tokens 1000..2000
  EXPECT_EQ((*tok)[0].points.front().x, 1000);
  EXPECT_DOUBLE_EQ((*tok)[0].points.front().y, 20 + std::cos(0.09));
  q.x = XAxis::time;
  q.x_min = 1100.5;
  q.x_max = 1110;
  auto time = store_->query_series(q);
  ASSERT_EQ((*time)[0].points.size(), 10u);  // steps 101..110
  EXPECT_EQ((*time)[0].points.front().x, 1101);
  // Errors name the field.
  q.key = "nope";
  auto bad = store_->query_series(q);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "key");
  q.key = "loss";
  q.pixels = 0;
  EXPECT_EQ(store_->query_series(q).error().field, "pixels");
}

// Large enough that the query reads chart buckets, not raw points.
TEST_F(StoreQuery, IntegrationSpikeSurvivesBucketPathAcrossRunsAndZoom) {
  RunId a = ingest(1, 60000, 37777);
  RunId b = ingest(2, 30000, 13333, 1);
  SeriesQuery q;
  q.runs = {a, b};
  q.pixels = 800;
  q.aggregate = Aggregate::max;
  auto s = store_->query_series(q);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(s->size(), 2u);
  for (const Series& series : *s) {
    // A long run of one or two ranks: each rank's buckets read fewer rows than one aggregate
    // row per step (agg_query.h), so the bucket path.
    EXPECT_GT(series.lod_level, 0);
    EXPECT_LE(series.points.size(), 2u * 800 + 2);
  }
  EXPECT_EQ((*s)[0].source_points, 60000);
  EXPECT_EQ((*s)[1].source_points, 2 * 30000);
  auto spike = [](const Series& series, double x) {
    return std::any_of(series.points.begin(), series.points.end(),
                       [&](const Point& p) { return p.x == x && p.y == 1e6; });
  };
  EXPECT_TRUE(spike((*s)[0], 37777));
  EXPECT_TRUE(spike((*s)[1], 13333));  // run b's spike is on rank 1: the max over ranks has it
  // A subset of ranks is aggregated from the ranks' own series, on the bucket path too.
  SeriesQuery sub = q;
  sub.ranks = {1, 0};
  auto by_rank = store_->query_series(sub);
  ASSERT_TRUE(by_rank.ok()) << by_rank.error().message();
  for (const Series& series : *by_rank) EXPECT_GT(series.lod_level, 0);
  EXPECT_TRUE(spike((*by_rank)[0], 37777));
  EXPECT_TRUE(spike((*by_rank)[1], 13333));
  EXPECT_EQ((*by_rank)[1].source_points, 2 * 30000);
  EXPECT_EQ((*s)[0].points.front().x, 0);
  EXPECT_EQ((*s)[0].points.back().x, 59999);
  EXPECT_DOUBLE_EQ((*s)[0].points.back().y, std::cos(599.99));
  // Run b ends at step 29999; both share the x axis 0..59999.
  EXPECT_EQ((*s)[1].points.back().x, 29999);
  // Zoom with odd edges: exact first/last points of the range.
  q.runs = {a};
  q.aggregate = Aggregate::none;
  q.x_min = 20001.5;
  q.x_max = 49998.2;
  auto z = store_->query_series(q);
  ASSERT_TRUE(z.ok());
  EXPECT_GT((*z)[0].lod_level, 0);
  EXPECT_EQ((*z)[0].points.front().x, 20002);
  EXPECT_DOUBLE_EQ((*z)[0].points.front().y, std::cos(200.02));
  EXPECT_EQ((*z)[0].points.back().x, 49998);
  EXPECT_TRUE(spike((*z)[0], 37777));
  EXPECT_EQ((*z)[0].source_points, 49998 - 20002 + 1);
  // x = time on the bucket path.
  q.x = XAxis::time;
  q.x_min.reset();
  q.x_max.reset();
  auto t = store_->query_series(q);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(spike((*t)[0], 1000 + 37777));
}

}  // namespace
}  // namespace meshwork::store
