// The follow stream: what `meshtrain tail` (trainer/tail.h) writes on a node's stdout and the
// workbench's follower (remote/node_stream.cpp) reads from ONE SSH exec channel, instead of an
// SFTP open/read/close per rank file per poll. Both ends link this file, so the format has one
// definition. docs/remote.md ("The follow stream") describes it for people.
//
// Frames are a header line, ASCII, ending in '\n'; only F and R frames carry a body, and their
// header says its exact length, so a reader cut at any byte (SSH delivers arbitrary chunks)
// resumes where it stopped:
//   V <version> <pid>\n                      hello: the tail's format version and its pid
//   F <rank> <offset> <len>\n<len bytes>     complete lines of metrics-rank<rank>.jsonl, starting
//                                            at byte <offset> of that file
//   R <node> <index> <len>\n<len bytes>      line <index> (0-based) of node<node>.restarts
//   X <node> <status> <time> <stopped> <how> node <node> ended: node<i>.exit's status and unix
//                                            time; stopped 1 when node<i>.stop exists; how is
//                                            "exit" (the file) or "gone" (no process left and
//                                            no file: the wrapper was killed, status 137)
//   S <rank> <len>\n<len bytes>              a rank's stall report (changes only): a JSON object
//                                            {"stalled":true|false,"process":"running"|"stopped"|
//                                            "zombie"|"gone","flight":<FlightState JSON,
//                                            core/flight_record.h>}; sent when the rank's flight
//                                            record has not changed for the tail's --stall-ms,
//                                            again when its process state changes, and once with
//                                            "stalled":false when it moves again
//   H <unix-ms>\n                            heartbeat, every ~2 s: the tail and the link live
//   E\n                                      every node ended and its files are drained: the
//                                            tail exits 0 after it
// An X for a node comes only after that node's files were read to their end (the ranks are
// gone by then), so "every line before the exit" holds for the receiver.
//
// The request the follower writes on the tail's stdin (before the stream starts):
//   N <node> <first-rank> <slots>\n          one per node the tail serves
//   O <rank> <offset>\n                      the store's offset of that rank's file (default 0)
//   .\n                                      end of the request
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace meshwork::follow {

inline constexpr int kStreamVersion = 1;

struct Frame {
  enum class Kind : char {
    hello = 'V', file = 'F', restart = 'R', exit = 'X', stall = 'S', heartbeat = 'H', end = 'E'
  };
  Kind kind = Kind::heartbeat;
  // V: a = version, b = pid. F: a = rank, b = offset. R: a = node, b = line index.
  // X: a = node, b = status. S: a = rank. H: b = unix milliseconds.
  int64_t a = 0;
  int64_t b = 0;
  double time = 0;       // X: the exit time
  bool stopped = false;  // X
  bool gone = false;     // X: "gone" (no exit file, no process), not "exit"
  std::string body;      // F, R, S
};

// Encoders (the tail's side).
std::string encode_hello(int64_t pid);
std::string encode_file(int64_t rank, uint64_t offset, std::string_view lines);
std::string encode_restart(int64_t node, int64_t index, std::string_view line);
std::string encode_exit(int64_t node, int status, double time, bool stopped, bool gone);
std::string encode_stall(int64_t rank, std::string_view json);
std::string encode_heartbeat(int64_t unix_ms);
std::string encode_end();

// Incremental decoder (the follower's side): feed() any chunk, then next() returns the complete
// frames one at a time. A malformed header is an Error naming it (the stream is then useless:
// the follower drops the link and starts the tail again from the store's offsets).
class StreamParser {
 public:
  void feed(std::string_view bytes);
  // nullopt: no complete frame buffered yet.
  Result<std::optional<Frame>> next();
  size_t buffered() const { return buf_.size() - pos_; }
  void reset() {
    buf_.clear();
    pos_ = 0;
  }

 private:
  std::string buf_;
  size_t pos_ = 0;  // consumed bytes at the front of buf_ (compacted on feed)
};

// The request on the tail's stdin.
struct TailNode {
  int node = 0;
  int first_rank = 0;
  int slots = 1;
};
struct TailRequest {
  std::vector<TailNode> nodes;
  std::vector<std::pair<int, uint64_t>> offsets;  // rank, offset
};
std::string encode_request(const TailRequest& r);
// Parses a whole request (up to and including the "." line). Errors name the bad line.
Result<TailRequest> parse_request(std::string_view text);

}  // namespace meshwork::follow
