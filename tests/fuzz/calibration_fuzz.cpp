// Calibration files are read back from the store and from `meshwork plan --calibration FILE`.
// Invariants: never a crash; a refusal names the field; an accepted calibration writes JSON that
// reads back to the same JSON.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/calibration.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
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
