#include "trainer/supervisor.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "core/exit_record.h"
#include "core/metrics.h"
#include "trainer/store.h"

namespace meshwork::trainer {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal.store(sig); }

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;      // waitpid status once exited
  double ended = 0;    // unix seconds, when it was reaped
};

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return std::string("killed by signal ") + sigabbrev_np(sig) + " (" + std::to_string(sig) + ")";
  }
  return "ended (status " + std::to_string(status) + ")";
}

double now_unix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool has_end_record(const fs::path& metrics_file) {
  std::ifstream in(metrics_file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last.find("\"type\":\"end\"") != std::string::npos;
}

// The last `bytes` of a file (a rank's metrics file grows by a line per step: only its end
// tells what the rank did last).
std::string file_tail(const fs::path& path, std::streamoff bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff from = size > bytes ? size - bytes : 0;
  in.seekg(from);
  std::string s(static_cast<size_t>(size - from), '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

void append_line(const fs::path& path, const std::string& line) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) return;
  std::string l = line + "\n";
  (void)!::write(fd, l.data(), l.size());
  ::close(fd);
}

class Supervisor {
 public:
  Supervisor(const TrainerOptions& o, const MeshShape& shape)
      : o_(o), shape_(shape), n_(o.nproc_per_node), node_(o.node_rank),
        log_(fs::path(o.run_dir) / ("supervisor-node" + std::to_string(o.node_rank) + ".log"),
             std::ios::app) {}

  int run() {
    {
      std::ofstream pid(fs::path(o_.run_dir) / ("supervisor-node" + std::to_string(node_) + ".pid"));
      pid << getpid() << "\n";
    }
    // A record an earlier attempt left (--max-restarts starts the supervisor again in the same
    // directory) must never describe this one.
    std::error_code ec;
    fs::remove(record_path(), ec);
    try {
      store_ = std::make_unique<StoreHandle>(o_.master_addr, o_.master_port, node_ == 0,
                                             std::chrono::minutes(5));
    } catch (const std::exception& e) {
      const std::string why = "--master-addr: " + o_.master_addr + ":" + std::to_string(o_.master_port) +
                              ": a reachable TCPStore (" + first_line(e.what()) + ")";
      std::cerr << "meshtrain: " << why << "\n";
      ExitRecord rec = record(ExitOutcome::start_failed, 1);
      rec.reason = why;
      write_record(rec);
      return 1;
    }
    say("node ", node_, ": starting ", n_, " ranks, mesh ", shape_.to_string());
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    for (int i = 0; i < n_; ++i) {
      if (!spawn(i)) {
        ExitRecord rec = record(ExitOutcome::start_failed, 3);
        rec.reason = "rank " + std::to_string(node_ * n_ + i) + " on node " + std::to_string(node_) +
                     ": could not be started";
        return end_run(rec, -1, /*publish=*/true);
      }
    }
    auto last_poll = Clock::now();
    while (true) {
      // Reap local ranks.
      int status = 0;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (auto& c : children_) {
          if (c.pid != pid) continue;
          c.running = false;
          c.status = status;
          c.ended = now_unix();
          if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            const Child& culprit = first_cause(c);
            ExitRecord rec = own_failure(culprit);
            // A rank that merely exited with an error, or died of SIGPIPE writing to a socket
            // whose other end went away, may have lost a peer on another node: give that
            // node's supervisor a second to say so, and report the root cause (seen: rank 3
            // SIGKILLed on node 1 reported as "rank 1 on node 0: killed by signal PIPE").
            if (!killed_outright(culprit.status))
              if (auto remote = remote_failure(std::chrono::seconds(1))) rec = relayed(*remote);
            return end_run(rec, culprit.rank, /*publish=*/true);
          }
          say("rank ", c.rank, " finished");
        }
      }
      if (std::none_of(children_.begin(), children_.end(), [](const Child& c) { return c.running; }))
        return finish();
      if (int sig = g_signal.load()) return end_run(stopped_by(sig), -1, /*publish=*/true);
      if (Clock::now() - last_poll > std::chrono::milliseconds(200)) {
        last_poll = Clock::now();
        std::optional<ExitRecord> ended;
        try {
          if (auto failed = store_->try_get("meshwork/failed")) ended = relayed(*failed);
        } catch (const std::exception& e) {
          ended = record(ExitOutcome::store_lost, 3);
          ended->reason = "lost the run's store on " + o_.master_addr + ":" + std::to_string(o_.master_port);
        }
        if (ended) {
          say("another node reports: ", ended->reason);
          return end_run(*ended, -1, /*publish=*/false);
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  template <class... A>
  void say(const A&... parts) {
    ((log_ << parts), ...);
    log_ << "\n";
    log_.flush();
  }
  static std::string first_line(std::string s) {
    if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
    return s;
  }

  bool spawn(int local) {
    const int rank = node_ * n_ + local;
    const int world = o_.nnodes * n_;
    const int threads = std::max(1, usable_cores() / n_);
    std::vector<std::string> args = {"meshtrain"};
    for (auto& a : to_args(o_)) args.push_back(a);
    const fs::path log = fs::path(o_.run_dir) / ("rank" + std::to_string(rank) + ".log");
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the supervisor
      if (getppid() == 1) _exit(1);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(local).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n_).c_str(), 1);
      setenv("MASTER_ADDR", o_.master_addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(o_.master_port).c_str(), 1);
      setenv("MESHWORK_STORE_HOSTED", "1", 1);
      setenv("MESHWORK_SUPERVISED", "1", 1);
      setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
      setenv("MKL_NUM_THREADS", std::to_string(threads).c_str(), 1);
      if (o_.run.training.device == DeviceKind::cuda)
        setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        // Global rank 0 keeps the supervisor's stdout: metrics go there without --metrics.
        if (rank != 0 || !o_.metrics.empty()) dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        ::close(fd);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      _exit(127);
    }
    children_.push_back({rank, pid, true, 0});
    say("rank ", rank, " pid ", pid, " (", threads, " threads)");
    return true;
  }

  // When one rank dies its peers fail right after (their Gloo connections break). Collect what
  // ends within 250 ms and blame the likeliest cause: a rank killed by a signal, else the first.
  const Child& first_cause(const Child& first) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    int status;
    for (auto& c : children_)
      if (c.running && waitpid(c.pid, &status, WNOHANG) == c.pid) {
        c.running = false;
        c.status = status;
        c.ended = now_unix();
      }
    if (killed_outright(first.status)) return first;
    for (const auto& c : children_)
      if (!c.running && killed_outright(c.status)) return c;
    return first;
  }

  // Killed by a signal of its own (SIGKILL, SIGSEGV, ...), not by SIGPIPE: a rank writing to a
  // socket whose peer died gets SIGPIPE, a consequence of another rank's failure.
  static bool killed_outright(int status) { return WIFSIGNALED(status) && WTERMSIG(status) != SIGPIPE; }

  std::optional<std::string> remote_failure(std::chrono::milliseconds wait) {
    const auto deadline = Clock::now() + wait;
    do {
      try {
        if (auto f = store_->try_get("meshwork/failed")) return f;
      } catch (...) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (Clock::now() < deadline && o_.nnodes > 1);
    return std::nullopt;
  }

  // The other supervisors read this node's record from the store (relayed() below).
  void publish_failure(const ExitRecord& rec) {
    try {
      if (!store_->try_get("meshwork/failed")) store_->set("meshwork/failed", to_json(rec).dump());
    } catch (...) {
    }
  }

  fs::path record_path() const { return fs::path(o_.run_dir) / exit_record_file(node_); }

  ExitRecord record(ExitOutcome outcome, int exit_code) const {
    ExitRecord r;
    r.node = node_;
    r.host = host_name();
    r.outcome = outcome;
    r.exit_code = exit_code;
    r.time = now_unix();
    return r;
  }

  // One of this node's ranks ended badly: which, how, when, and its last step as its metrics
  // file shows it.
  ExitRecord own_failure(const Child& c) const {
    ExitRecord r = record(ExitOutcome::rank_failed, 3);
    RankFailure f;
    f.rank = c.rank;
    f.node = node_;
    if (WIFSIGNALED(c.status)) {
      f.signal = WTERMSIG(c.status);
    } else {
      f.exit_code = WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 255;
    }
    f.time = c.ended;
    const fs::path mf = fs::path(o_.run_dir) / ("metrics-rank" + std::to_string(c.rank) + ".jsonl");
    const std::string tail = file_tail(mf, 64 << 10);
    f.progress = rank_progress(tail);
    f.reason = failed_end_reason(tail);  // e.g. its watchdog's finding
    r.failure = f;
    r.reason = "rank " + std::to_string(c.rank) + " on node " + std::to_string(node_) + ": " + describe(c.status);
    if (!f.reason.empty()) r.reason += ": " + f.reason;
    return r;
  }

  // What another node published: its failure becomes this node's record too.
  ExitRecord relayed(const std::string& published) const {
    ExitRecord r = record(ExitOutcome::peer_failed, 3);
    auto peer = parse_exit_record(published);
    if (!peer) {
      r.reason = published;
      return r;
    }
    if (peer->outcome == ExitOutcome::stopped) r.outcome = ExitOutcome::stopped;
    r.reason = peer->reason;
    r.failure = peer->failure;
    return r;
  }

  ExitRecord stopped_by(int sig) const {
    ExitRecord r = record(ExitOutcome::stopped, 3);
    r.reason = "stopped: node " + std::to_string(node_) + ": supervisor received signal " + sigabbrev_np(sig);
    return r;
  }

  // Written before anything that may take a while (stopping the ranks), so a supervisor killed
  // meanwhile still leaves it; a temporary file renamed into place, so a reader sees all or none.
  void write_record(const ExitRecord& rec) {
    const fs::path path = record_path();
    const fs::path tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << to_json(rec).dump() << "\n";
      if (!out.flush()) {
        say("could not write ", tmp.string());
        return;
      }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) say("could not rename ", tmp.string(), ": ", ec.message());
  }

  // The run ends on this node: record why, tell the others (unless they told us), stop the
  // local ranks and say why on stderr.
  int end_run(const ExitRecord& rec, int failed_rank, bool publish) {
    say(rec.reason);
    write_record(rec);
    if (publish) publish_failure(rec);
    stop_local(rec.reason, failed_rank);
    std::cerr << "meshtrain: " << rec.reason << "\n";
    return rec.exit_code;
  }

  // SIGTERM every live local rank, SIGKILL after 2 s; then give every rank that ended without
  // an end record one (failed for `failed_rank`, stopped for the others).
  void stop_local(const std::string& why, int failed_rank) {
    for (auto& c : children_)
      if (c.running) kill(c.pid, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    auto reap = [&] {
      int status;
      for (auto& c : children_)
        if (c.running && waitpid(c.pid, &status, WNOHANG) == c.pid) {
          c.running = false;
          c.status = status;
        }
    };
    while (Clock::now() < deadline &&
           std::any_of(children_.begin(), children_.end(), [](const Child& c) { return c.running; })) {
      reap();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (auto& c : children_)
      if (c.running) {
        kill(c.pid, SIGKILL);
        int status;
        waitpid(c.pid, &status, 0);
        c.running = false;
        c.status = status;
      }
    for (auto& c : children_) {
      const fs::path mf = fs::path(o_.run_dir) / ("metrics-rank" + std::to_string(c.rank) + ".jsonl");
      if (has_end_record(mf)) continue;
      EndRecord e;
      e.rank = c.rank;
      e.time = now_unix();
      e.status = c.rank == failed_rank ? "failed" : "stopped";
      e.reason = c.rank == failed_rank ? why : "stopped by the supervisor: " + why;
      append_line(mf, to_json_line(e));
      if (!o_.metrics.empty()) append_line(o_.metrics, to_json_line(e));
    }
    say("stopped local ranks: ", why);
  }

  int finish() {
    try {
      store_->set("meshwork/done/" + std::to_string(node_), "1");
      if (node_ == 0) {
        // Keep the store up until every node has finished (or one failed).
        while (true) {
          int done = 0;
          for (int n = 0; n < o_.nnodes; ++n)
            if (store_->try_get("meshwork/done/" + std::to_string(n))) ++done;
          if (done == o_.nnodes) break;
          if (auto f = store_->try_get("meshwork/failed")) {
            const ExitRecord rec = relayed(*f);
            write_record(rec);
            std::cerr << "meshtrain: " << rec.reason << "\n";
            return 3;
          }
          if (int sig = g_signal.load()) {
            write_record(stopped_by(sig));
            return 3;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      }
    } catch (const std::exception& e) {
      say("store: ", first_line(e.what()));
    }
    say("node ", node_, ": all ranks finished");
    write_record(record(ExitOutcome::ok, 0));
    return 0;
  }

  const TrainerOptions& o_;
  MeshShape shape_;
  int n_;
  int node_;
  std::ofstream log_;
  std::unique_ptr<StoreHandle> store_;
  std::vector<Child> children_;
};

}  // namespace

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int supervise(const TrainerOptions& options, const MeshShape& shape) {
  std::error_code ec;
  fs::create_directories(options.run_dir, ec);
  if (ec) {
    std::cerr << "meshtrain: --run-dir: " << options.run_dir << ": a directory that can be created\n";
    return 2;
  }
  Supervisor s(options, shape);
  return s.run();
}

}  // namespace meshwork::trainer
