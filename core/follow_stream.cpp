#include "core/follow_stream.h"

#include <limits>

#include <charconv>
#include <cstdio>

namespace meshwork::follow {

namespace {

// A header holds at most 6 short fields; anything longer than this without '\n' cannot be one
// (it would be a desynchronised stream, e.g. a shell's error text): refuse instead of buffering
// without end.
constexpr size_t kMaxHeader = 256;

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

bool to_i64(std::string_view s, int64_t& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool to_f64(std::string_view s, double& v) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

Error bad(std::string_view line, const std::string& allowed) {
  std::string shown(line.substr(0, 80));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return Error{"follow stream", shown, allowed};
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

std::string encode_hello(int64_t pid) {
  return "V " + std::to_string(kStreamVersion) + " " + std::to_string(pid) + "\n";
}

std::string encode_file(int64_t rank, uint64_t offset, std::string_view lines) {
  std::string out = "F " + std::to_string(rank) + " " + std::to_string(offset) + " " + std::to_string(lines.size()) + "\n";
  out.append(lines);
  return out;
}

std::string encode_restart(int64_t node, int64_t index, std::string_view line) {
  std::string out = "R " + std::to_string(node) + " " + std::to_string(index) + " " + std::to_string(line.size()) + "\n";
  out.append(line);
  return out;
}

std::string encode_exit(int64_t node, int status, double time, bool stopped, bool gone) {
  return "X " + std::to_string(node) + " " + std::to_string(status) + " " + num(time) + " " + (stopped ? "1" : "0") +
         " " + (gone ? "gone" : "exit") + "\n";
}

std::string encode_stall(int64_t rank, std::string_view json) {
  std::string out = "S " + std::to_string(rank) + " " + std::to_string(json.size()) + "\n";
  out.append(json);
  return out;
}

std::string encode_heartbeat(int64_t unix_ms) { return "H " + std::to_string(unix_ms) + "\n"; }

std::string encode_end() { return "E\n"; }

void StreamParser::feed(std::string_view bytes) {
  // Drop what was consumed before growing: the buffer stays about one frame long.
  if (pos_ > 0 && (pos_ >= buf_.size() / 2 || pos_ > (1u << 20))) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

Result<std::optional<Frame>> StreamParser::next() {
  const std::string_view rest = std::string_view(buf_).substr(pos_);
  const size_t nl = rest.find('\n');
  if (nl == std::string_view::npos) {
    if (rest.size() > kMaxHeader) return bad(rest, "a frame header (V, F, R, X, S, H, E) of at most 256 bytes");
    return std::optional<Frame>();
  }
  // The same bound whether the header's newline has arrived or not: otherwise a long header
  // would be refused or read depending on how the stream was cut (a fuzz find).
  if (nl > kMaxHeader) return bad(rest.substr(0, nl), "a frame header (V, F, R, X, S, H, E) of at most 256 bytes");
  const std::string_view line = rest.substr(0, nl);
  const auto f = fields(line);
  if (f.empty() || f[0].size() != 1) return bad(line, "a frame header starting with V, F, R, X, S, H or E");
  Frame fr;
  size_t body_len = 0;
  const char k = f[0][0];
  auto need = [&](size_t n) { return f.size() == n; };
  switch (k) {
    case 'V':
      if (!need(3) || !to_i64(f[1], fr.a) || !to_i64(f[2], fr.b)) return bad(line, "V <version> <pid>");
      fr.kind = Frame::Kind::hello;
      break;
    case 'F':
    case 'R': {
      int64_t len = 0;
      if (!need(4) || !to_i64(f[1], fr.a) || !to_i64(f[2], fr.b) || !to_i64(f[3], len) || fr.a < 0 || fr.b < 0 ||
          len < 0 || len > (int64_t{1} << 31)) {
        return bad(line, k == 'F' ? "F <rank> <offset> <len>, non-negative integers"
                                  : "R <node> <index> <len>, non-negative integers");
      }
      fr.kind = k == 'F' ? Frame::Kind::file : Frame::Kind::restart;
      body_len = static_cast<size_t>(len);
      if (rest.size() < nl + 1 + body_len) return std::optional<Frame>();  // the body is still coming
      fr.body.assign(rest.substr(nl + 1, body_len));
      break;
    }
    case 'S': {
      int64_t len = 0;
      if (!need(3) || !to_i64(f[1], fr.a) || !to_i64(f[2], len) || fr.a < 0 || len < 0 || len > (int64_t{1} << 24)) {
        return bad(line, "S <rank> <len>, non-negative integers, len at most 16 MiB");
      }
      fr.kind = Frame::Kind::stall;
      body_len = static_cast<size_t>(len);
      if (rest.size() < nl + 1 + body_len) return std::optional<Frame>();
      fr.body.assign(rest.substr(nl + 1, body_len));
      break;
    }
    case 'X': {
      int64_t status = 0;
      if (!need(6) || !to_i64(f[1], fr.a) || !to_i64(f[2], status) || !to_f64(f[3], fr.time) ||
          (f[4] != "0" && f[4] != "1") || (f[5] != "exit" && f[5] != "gone")) {
        return bad(line, "X <node> <status> <time> <stopped 0|1> <exit|gone>");
      }
      fr.kind = Frame::Kind::exit;
      fr.b = status;
      fr.stopped = f[4] == "1";
      fr.gone = f[5] == "gone";
      break;
    }
    case 'H':
      if (!need(2) || !to_i64(f[1], fr.b)) return bad(line, "H <unix-ms>");
      fr.kind = Frame::Kind::heartbeat;
      break;
    case 'E':
      if (!need(1)) return bad(line, "E alone on its line");
      fr.kind = Frame::Kind::end;
      break;
    default:
      return bad(line, "a frame header starting with V, F, R, X, S, H or E");
  }
  pos_ += nl + 1 + body_len;
  return std::optional<Frame>(std::move(fr));
}

std::string encode_request(const TailRequest& r) {
  std::string out;
  for (const TailNode& n : r.nodes) {
    out += "N " + std::to_string(n.node) + " " + std::to_string(n.first_rank) + " " + std::to_string(n.slots) + "\n";
  }
  for (const auto& [rank, off] : r.offsets) out += "O " + std::to_string(rank) + " " + std::to_string(off) + "\n";
  out += ".\n";
  return out;
}

Result<TailRequest> parse_request(std::string_view text) {
  TailRequest r;
  size_t i = 0;
  while (i < text.size()) {
    size_t nl = text.find('\n', i);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(i, nl - i);
    i = nl + 1;
    if (line == ".") return r;
    const auto f = fields(line);
    int64_t a = 0, b = 0, c = 0;
    // Node and rank numbers are ints everywhere else: a larger one is refused, not truncated
    // (the tail would otherwise follow another rank's file than the one asked for).
    constexpr int64_t kMaxIndex = std::numeric_limits<int>::max();
    if (!f.empty() && f[0] == "N" && f.size() == 4 && to_i64(f[1], a) && to_i64(f[2], b) && to_i64(f[3], c) &&
        a >= 0 && a <= kMaxIndex && b >= 0 && b <= kMaxIndex - 4096 && c >= 1 && c <= 4096) {
      r.nodes.push_back({static_cast<int>(a), static_cast<int>(b), static_cast<int>(c)});
    } else if (!f.empty() && f[0] == "O" && f.size() == 3 && to_i64(f[1], a) && to_i64(f[2], b) && a >= 0 &&
               a <= kMaxIndex && b >= 0) {
      r.offsets.emplace_back(static_cast<int>(a), static_cast<uint64_t>(b));
    } else {
      return Error{"tail request", std::string(line.substr(0, 80)),
                   "N <node> <first-rank> <slots 1..4096>, O <rank> <offset> or \".\""};
    }
  }
  return Error{"tail request", "(end of input)", "must end with a \".\" line"};
}

}  // namespace meshwork::follow
