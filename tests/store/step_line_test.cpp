// The step-record fast path must read exactly what core's parser reads, and decline the rest.
#include <cmath>
#include <random>

#include "core/store/step_line.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

void expect_same(const StepRecord& a, const StepRecord& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.cpu_s, b.cpu_s);
  const auto va = step_values(a), vb = step_values(b);
  for (size_t i = 0; i < kStepSeries; ++i) {
    if (std::isnan(va[i]) && std::isnan(vb[i])) continue;  // an unset cpu_s
    EXPECT_EQ(va[i], vb[i]) << step_series_keys()[i];
  }
  EXPECT_EQ(a.time, b.time);
}

TEST(StoreStepLine, AgreesWithCoreParserOnSerializedRecords) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  for (int i = 0; i < 2000; ++i) {
    StepRecord r = testing::step_record(static_cast<int>(rng() % 64), static_cast<int64_t>(rng() % 1000000), u(rng));
    r.time = 1.7e9 + u(rng);
    r.grad_norm = u(rng) * 1e-30;
    r.tokens = static_cast<int64_t>(rng() % 100000);
    r.mem_bytes = static_cast<int64_t>(rng() >> 2);
    r.comm_s = AxisArray<double>::of(u(rng), u(rng), 0, -0.0);
    r.comm_ep_s = i % 2 ? u(rng) : 0;  // an expert-parallel run's line has "ep" in comm_s
    if (i % 2) r.cpu_s = std::abs(u(rng)) * 1e-6;  // optional: half the lines carry it
    const std::string line = to_json_line(r);
    std::optional<StepRecord> fast = parse_step_line(line);
    Result<MetricsRecord> core = parse_metrics_line(line);
    ASSERT_TRUE(fast.has_value()) << line;
    ASSERT_TRUE(core.ok());
    expect_same(*fast, std::get<StepRecord>(*core));
  }
}

TEST(StoreStepLine, StepValuesFollowCoreSeriesOrder) {
  StepRecord r = testing::step_record(3, 9, 2.5);
  r.comm_s[Axis::pp] = 0.125;
  r.comm_ep_s = 0.25;
  r.cpu_s = 0.7;
  const auto series = step_series(r);
  const auto values = step_values(r);
  ASSERT_EQ(series.size(), kStepSeries);
  for (size_t i = 0; i < kStepSeries; ++i) {
    EXPECT_EQ(series[i].first, step_series_keys()[i]);
    EXPECT_EQ(series[i].second, values[i]) << series[i].first;
  }
}

TEST(StoreStepLine, AcceptsSpacingAndKeyOrderLikeCore) {
  const std::string line =
      " { \"rank\" : 2 , \"loss\":1.5e-3, \"type\":\"step\", \"v\":1, \"step\":-4,"
      " \"comm_s\":{ \"tp\":0.5 } } ";
  auto fast = parse_step_line(line);
  ASSERT_TRUE(fast.has_value());
  auto core = parse_metrics_line(line);
  ASSERT_TRUE(core.ok());
  expect_same(*fast, std::get<StepRecord>(*core));
  EXPECT_EQ(fast->comm_s[Axis::tp], 0.5);
}

TEST(StoreStepLine, DeclinesWhatItIsNotSureAbout) {
  for (const char* line : {
           "{\"v\":1,\"type\":\"start\",\"rank\":0}",                        // other type
           "{\"v\":1,\"type\":\"step\",\"step\":1}",                          // no rank
           "{\"v\":1,\"type\":\"step\",\"step\":1.0,\"rank\":0}",             // integer as float
           "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0,\"loss\":null}", // null
           "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0,\"loss\":nan}",  // not JSON
           "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0,\"loss\":01}",   // not JSON
           "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0,\"extra\":1}",   // unknown key
           "{\"v\":1,\"type\":\"st\\u0065p\",\"step\":1,\"rank\":0}",         // escapes
           "{\"v\":2,\"type\":\"step\",\"step\":1,\"rank\":0}",               // version
           "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0} x",             // trailing text
           "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0",                // truncated
           "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0,\"loss\":0.}",   // no digit after '.'
           "{\"v\":1,\"type\":\"step\",\"step\":1,\"rank\":0,\"loss\":1.e5}", // (found by fuzzing)
       })
    EXPECT_FALSE(parse_step_line(line).has_value()) << line;
}

// Found by fuzzing: an integer field far outside int64 (here 2e30 bytes) was converted with
// undefined behaviour. Core now reads it as absent; the rest of the record stands.
TEST(StoreStepLine, AnIntegerFieldOutOfRangeReadsAsAbsent) {
  for (const char* big : {"2000006666666666666666666666660", "2.5e30", "-1e300", "18446744073709551615"}) {
    const std::string line = std::string("{\"v\":1,\"type\":\"step\",\"step\":3,\"rank\":1,\"loss\":2.5,") +
                             "\"mem_peak_bytes\":" + big + "}";
    auto parsed = parse_metrics_line(line);
    ASSERT_TRUE(parsed.ok()) << line;
    const auto& r = std::get<StepRecord>(*parsed);
    EXPECT_EQ(r.step, 3);
    EXPECT_EQ(r.loss, 2.5);
    EXPECT_EQ(r.mem_peak_bytes, StepRecord{}.mem_peak_bytes) << big;
  }
  auto huge_step = parse_metrics_line("{\"v\":1,\"type\":\"step\",\"step\":1e40,\"rank\":0}");
  EXPECT_FALSE(huge_step.ok());
}

}  // namespace
}  // namespace meshwork::store
