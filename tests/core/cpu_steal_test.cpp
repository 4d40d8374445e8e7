#include "core/cpu_steal.h"

#include <gtest/gtest.h>

namespace meshwork {
namespace {

TEST(CpuSteal, ParsesTheAggregateLineOfProcStat) {
  // A real /proc/stat of the 2-core VM (first three lines).
  const char* text =
      "cpu  1500256 365 303866 432922 12080 0 10771 24780 0 0\n"
      "cpu0 740681 166 150355 231019 3590 0 4705 12263 0 0\n"
      "cpu1 759574 198 153510 201902 8490 0 6066 12516 0 0\n";
  auto t = parse_proc_stat(text);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->steal, 24780u);
  EXPECT_EQ(t->total, 1500256u + 365 + 303866 + 432922 + 12080 + 0 + 10771 + 24780);
}

TEST(CpuSteal, RefusesTextWithoutTheStealColumn) {
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n").has_value());   // no aggregate line
  EXPECT_FALSE(parse_proc_stat("cpu  1 2 3 4 5 6 7\n").has_value());     // before steal existed
  EXPECT_FALSE(parse_proc_stat("cpu  1 2 x 4 5 6 7 8\n").has_value());
  EXPECT_FALSE(parse_proc_stat("").has_value());
}

TEST(CpuSteal, ShareIsStealOverAllTicksBetweenTwoReadings) {
  const CpuTimes a{100, 10'000}, b{150, 11'000};
  EXPECT_DOUBLE_EQ(steal_share(a, b), 50.0 / 1000.0);
  EXPECT_DOUBLE_EQ(steal_share(a, a), 0.0);             // no tick passed
  EXPECT_DOUBLE_EQ(steal_share(std::nullopt, b), 0.0);  // not Linux
  EXPECT_DOUBLE_EQ(steal_share(b, a), 0.0);             // counters never run backwards
}

TEST(CpuSteal, ReadsThisMachine) {
  auto before = read_cpu_times();
  ASSERT_TRUE(before.has_value()) << "this test runs on Linux, where /proc/stat exists";
  EXPECT_GT(before->total, 0u);
  EXPECT_LE(before->steal, before->total);
}

}  // namespace
}  // namespace meshwork
