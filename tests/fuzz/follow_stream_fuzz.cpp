// The follow stream arrives from a node over SSH (`meshtrain tail`), cut into whatever chunks
// the link delivers; the request is what a tail reads on stdin. Invariants: never a crash; a
// malformed header is an Error with words; the frames do not depend on where the bytes were cut
// (the whole input at once, or byte by byte); a parsed request, written again, reads the same.
#include <cstdint>
#include <string>
#include <vector>

#include "core/follow_stream.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;
using namespace meshwork::follow;

namespace {

struct Parsed {
  std::vector<std::string> frames;  // each frame, written out field by field
  bool error = false;
};

std::string describe(const Frame& f) {
  return std::string(1, static_cast<char>(f.kind)) + " " + std::to_string(f.a) + " " + std::to_string(f.b) + " " +
         std::to_string(f.time) + " " + std::to_string(f.stopped) + std::to_string(f.gone) + " " + f.body;
}

Parsed parse(std::string_view bytes, size_t step) {
  Parsed out;
  StreamParser p;
  for (size_t at = 0; at < bytes.size() && !out.error; at += step) {
    p.feed(bytes.substr(at, step));
    while (true) {
      auto f = p.next();
      if (!f) {
        fuzz::check_refusal(f.error(), "StreamParser");
        out.error = true;
        break;
      }
      if (!*f) break;
      out.frames.push_back(describe(**f));
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  const Parsed whole = parse(text, text.size() + 1);
  const Parsed bytewise = parse(text, 1);
  FUZZ_CHECK(whole.error == bytewise.error, "an error depends on how the stream was cut");
  FUZZ_CHECK(whole.frames == bytewise.frames, "frames depend on how the stream was cut");

  auto req = parse_request(text);
  if (!req) {
    fuzz::check_refusal(req.error(), "parse_request");
    return 0;
  }
  auto again = parse_request(encode_request(*req));
  FUZZ_CHECK(again.ok(), "a written request is refused: " + again.error().message());
  FUZZ_CHECK(encode_request(*again) == encode_request(*req), "request round trip changed it");
  return 0;
}
