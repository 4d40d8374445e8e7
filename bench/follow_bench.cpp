// bench/scale_follow.sh's driver: the workbench's cost of following N nodes x 8 ranks at one step
// a second, by the per-file SFTP path and by the follow stream (`meshtrain tail`), side by side.
//
// Simulated nodes: node i is the namespace cluster's sshd i % 2 with a run directory of its own
// (so each is its own stream, as on separate machines). A generator process (forked, its own
// process group, whose pid is every node's node<i>.pgid so both paths see the node alive) appends
// one step line per rank per second, stamped with the wall time it wrote it. The follower runs in
// this process; the generator's CPU is not ours (RUSAGE_SELF counts this process only).
//
// Measured in a window after a warm-up (connections, first backfill):
//   cpu_process: this process's CPU (user + system) / window, in cores (includes the store writer)
//   cpu_follower: the follower's own threads ("mw-files" per node / "mw-stream" workers)
//   lag: now - "time" of the oldest line of each committed chunk (line written -> in the store)
//   backlog: bytes written but not yet stored at the window's end (falling behind shows here)
//
// A third mode, "shared", is the Slurm path at full size: every node's ranks write into ONE run
// directory on one host (a shared filesystem seen from the login node), so one `meshtrain tail`
// serves all N x 8 files over one stream -- 1,024 nodes x 8 = 8,192 ranks are simulated for real.
//
// Usage: follow_bench CLUSTER_DIR MESHTRAIN WORK_DIR OUT_JSON NODES(2,8,32) SECONDS WARMUP [MODES]
//   MODES: comma-separated of files, stream, shared (default files,stream)
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/measure.h"
#include "core/store/run_store.h"
#include "remote/follower.h"
#include "remote/launch.h"
#include "remote/run_control.h"
#include "remote/run_layout.h"

using namespace meshwork;
using namespace meshwork::remote;
namespace fs = std::filesystem;

namespace {

constexpr int kRanksPerNode = 8;

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// CPU seconds of this process's threads named mw-files / mw-stream (follower.cpp names them).
double follower_threads_cpu() {
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double sum = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/task")) {
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = stat.substr(open + 1, close - open - 1);
    if (comm != "mw-files" && comm != "mw-stream") continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string f;
    std::vector<std::string> fields;
    while (rest >> f) fields.push_back(f);
    // After "(comm) ": state is field 3 of stat(5), utime 14, stime 15 -> indices 11, 12 here.
    if (fields.size() > 12) sum += (std::stod(fields[11]) + std::stod(fields[12])) / tick;
  }
  return sum;
}

// The generator: one step line per rank per second for every node, until killed.
[[noreturn]] void generate(const std::vector<fs::path>& dirs) {
  rlimit lim{};  // 8,192 files open at once in the shared mode
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  std::vector<int> fds;
  for (size_t n = 0; n < dirs.size(); ++n) {
    for (int k = 0; k < kRanksPerNode; ++k) {
      const int rank = static_cast<int>(n) * kRanksPerNode + k;
      fds.push_back(::open((dirs[n] / metrics_file(rank)).c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644));
      if (fds.back() < 0) _exit(3);
    }
  }
  auto next = std::chrono::steady_clock::now();
  for (int64_t step = 0;; ++step) {
    const double t = wall_now();
    for (size_t i = 0; i < fds.size(); ++i) {
      char line[256];
      const int len = std::snprintf(line, sizeof line,
                                    "{\"v\":1,\"type\":\"step\",\"step\":%lld,\"rank\":%zu,\"time\":%.6f,\"loss\":%.4f,"
                                    "\"step_s\":1.0}\n",
                                    static_cast<long long>(step), i, t, 10.0 / (1 + step));
      if (::write(fds[i], line, static_cast<size_t>(len)) != len) _exit(1);
    }
    next += std::chrono::seconds(1);
    std::this_thread::sleep_until(next);
  }
}

struct Measure {
  std::string mode;
  int nodes = 0;
  double seconds = 0;
  double cpu_process = 0;   // cores
  double cpu_follower = 0;  // cores
  double lag_p50 = 0, lag_p95 = 0, lag_max = 0;
  int64_t chunks = 0;
  int64_t backlog_bytes = 0;
  int64_t reconnects = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

Measure measure(const fs::path& cluster, const std::string& meshtrain, const fs::path& work, int nodes,
                const std::string& mode_name, double seconds, double warmup) {
  Measure m;
  const bool shared = mode_name == "shared";
  const FollowTransport mode = mode_name == "files" ? FollowTransport::files : FollowTransport::stream;
  m.mode = mode_name;
  m.nodes = nodes;
  m.seconds = seconds;
  const fs::path dir = work / (m.mode + "-" + std::to_string(nodes));
  fs::remove_all(dir);
  LaunchRecord rec;
  std::vector<fs::path> dirs;
  for (int i = 0; i < nodes; ++i) {
    dirs.push_back(shared ? dir / "shared" : dir / ("n" + std::to_string(i)));
    if (!fs::exists(dirs.back() / "meshtrain")) {
      fs::create_directories(dirs.back());
      fs::create_symlink(meshtrain, dirs.back() / "meshtrain");
    }
    rec.nodes.push_back({shared ? std::string("node0") : "node" + std::to_string(i % 2), kRanksPerNode,
                         dirs.back().string(), ""});
  }
  const fs::path db = dir / "runs.db";
  store::RunId run = 0;
  {
    auto s = store::RunStore::open(db);
    if (!s) throw std::runtime_error(s.error().message());
    auto id = (*s)->create_run("bench " + m.mode, nlohmann::json::object(), nlohmann::json{{"launch", to_json(rec)}});
    if (!id) throw std::runtime_error(id.error().message());
    run = *id;
  }
  const pid_t gen = fork();
  if (gen == 0) {
    setpgid(0, 0);
    generate(dirs);
  }
  setpgid(gen, gen);
  for (int i = 0; i < nodes; ++i) std::ofstream(dirs[i] / node_file(i, ".pgid")) << gen << "\n";

  SshOptions ssh;
  ssh.ssh_config = (cluster / "ssh_config").string();
  ssh.known_hosts = (dir / "known_hosts").string();
  ssh.identity = (cluster / "id_ed25519").string();
  ssh.on_unknown_host_key = [](const std::string&, const std::string&) { return true; };
  std::mutex mu;
  std::vector<double> lags;
  std::atomic<bool> window{false};
  int64_t chunks = 0;
  FollowOptions o;
  o.transport = mode;
  o.on_committed = [&](const std::string&, const std::string& line) {
    if (!window) return;
    const auto at = line.find("\"time\":");
    if (at == std::string::npos) return;
    const double lag = wall_now() - std::strtod(line.c_str() + at + 7, nullptr);
    std::lock_guard lock(mu);
    lags.push_back(lag);
    ++chunks;
  };
  RunFollower follower(db, run, rec, make_connector(rec, ssh), o);
  Result<FollowOutcome> outcome = Error{"bench", "", "not run"};
  std::thread t([&] { outcome = follower.run(); });
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  const double p0 = bench::process_cpu_seconds(), f0 = follower_threads_cpu();
  const auto w0 = std::chrono::steady_clock::now();
  window = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  window = false;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  m.cpu_process = (bench::process_cpu_seconds() - p0) / elapsed;
  m.cpu_follower = (follower_threads_cpu() - f0) / elapsed;
  {
    // What was written but is not in the store yet.
    auto s = store::RunStore::open(db);
    auto sources = (*s)->sources(run);
    int64_t stored = 0, written = 0;
    if (sources) {
      for (const auto& src : *sources) stored += static_cast<int64_t>(src.offset);
    }
    for (int i = 0; i < nodes; ++i) {
      for (int k = 0; k < kRanksPerNode; ++k) {
        std::error_code ec;
        const auto size = fs::file_size(dirs[i] / metrics_file(i * kRanksPerNode + k), ec);
        if (!ec) written += static_cast<int64_t>(size);
      }
    }
    m.backlog_bytes = written - stored;
  }
  follower.detach();
  t.join();
  ::kill(gen, SIGKILL);
  waitpid(gen, nullptr, 0);
  if (outcome) m.reconnects = outcome->reconnects;
  std::lock_guard lock(mu);
  m.lag_p50 = percentile(lags, 0.5);
  m.lag_p95 = percentile(lags, 0.95);
  m.lag_max = lags.empty() ? -1 : *std::max_element(lags.begin(), lags.end());
  m.chunks = chunks;
  fs::remove_all(dir);
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8 && argc != 9) {
    std::cerr << "usage: follow_bench CLUSTER_DIR MESHTRAIN WORK_DIR OUT_JSON NODES(2,8,32) SECONDS WARMUP [MODES]\n";
    return 2;
  }
  const fs::path cluster = argv[1], work = argv[3], out = argv[4];
  const std::string meshtrain = argv[2];
  std::vector<int> counts;
  std::stringstream list(argv[5]);
  for (std::string c; std::getline(list, c, ',');) counts.push_back(std::stoi(c));
  const double seconds = std::stod(argv[6]), warmup = std::stod(argv[7]);
  std::vector<std::string> modes;
  std::stringstream mode_list(argc > 8 ? argv[8] : "files,stream");
  for (std::string m; std::getline(mode_list, m, ',');) {
    if (m != "files" && m != "stream" && m != "shared") {
      std::cerr << "follow_bench: MODES: " << m << ": one of files, stream, shared\n";
      return 2;
    }
    modes.push_back(m);
  }
  std::vector<Measure> all;
  for (int n : counts) {
    for (const std::string& mode : modes) {
      all.push_back(measure(cluster, meshtrain, work, n, mode, seconds, warmup));
      const Measure& m = all.back();
      std::fprintf(stderr, "  measured %s x %d nodes: %.3f cores, lag p95 %.2f s\n", m.mode.c_str(), n,
                   m.cpu_follower, m.lag_p95);
    }
  }
  nlohmann::json j;
  j["ranks_per_node"] = kRanksPerNode;
  j["steps_per_s"] = 1;
  j["window_s"] = seconds;
  j["warmup_s"] = warmup;
  for (const Measure& m : all) {
    j["measured"].push_back({{"mode", m.mode}, {"nodes", m.nodes}, {"cpu_process_cores", m.cpu_process},
                             {"cpu_follower_cores", m.cpu_follower},
                             {"cpu_follower_ms_per_node_s", 1000 * m.cpu_follower / m.nodes},
                             {"lag_p50_s", m.lag_p50}, {"lag_p95_s", m.lag_p95}, {"lag_max_s", m.lag_max},
                             {"chunks", m.chunks}, {"backlog_bytes", m.backlog_bytes},
                             {"reconnects", m.reconnects}});
  }
  std::ofstream(out) << j.dump(2) << "\n";
  return 0;
}
