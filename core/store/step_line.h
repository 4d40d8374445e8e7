// Fast path for the most frequent metrics line, the step record (internal). meshtrain writes
// millions of them; building a JSON DOM per line (core's parse_metrics_line) costs about a third
// of the ingest time. parse_step_line() reads a flat step record directly and returns nullopt for
// anything it is not sure about (another type, escapes, nulls, unknown keys, non-integer integer
// fields ...): the caller then uses core's parser, which stays the one authority on the format
// and on error messages. tests/store/step_line_test.cpp checks both agree.
#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "core/metrics.h"

namespace meshwork::store {

std::optional<StepRecord> parse_step_line(std::string_view line);

// The values of step_series(r) in step_series_keys() order, without allocating.
inline constexpr size_t kStepSeries = 18;
std::array<double, kStepSeries> step_values(const StepRecord& r);
inline constexpr size_t kCommPpSeries = 15;  // "comm_s.pp", the series schema v5 added
inline constexpr size_t kCommEpSeries = 16;  // "comm_s.ep", the series schema v6 added
inline constexpr size_t kCpuSeries = 17;     // "cpu_s", the series schema v7 added

}  // namespace meshwork::store
