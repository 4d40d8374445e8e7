#include <gtest/gtest.h>

#include "core/units.h"

using namespace meshwork;

TEST(Units, ParsesSizes) {
  EXPECT_EQ(*parse_size("80GiB"), 80LL << 30);
  EXPECT_EQ(*parse_size("80GB"), 80'000'000'000LL);
  EXPECT_EQ(*parse_size("81920MiB"), 80LL << 30);
  EXPECT_EQ(*parse_size("1.5 TiB"), 3LL << 39);
  EXPECT_EQ(*parse_size("512kib"), 512LL << 10);
  EXPECT_EQ(*parse_size("100B"), 100);
}

TEST(Units, RefusesAmbiguousOrBrokenSizes) {
  for (const char* bad : {"80", "", "GiB", "80XB", "-5GiB", "1.2.3GB", "0GiB"}) {
    auto r = parse_size(bad, "--gpu-memory");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().field, "--gpu-memory");
    EXPECT_EQ(r.error().value, bad);
    EXPECT_NE(r.error().allowed.find("80GiB"), std::string::npos);
  }
}

TEST(Units, Formats) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(80.0 * (1LL << 30)), "80.0 GiB");
  EXPECT_EQ(format_gib(74.54 * (1LL << 30)), "74.5");
  EXPECT_EQ(format_seconds(0.00085), "850 us");
  EXPECT_EQ(format_seconds(0.0123), "12.3 ms");
  EXPECT_EQ(format_seconds(1.25), "1.25 s");
  EXPECT_EQ(format_seconds(125), "2 min 05 s");
  EXPECT_EQ(format_tokens_per_s(45'100), "45.1k tokens/s");
  EXPECT_EQ(format_count(8'030'261'248), "8.03B");
  EXPECT_EQ(format_percent(0.412), "41.2%");
}
