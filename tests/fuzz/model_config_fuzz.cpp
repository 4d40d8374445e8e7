// config.json files come from Hugging Face directories users point at.
// Invariants: never a crash; a refusal names the field; an accepted spec writes a config.json
// that reads back to the same spec (compared through its JSON form).
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/model_spec.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;  // not JSON: the caller's JSON error, not ours
  auto spec = model_spec_from_json(doc, "fuzz");
  if (!spec) {
    fuzz::check_refusal(spec.error(), "model_spec_from_json");
    return 0;
  }
  const nlohmann::json written = model_spec_to_json(*spec);
  auto again = model_spec_from_json(written, "fuzz");
  FUZZ_CHECK(again.ok(), "a written config.json is refused: " + again.error().message());
  FUZZ_CHECK(model_spec_to_json(*again) == written, "config.json round trip changed the spec");
  FUZZ_CHECK(again->parameter_count() == spec->parameter_count(), "parameter count changed");
  return 0;
}
