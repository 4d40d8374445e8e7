// The stage orders meshtrain runs (core/pipeline_schedule.h) against the closed forms of
// core/pipeline.h: every (micro-batch, chunk) once each way, the micro-batches held at the peak,
// the simulated bubble, and a set of orders that cannot run named as such.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "core/pipeline.h"
#include "core/pipeline_schedule.h"

using namespace meshwork;

namespace {

struct Case {
  PipelineSchedule schedule;
  int pp, v;
  int64_t m;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int pp : {1, 2, 3, 4, 8})
    for (int64_t m : {1, 2, 3, 4, 5, 8, 16, 24}) {
      out.push_back({PipelineSchedule::gpipe, pp, 1, m});
      out.push_back({PipelineSchedule::one_f_one_b, pp, 1, m});
      if (m % pp == 0)
        for (int v : {2, 3, 4}) out.push_back({PipelineSchedule::interleaved_1f1b, pp, v, m});
    }
  return out;
}

std::string name(const Case& c) {
  return std::string(to_string(c.schedule)) + " pp " + std::to_string(c.pp) + " V " + std::to_string(c.v) + " M " +
         std::to_string(c.m);
}

TEST(PipelineSchedule, EveryMicroBatchOfEveryChunkRunsOnceEachWayForwardFirst) {
  for (const Case& c : cases()) {
    for (int r = 0; r < c.pp; ++r) {
      const auto list = pipeline_schedule(c.schedule, c.pp, c.v, c.m, r);
      ASSERT_EQ(list.size(), static_cast<size_t>(2 * c.m * c.v)) << name(c) << " rank " << r;
      std::set<std::pair<int64_t, int>> forwarded, backwarded;
      for (const PipelineAction& a : list) {
        ASSERT_EQ(a.chunk % c.pp, r) << name(c) << ": " << to_string(a);
        ASSERT_LT(a.chunk, c.pp * c.v) << name(c);
        ASSERT_LT(a.micro_batch, c.m) << name(c);
        if (a.kind == PipelineAction::forward) {
          ASSERT_TRUE(forwarded.insert({a.micro_batch, a.chunk}).second) << name(c) << ": twice " << to_string(a);
        } else {
          ASSERT_TRUE(forwarded.count({a.micro_batch, a.chunk})) << name(c) << ": backward first " << to_string(a);
          ASSERT_TRUE(backwarded.insert({a.micro_batch, a.chunk}).second) << name(c) << ": twice " << to_string(a);
        }
      }
      ASSERT_EQ(forwarded, backwarded) << name(c);
    }
  }
}

TEST(PipelineSchedule, PeakInFlightIsTheClosedForm) {
  for (const Case& c : cases())
    for (int r = 0; r < c.pp; ++r)
      EXPECT_EQ(peak_in_flight(pipeline_schedule(c.schedule, c.pp, c.v, c.m, r)),
                pipeline_in_flight(c.schedule, c.pp, c.v, c.m, r))
          << name(c) << " rank " << r;
}

TEST(PipelineSchedule, OneFOneBStartsWithWarmUpForwardsThenAlternates) {
  // pp 4, M 6, rank 1: pp - rank - 1 = 2 warm-up forwards (Narayanan et al. 2021, figure 4).
  const auto list = pipeline_schedule(PipelineSchedule::one_f_one_b, 4, 1, 6, 1);
  std::string got;
  for (const auto& a : list) got += to_string(a) + " ";
  EXPECT_EQ(got, "F0@1 F1@1 F2@1 B0@1 F3@1 B1@1 F4@1 B2@1 F5@1 B3@1 B4@1 B5@1 ");
  const auto last = pipeline_schedule(PipelineSchedule::one_f_one_b, 4, 1, 6, 3);
  got.clear();
  for (const auto& a : last) got += to_string(a) + " ";
  EXPECT_EQ(got, "F0@3 B0@3 F1@3 B1@3 F2@3 B2@3 F3@3 B3@3 F4@3 B4@3 F5@3 B5@3 ");
}

TEST(PipelineSchedule, InterleavedVisitsChunksPpMicroBatchesAtATime) {
  // pp 2, V 2, M 4, rank 0 holds chunks 0 and 2. Forwards: micro-batches 0,1 on chunk 0, then
  // 0,1 on chunk 2, then 2,3 on chunk 0, 2,3 on chunk 2; warm-up 2 (pp - 0 - 1) + (V - 1) pp = 4.
  const auto list = pipeline_schedule(PipelineSchedule::interleaved_1f1b, 2, 2, 4, 0);
  std::string got;
  for (const auto& a : list) got += to_string(a) + " ";
  EXPECT_EQ(got, "F0@0 F1@0 F0@2 F1@2 F2@0 B0@2 F3@0 B1@2 F2@2 B0@0 F3@2 B1@0 B2@2 B3@2 B2@0 B3@0 ");
}

TEST(PipelineSchedule, SimulatedBubbleIsTheClosedFormForBalancedChunks) {
  for (const Case& c : cases()) {
    const size_t k = static_cast<size_t>(c.pp * c.v);
    // Backward twice the forward, as for a matmul-bound layer; a chunk of 1/V of a stage.
    const std::vector<double> f(k, 1.0 / c.v), b(k, 2.0 / c.v);
    auto t = simulate_pipeline(c.schedule, c.pp, c.v, c.m, f, b);
    ASSERT_TRUE(t) << name(c) << ": " << t.error().message();
    const double expected = pipeline_bubble_fraction(c.schedule, c.pp, c.v, c.m);
    EXPECT_NEAR(t->bubble_fraction, expected, 1e-9) << name(c);
    // (M V + pp - 1) chunk times of 3 / V each.
    EXPECT_NEAR(t->step_s, (c.m * c.v + c.pp - 1) * 3.0 / c.v, 1e-9) << name(c);
    for (double busy : t->busy_s) EXPECT_NEAR(busy, c.m * 3.0, 1e-9) << name(c);
  }
}

TEST(PipelineSchedule, TheSlowestStageSetsThePace) {
  // pp 4, 1f1b, M 16: stage 2 takes twice as long; every micro-batch passes it, so the step is at
  // least 16 of its micro-batch times, and the others wait for it.
  std::vector<double> f = {1, 1, 2, 1}, b = {2, 2, 4, 2};
  auto t = simulate_pipeline(PipelineSchedule::one_f_one_b, 4, 1, 16, f, b);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_GE(t->step_s, 16 * 6.0);
  EXPECT_NEAR(t->busy_s[2], 16 * 6.0, 1e-9);
  EXPECT_GT(t->idle_s[0], t->idle_s[2]);
  EXPECT_GT(t->bubble_fraction, pipeline_bubble_fraction(PipelineSchedule::one_f_one_b, 4, 1, 16));
}

TEST(PipelineSchedule, HopLatencyLengthensTheFillAndDrain) {
  // gpipe: each of the pp - 1 hops of the fill and of the drain adds its latency once. 1f1b
  // alternates, so its steady state waits on hops too: at least the same 2 (pp - 1).
  const std::vector<double> f(4, 1.0), b(4, 2.0);
  const double hop = 0.25;
  auto gpipe = simulate_pipeline(PipelineSchedule::gpipe, 4, 1, 8, f, b, 0.0);
  auto gpipe_hop = simulate_pipeline(PipelineSchedule::gpipe, 4, 1, 8, f, b, hop);
  ASSERT_TRUE(gpipe && gpipe_hop);
  EXPECT_NEAR(gpipe_hop->step_s - gpipe->step_s, 2 * 3 * hop, 1e-9);
  auto quick = simulate_pipeline(PipelineSchedule::one_f_one_b, 4, 1, 8, f, b, 0.0);
  auto slow = simulate_pipeline(PipelineSchedule::one_f_one_b, 4, 1, 8, f, b, hop);
  ASSERT_TRUE(quick && slow);
  EXPECT_GE(slow->step_s - quick->step_s, 2 * 3 * hop - 1e-9);
  EXPECT_GT(slow->bubble_fraction, quick->bubble_fraction);
}

TEST(PipelineSchedule, OrdersThatWaitOnEachOtherAreRefusedByName) {
  // Rank 0 wants chunk 1's gradient before it has sent chunk 1 its activation.
  std::vector<std::vector<PipelineAction>> lists = {
      {{PipelineAction::forward, 0, 0}, {PipelineAction::backward, 0, 0}},
      {{PipelineAction::backward, 0, 1}, {PipelineAction::forward, 0, 1}},
  };
  auto t = simulate_pipeline(lists, {1, 1}, {2, 2});
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message().find("cannot run"), std::string::npos) << t.error().message();
  EXPECT_NE(t.error().message().find("rank 1 at B0@1"), std::string::npos) << t.error().message();
  // A chunk on the wrong rank.
  auto wrong = simulate_pipeline({{{PipelineAction::forward, 0, 1}}, {}}, {1, 1}, {1, 1});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().message().find("F0@1"), std::string::npos) << wrong.error().message();
}

}  // namespace
