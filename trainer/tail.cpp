#include "trainer/tail.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "core/flight_layout.h"
#include "core/flight_record.h"
#include "core/follow_stream.h"

namespace meshwork::trainer {

namespace {

struct TailOptions {
  std::string dir = ".";
  int poll_ms = 250;
  int heartbeat_ms = 2000;
  bool liveness = true;
  bool restarts = false;
  size_t chunk_bytes = 4u << 20;
  int stall_ms = 3000;
};

// What the tail last saw of a rank's flight record (S frames: changes only).
struct FlightWatch {
  uint64_t generation = 0;
  bool seen = false;
  std::chrono::steady_clock::time_point changed;
  bool stalled = false;         // an S frame with "stalled":true was sent last
  std::string process;          // the process state that frame carried
};

struct RankFile {
  int rank = 0;
  size_t node = 0;  // index into Tail::nodes_
  uint64_t offset = 0;
  int fd = -1;
  FlightWatch flight;
};

struct NodeState {
  follow::TailNode spec;
  bool ended = false;
  int64_t restarts_sent = 0;
};

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A process's state as /proc/<pid>/stat tells it: running (R, S, D, I: on a CPU or waiting in
// the kernel), stopped (T, t: a signal or a debugger), zombie (Z, X), or gone (no such process).
uint32_t this_host_hash() {
  static const uint32_t hash = [] {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return flight_host_hash(name);
  }();
  return hash;
}

// The rank's process as this host's /proc shows it: "unknown" when the record says it runs on
// another host (its pid here would be some other process, or none).
std::string process_state(const FlightState& s) {
  if (s.host_hash != 0 && s.host_hash != this_host_hash()) return "unknown";
  const int64_t pid = s.pid;
  if (pid <= 0) return "gone";
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!in || !std::getline(in, stat)) return "gone";
  const size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= stat.size()) return "gone";
  switch (stat[paren + 2]) {
    case 'T':
    case 't': return "stopped";
    case 'Z':
    case 'X': return "zombie";
    default: return "running";
  }
}

// Whole-file read of a small file; nullopt when it does not exist.
bool read_small(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

int64_t pid_in(const std::string& path) {
  std::string text;
  if (!read_small(path, text)) return -1;
  int64_t v = 0;
  bool any = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      v = v * 10 + (c - '0');
      any = true;
      if (v > (int64_t{1} << 31)) return -1;
    }
  }
  return any ? v : -1;
}

class Tail {
 public:
  Tail(TailOptions o, follow::TailRequest req) : o_(std::move(o)) {
    for (const auto& n : req.nodes) nodes_.push_back({n});
    std::unordered_map<int, size_t> by_rank;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      for (int k = 0; k < nodes_[i].spec.slots; ++k) {
        by_rank[nodes_[i].spec.first_rank + k] = files_.size();
        files_.push_back({nodes_[i].spec.first_rank + k, i, 0, -1});
      }
    }
    for (const auto& [rank, off] : req.offsets) {
      if (auto it = by_rank.find(rank); it != by_rank.end()) files_[it->second].offset = off;
    }
    // One tail on a Slurm login node serves every rank of the job (8,192 files at 1,024 x 8),
    // past the usual soft limit of 1,024 descriptors: raise it to the hard limit, keep that many
    // files open (less a reserve for the rest of the process) and read the others by path.
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) == 0) {
      if (lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &lim);
        ::getrlimit(RLIMIT_NOFILE, &lim);
      }
      const rlim_t reserve = 64;
      held_max_ = static_cast<size_t>(lim.rlim_cur > 2 * reserve ? lim.rlim_cur - reserve : lim.rlim_cur / 2);
    }
  }
  ~Tail() {
    for (auto& f : files_) {
      if (f.fd >= 0) ::close(f.fd);
    }
  }

  int run() {
    out_ += follow::encode_hello(getpid());
    if (!flush()) return 1;
    auto next_check = std::chrono::steady_clock::now();  // liveness and restarts: every heartbeat
    auto next_heartbeat = next_check;
    while (true) {
      bool progressed = false;
      for (auto& f : files_) {
        if (!nodes_[f.node].ended && drain(f)) progressed = true;
      }
      const auto now = std::chrono::steady_clock::now();
      for (auto& f : files_) {
        if (!nodes_[f.node].ended) watch_flight(f, now);
      }
      const bool check = now >= next_check;
      if (check) next_check = now + std::chrono::milliseconds(o_.heartbeat_ms);
      for (size_t i = 0; i < nodes_.size(); ++i) {
        if (!nodes_[i].ended) check_exit(i, check);
        if (check && o_.restarts) report_restarts(i);
      }
      if (now >= next_heartbeat) {
        out_ += follow::encode_heartbeat(unix_ms());
        next_heartbeat = now + std::chrono::milliseconds(o_.heartbeat_ms);
      }
      bool all_ended = true;
      for (const auto& n : nodes_) all_ended = all_ended && n.ended;
      if (all_ended) out_ += follow::encode_end();
      if (!flush()) return 1;
      if (all_ended) return 0;
      if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(o_.poll_ms));
    }
  }

 private:
  std::string path(const std::string& name) const { return o_.dir + "/" + name; }
  std::string node_path(size_t i, const char* suffix) const {
    return path("node" + std::to_string(nodes_[i].spec.node) + suffix);
  }

  // Appends an F frame with the complete lines past f.offset (at most chunk_bytes). Returns
  // whether it read anything.
  bool drain(RankFile& f) {
    struct stat st {};
    int fd = f.fd;
    // The path is built only for a file not held open (this runs per file per poll).
    const std::string file = fd < 0 ? path("metrics-rank" + std::to_string(f.rank) + ".jsonl") : std::string();
    if (fd < 0 && held_ < held_max_) {
      fd = f.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) held_max_ = held_;  // read the rest by path
        return false;  // else the rank has not created its file yet
      }
      ++held_;
    }
    if (fd >= 0) {
      if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) <= f.offset) return false;
    } else {
      // Past the descriptor limit: look at the size by path, open only to read.
      if (::stat(file.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) <= f.offset) return false;
      fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return false;
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(st.st_size - f.offset, o_.chunk_bytes));
    buf_.resize(want);
    const ssize_t n = ::pread(fd, buf_.data(), want, static_cast<off_t>(f.offset));
    if (fd != f.fd) ::close(fd);
    if (n <= 0) return false;
    const std::string_view got(buf_.data(), static_cast<size_t>(n));
    const size_t nl = got.rfind('\n');
    if (nl == std::string_view::npos) return false;  // only a partial line so far
    out_ += follow::encode_file(f.rank, f.offset, got.substr(0, nl + 1));
    f.offset += nl + 1;
    return true;
  }

  // The rank's flight record (core/flight_record.h): an S frame when its generation has not
  // moved for --stall-ms, again when its process state changes, and once with "stalled":false
  // when it moves again. A rank without a record (not started, or an older meshtrain) sends
  // none; one that ended its run is not stalled.
  void watch_flight(RankFile& f, std::chrono::steady_clock::time_point now) {
    auto state = read_flight_file(path(flight_file(f.rank)));
    if (!state.ok()) return;
    FlightWatch& w = f.flight;
    if (!w.seen || state->generation != w.generation) {
      const bool was_stalled = w.stalled;
      w.seen = true;
      w.generation = state->generation;
      w.changed = now;
      w.stalled = false;
      if (was_stalled) stall_frame(f.rank, false, process_state(*state), *state);
      return;
    }
    if (state->phase == FlightPhase::ended) return;
    if (now - w.changed < std::chrono::milliseconds(o_.stall_ms)) return;
    const std::string process = process_state(*state);
    if (w.stalled && process == w.process) return;
    w.stalled = true;
    w.process = process;
    stall_frame(f.rank, true, process, *state);
  }

  void stall_frame(int rank, bool stalled, const std::string& process, const FlightState& state) {
    const nlohmann::json body = {{"stalled", stalled}, {"process", process}, {"flight", to_json(state)}};
    out_ += follow::encode_stall(rank, body.dump());
  }

  // node<i>.exit, or (liveness, at a check) no live process: the node ended. Its files are
  // read to their end first, so its X frame follows all of its lines.
  void check_exit(size_t i, bool check) {
    int status = 0;
    double time = 0;
    bool gone = false;
    if (!read_exit(i, status, time)) {
      if (!check || !o_.liveness || alive(i)) return;
      if (!read_exit(i, status, time)) {  // it may have been written just now
        status = 128 + 9;
        time = static_cast<double>(unix_ms()) / 1000.0;
        gone = true;
      }
    }
    for (auto& f : files_) {
      if (f.node != i) continue;
      while (drain(f)) {
        if (out_.size() > (8u << 20) && !flush()) return;
      }
    }
    struct stat st {};
    const bool stopped = ::stat(node_path(i, ".stop").c_str(), &st) == 0;
    out_ += follow::encode_exit(nodes_[i].spec.node, status, time, stopped, gone);
    nodes_[i].ended = true;
  }

  // "<status> <unix time>" (launch.h's wrapper); false while absent or half written.
  bool read_exit(size_t i, int& status, double& time) {
    std::string text;
    if (!read_small(node_path(i, ".exit"), text)) return false;
    std::istringstream in(text);
    long long s = 0;
    if (!(in >> s)) return false;
    status = static_cast<int>(s);
    if (!(in >> time)) time = 0;
    return true;
  }

  // The node's supervisor group or any rank pid it recorded still runs (the same rule as the
  // workbench's node_alive, remote/launch.cpp: a pid counts only while /proc says it runs
  // meshtrain or something from this run directory, so a reused pid never keeps a node alive).
  bool alive(size_t i) {
    const auto& n = nodes_[i].spec;
    const int64_t pg = pid_in(node_path(i, ".pgid"));
    if (pg > 0 && (::kill(static_cast<pid_t>(-pg), 0) == 0 || errno == EPERM)) return true;
    std::vector<std::string> files = {"supervisor-node" + std::to_string(n.node) + ".pid"};
    for (int r = n.first_rank; r < n.first_rank + n.slots; ++r) files.push_back("rank" + std::to_string(r) + ".pid");
    char cwd[4096] = {};
    const std::string here = ::getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string();
    for (const auto& name : files) {
      const int64_t p = pid_in(path(name));
      if (p <= 0 || ::kill(static_cast<pid_t>(p), 0) != 0) continue;
      std::string cmdline;
      if (!read_small("/proc/" + std::to_string(p) + "/cmdline", cmdline)) continue;
      if (cmdline.find("meshtrain") != std::string::npos || (!here.empty() && cmdline.find(here) != std::string::npos))
        return true;
    }
    return false;
  }

  void report_restarts(size_t i) {
    std::string text;
    if (!read_small(node_path(i, ".restarts"), text)) return;
    int64_t index = 0;
    size_t start = 0;
    for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1, ++index) {
      if (index >= nodes_[i].restarts_sent) {
        out_ += follow::encode_restart(nodes_[i].spec.node, index, std::string_view(text).substr(start, nl - start));
        nodes_[i].restarts_sent = index + 1;
      }
    }
  }

  // Writes what is queued. False when stdout is gone (the workbench closed the channel).
  bool flush() {
    size_t done = 0;
    while (done < out_.size()) {
      const ssize_t w = ::write(STDOUT_FILENO, out_.data() + done, out_.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      done += static_cast<size_t>(w);
    }
    out_.clear();
    return true;
  }

  TailOptions o_;
  std::vector<NodeState> nodes_;
  std::vector<RankFile> files_;
  size_t held_ = 0;             // files kept open
  size_t held_max_ = 960;       // at most this many (from RLIMIT_NOFILE)
  std::string out_;
  std::vector<char> buf_;
};

bool parse_int(const std::string& s, long long lo, long long hi, long long& v) {
  try {
    size_t used = 0;
    v = std::stoll(s, &used);
    return used == s.size() && v >= lo && v <= hi;
  } catch (...) {
    return false;
  }
}

}  // namespace

int tail_main(const std::vector<std::string>& args) {
  TailOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](long long lo, long long hi, long long& v) {
      if (i + 1 >= args.size() || !parse_int(args[i + 1], lo, hi, v)) {
        std::cerr << "meshtrain: tail " << a << ": " << (i + 1 < args.size() ? args[i + 1] : "(missing)")
                  << ": must be an integer in [" << lo << ", " << hi << "]\n";
        return false;
      }
      ++i;
      return true;
    };
    long long v = 0;
    if (a == "--dir" && i + 1 < args.size()) {
      o.dir = args[++i];
    } else if (a == "--poll-ms") {
      if (!value(1, 60000, v)) return 2;
      o.poll_ms = static_cast<int>(v);
    } else if (a == "--heartbeat-ms") {
      if (!value(10, 600000, v)) return 2;
      o.heartbeat_ms = static_cast<int>(v);
    } else if (a == "--chunk-bytes") {
      if (!value(4096, 1ll << 30, v)) return 2;
      o.chunk_bytes = static_cast<size_t>(v);
    } else if (a == "--stall-ms") {
      if (!value(100, 3600000, v)) return 2;
      o.stall_ms = static_cast<int>(v);
    } else if (a == "--no-liveness") {
      o.liveness = false;
    } else if (a == "--restarts") {
      o.restarts = true;
    } else {
      std::cerr << "meshtrain: tail: " << a
                << ": unknown; allowed: --dir DIR, --poll-ms N, --heartbeat-ms N, --chunk-bytes N, "
                   "--stall-ms N, --no-liveness, --restarts\n";
      return 2;
    }
  }
  // The request: everything up to the "." line on stdin.
  std::string request, line;
  while (std::getline(std::cin, line)) {
    request += line + "\n";
    if (line == ".") break;
  }
  auto req = follow::parse_request(request);
  if (!req) {
    std::cerr << "meshtrain: " << req.error().message() << "\n";
    return 2;
  }
  // A closed stdout must end the tail (the workbench went away), whatever sshd left us.
  ::signal(SIGPIPE, SIG_DFL);
  return Tail(o, *req).run();
}

}  // namespace meshwork::trainer
