// Exit records (exit-node<n>.json) come from the supervisors on remote nodes and are read by the
// follower to name a failed run's root cause; a rank's metrics tail gives its last phase.
// The first byte picks the parser: 0 the exit record, 1 rank_progress over metrics lines.
// Invariants: never a crash; a refusal names the field; an accepted record writes JSON that
// reads back to the same JSON, and its failure's how() and when() are words; rank_progress gives
// a step of -1 or more, and -1 only before the first step record (startup) or when none had one.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/exit_record.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  if (data[0] % 2 == 1) {
    const RankProgress p = rank_progress(text);
    FUZZ_CHECK(p.last_step >= -1, "rank_progress: last_step " + std::to_string(p.last_step));
    return 0;
  }
  auto rec = parse_exit_record(text);
  if (!rec) {
    fuzz::check_refusal(rec.error(), "parse_exit_record");
    return 0;
  }
  if (rec->failure) {
    FUZZ_CHECK(!rec->failure->how().empty(), "a failure without how()");
    FUZZ_CHECK(!rec->failure->when().empty(), "a failure without when()");
  }
  const nlohmann::json written = to_json(*rec);
  auto again = exit_record_from_json(written);
  FUZZ_CHECK(again.ok(), "a written exit record is refused: " + again.error().message());
  FUZZ_CHECK(to_json(*again) == written, "exit record round trip changed it");
  return 0;
}
