// Calibration files are read back from the store and from `meshwork plan --calibration FILE`;
// calibration records come from remote ranks (`meshtrain calibrate`'s metrics, a JSON array of
// them here: {"kind": ..., fields...}), fitted by calibration_from_records (split steps: a run
// config each, estimated and fitted).
// Invariants: never a crash; a refusal names the field; an accepted calibration writes JSON that
// reads back to the same JSON; a calibration fitted from records does too, and its step factors
// are finite and > 0.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/calibration.h"
#include "core/calibration_records.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  if (doc.is_array()) {
    std::vector<CalibrationRecord> records;
    for (const auto& e : doc) {
      if (!e.is_object()) continue;
      CalibrationRecord r;
      r.rank = e.contains("rank") && e["rank"].is_number_integer() && e["rank"].get<int64_t>() >= 0 &&
                       e["rank"].get<int64_t>() < 1000000
                   ? static_cast<int>(e["rank"].get<int64_t>())
                   : 0;
      r.time = e.contains("time") && e["time"].is_number() ? e["time"].get<double>() : 0.0;
      r.kind = e.contains("kind") && e["kind"].is_string() ? e["kind"].get<std::string>() : "";
      r.fields = e;
      records.push_back(std::move(r));
    }
    auto fitted = calibration_from_records(records);
    if (!fitted) {
      fuzz::check_refusal(fitted.error(), "calibration_from_records");
      return 0;
    }
    for (const FitFactor& f : fitted->step_factors)
      FUZZ_CHECK(f.factor > 0 && std::isfinite(f.factor), "a step factor not finite and > 0: " + f.key.to_string());
    const nlohmann::json written = to_json(*fitted);
    auto again = calibration_from_json(written);
    FUZZ_CHECK(again.ok(), "a fitted calibration is refused: " + again.error().message());
    FUZZ_CHECK(to_json(*again) == written, "fitted calibration round trip changed it");
    return 0;
  }
  auto cal = calibration_from_json(doc);
  if (!cal) {
    fuzz::check_refusal(cal.error(), "calibration_from_json");
    return 0;
  }
  const nlohmann::json written = to_json(*cal);
  auto again = calibration_from_json(written);
  FUZZ_CHECK(again.ok(), "a written calibration is refused: " + again.error().message());
  FUZZ_CHECK(to_json(*again) == written, "calibration round trip changed it");
  return 0;
}
