// Run configs are files users write (meshwork launch --config, meshtrain --config).
// Invariants: never a crash; a refusal names the field; an accepted config writes a document
// that reads back to the same document; its flag form (run_config_to_flags) applies back
// through the one flag table without changing a field (every value prints exactly).
#include <cstdint>

#include <nlohmann/json.hpp>

#include "core/run_config.h"
#include "core/run_config_flags.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = nlohmann::json::parse(fuzz::as_text(data, size), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  auto config = run_config_from_json(doc);
  if (!config) {
    fuzz::check_refusal(config.error(), "run_config_from_json");
    return 0;
  }
  const nlohmann::json written = to_json(*config);
  auto again = run_config_from_json(written);
  FUZZ_CHECK(again.ok(), "a written run config is refused: " + again.error().message());
  FUZZ_CHECK(to_json(*again) == written, "run config round trip changed it");

  if (!config->model.is_string()) return 0;  // an inline model has no flag form
  RunConfig from_flags = *config;
  const auto flags = run_config_to_flags(*config);
  for (size_t i = 0; i + 1 < flags.size(); i += 2) {
    const RunConfigFlag* flag = find_run_config_flag(flags[i]);
    FUZZ_CHECK(flag != nullptr, "run_config_to_flags wrote an unknown flag " + flags[i]);
    Status applied = flag->apply(from_flags, flags[i + 1]);
    FUZZ_CHECK(applied.ok(), "a written flag is refused: " + flags[i] + " " + flags[i + 1]);
  }
  FUZZ_CHECK(to_json(from_flags) == written, "the flag form does not give the same config back");
  return 0;
}
