// trainer_state.json (Hugging Face Trainer's log_history) comes from other tools' runs.
// Invariants: never a crash; a refusal names the file; every point is finite-stepped and tagged.
#include <cstdint>

#include "core/interop/foreign_metrics.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto points = interop::read_trainer_state(fuzz::as_text(data, size), "trainer_state.json");
  if (!points) {
    fuzz::check_refusal(points.error(), "read_trainer_state");
    return 0;
  }
  for (const auto& p : *points) {
    FUZZ_CHECK(!p.tag.empty(), "a point without a series name");
    const auto name = interop::meshwork_metric_name(p.tag);
    FUZZ_CHECK(!name.key.empty(), "a series mapped to no name: " + p.tag);
  }
  return 0;
}
