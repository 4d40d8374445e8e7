// TensorBoard event files come from other tools' runs (`meshwork runs import`, dropped files, a
// followed directory). Random bytes almost never carry a valid CRC-32C, so the first byte picks
// how the rest is read: as the file's bytes (the framing and CRC checks), or as record payloads
// that this target frames with correct CRCs (the Event / Summary / TensorProto decoding behind
// them). Invariants: never a crash; a corrupt record's error names the file; the intact prefix
// ends inside the input; reading that prefix alone gives the same scalars, neither cut nor
// corrupt; and resuming at any intact record boundary (a live follow) gives the same scalars as
// one whole read.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/interop/tfevents.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;
using namespace meshwork::interop;

namespace {

std::string le(uint64_t v, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}

// Payloads separated by the byte 0xFF (an escape-free split is enough for the fuzzer).
std::string framed(std::string_view payloads) {
  std::string out;
  size_t start = 0;
  while (start <= payloads.size()) {
    size_t end = payloads.find('\xff', start);
    if (end == std::string_view::npos) end = payloads.size();
    const std::string_view p = payloads.substr(start, end - start);
    const std::string len = le(p.size(), 8);
    out += len + le(masked_crc32c(len.data(), len.size()), 4);
    out += std::string(p) + le(masked_crc32c(p.data(), p.size()), 4);
    start = end + 1;
  }
  return out;
}

bool same(const std::vector<ScalarPoint>& a, const std::vector<ScalarPoint>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool nan_a = a[i].value != a[i].value, nan_b = b[i].value != b[i].value;
    if (a[i].step != b[i].step || a[i].tag != b[i].tag || nan_a != nan_b || (!nan_a && a[i].value != b[i].value))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  const std::string bytes = (data[0] & 1) ? framed(rest) : std::string(rest);
  const EventRead whole = read_event_records(bytes, 0, "fuzz.tfevents");
  FUZZ_CHECK(whole.intact_end <= bytes.size(), "intact prefix past the end of the input");
  if (whole.corrupt) fuzz::check_refusal(*whole.corrupt, "read_event_records");
  if (whole.cut) fuzz::check_refusal(whole.cut_error("fuzz.tfevents"), "cut_error");

  const EventRead prefix = read_event_records(std::string_view(bytes).substr(0, whole.intact_end), 0, "fuzz");
  FUZZ_CHECK(!prefix.corrupt && !prefix.cut, "the intact prefix reads as corrupt or cut");
  FUZZ_CHECK(prefix.intact_end == whole.intact_end && prefix.records == whole.records,
             "the intact prefix has other records");
  FUZZ_CHECK(same(prefix.scalars, whole.scalars), "the intact prefix has other scalars");

  // A follow that read up to some intact record and resumed at its offset.
  if (whole.records >= 2) {
    const uint64_t cut_at = whole.records / 2;
    uint64_t offset = 0;
    for (uint64_t r = 0; r < cut_at; ++r) {
      uint64_t len = 0;
      for (int i = 0; i < 8; ++i) len |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[offset + i])) << (8 * i);
      offset += 8 + 4 + len + 4;
    }
    const EventRead first = read_event_records(std::string_view(bytes).substr(0, offset), 0, "fuzz");
    const EventRead second = read_event_records(std::string_view(bytes).substr(offset), offset, "fuzz");
    FUZZ_CHECK(first.intact_end == offset && second.intact_end == whole.intact_end,
               "a resumed read ends elsewhere than one whole read");
    std::vector<ScalarPoint> joined = first.scalars;
    joined.insert(joined.end(), second.scalars.begin(), second.scalars.end());
    FUZZ_CHECK(same(joined, whole.scalars), "a resumed read gives other scalars than one whole read");
  }
  return 0;
}
