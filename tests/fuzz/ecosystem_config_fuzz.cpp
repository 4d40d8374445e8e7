// Accelerate / Axolotl YAML and torchtitan TOML files are imported from the user's disk (File →
// Import, `meshwork plan --from`). The first byte picks the format. Invariants: never a crash
// (yaml-cpp and toml++ throw: the importer must turn every throw into an Error); a refusal names
// the file and the key or line.
#include <cstdint>
#include <optional>

#include "core/interop/ecosystem_config.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;
using namespace meshwork::interop;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::optional<ConfigFormat> format;
  switch (data[0] % 4) {
    case 0: format = ConfigFormat::accelerate; break;
    case 1: format = ConfigFormat::axolotl; break;
    case 2: format = ConfigFormat::torchtitan; break;
    default: break;  // chosen from the text, as for a file without a telling extension
  }
  auto imported = import_config_text(fuzz::as_text(data + 1, size - 1), "fuzz.cfg", format);
  if (!imported) fuzz::check_refusal(imported.error(), "import_config_text");
  return 0;
}
