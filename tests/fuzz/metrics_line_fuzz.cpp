// Metrics lines come from remote ranks (or anything that writes into a run directory).
// Invariants: never a crash; a refusal names what; an accepted record prints to a line that
// parses back to the same line (print -> parse -> print is stable); the store's fast step-line
// path agrees with core's parser on every line it accepts (core stays the authority).
#include <cmath>
#include <cstdint>
#include <variant>

#include "core/metrics.h"
#include "core/store/step_line.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;

namespace {

std::string print(const MetricsRecord& record) {
  return std::visit([](const auto& r) { return to_json_line(r); }, record);
}

bool same_number(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line = fuzz::as_text(data, size);
  auto parsed = parse_metrics_line(line);
  if (!parsed) {
    fuzz::check_refusal(parsed.error(), "parse_metrics_line");
  } else {
    const std::string printed = print(*parsed);
    auto again = parse_metrics_line(printed);
    FUZZ_CHECK(again.ok(), "a printed record does not parse: " + printed);
    FUZZ_CHECK(print(*again) == printed, "print -> parse -> print changed: " + printed);
  }
  if (auto fast = store::parse_step_line(line)) {
    FUZZ_CHECK(parsed.ok() && std::holds_alternative<StepRecord>(*parsed),
               "the fast path accepted a line core refuses");
    const auto& slow = std::get<StepRecord>(*parsed);
    FUZZ_CHECK(fast->step == slow.step && fast->rank == slow.rank, "step/rank disagree");
    const auto a = store::step_values(*fast), b = store::step_values(slow);
    for (size_t i = 0; i < a.size(); ++i)
      FUZZ_CHECK(same_number(a[i], b[i]), "series " + step_series_keys()[i] + " disagrees");
  }
  return 0;
}
