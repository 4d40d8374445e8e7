// Following a run: every rank's metrics file is read over SSH (SFTP, from a byte offset) into the
// run store, exactly once. The offsets live in the store, advanced in the same transaction as the
// points (core/store), so after a lost link, a killed workbench or a `meshwork attach` from
// another process, following resumes where the store says: no point lost, none duplicated.
//
// Transport: one `meshtrain tail` per node (trainer/tail.h) streams the new lines of
// all of its ranks' files, its exit and a heartbeat over ONE SSH exec channel (the follow stream,
// core/follow_stream.h); a few worker threads serve every node's stream from non-blocking reads
// (node_stream.cpp). Nodes that share a host and run directory (a Slurm run: every entry names
// the login node) share one stream; the local node runs its tail as a child process. A node whose
// meshtrain has no `tail` (an older deploy) falls back to the per-file path (follow_node below).
//
// The follower also watches how each node's supervisor ends (node<i>.exit). When one fails it
// stops every node (the supervisors already tell each other through the rendezvous store; this
// is the safety net) and records the first failure as the run's root cause, read from the
// supervisors' exit records (exit-node<i>.json, core/exit_record.h).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <thread>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/follow_stream.h"
#include "core/store/rank_states.h"
#include "core/store/run_store.h"
#include "core/store/store_writer.h"
#include "remote/launch.h"
#include "remote/node.h"

namespace meshwork::remote {

// Why a node ended badly, from its supervisor's exit record (core/exit_record.h) when it left
// one, else from the node's exit status alone.
struct RootCause {
  size_t node = 0;      // the failing rank's node when the record names one, else the node that ended
  std::string host;
  int rank = -1;        // the failing global rank when the record names it, else -1
  int exit_status = 0;  // the supervisor's status (128+signal when killed by a signal)
  int exit_code = 0;    // the failing rank's exit code when reported, else the supervisor's
  int signal = 0;       // the failing rank's (or supervisor's) signal, 0 if none
  double time = 0;      // when the rank was seen to end, else when the node ended (unix seconds)
  std::string last_phase;   // what the rank was doing: "after step 7", "during startup", ...
  std::string reason;       // the record's words when it names no rank (stopped, store lost)
  bool from_record = false;  // read from the node's exit record (else its exit status only)
  bool first_hand = false;   // the failing rank's own supervisor's record, not relayed by another
  std::string source;        // where the facts came from, in words (the record's file name)
  std::string stderr_tail;  // the failing rank's log tail and the supervisor's stderr tail
  // Declared lost (FollowOptions::lost_after): the node could not be reached for that long, so
  // nothing of it is known, its processes may still run; `time` is when it was last heard.
  bool unreachable = false;
  std::string text() const;  // one paragraph for `runs`, events and the CLI
};

struct FollowOutcome {
  enum class State { succeeded, failed, stopped, detached };
  State state = State::detached;
  std::optional<RootCause> root_cause;
  int64_t reconnects = 0;
  std::string state_name() const;
};

using NodeConnector = std::function<std::variant<std::unique_ptr<Node>, ConnectError>(size_t index)>;

enum class FollowTransport {
  automatic,  // the follow stream, per node the file path where the stream is not available
  stream,     // the follow stream only (a node without it is retried, never read by files)
  files,      // the per-file SFTP path only (one thread and session per node: the old path)
};

struct FollowOptions {
  FollowTransport transport = FollowTransport::automatic;
  size_t stream_workers = 4;  // threads serving all node streams
  std::chrono::milliseconds heartbeat{2000};  // the tail's heartbeat; 3 missed + 2 s = link lost
  std::chrono::milliseconds poll{250};
  std::chrono::milliseconds stop_grace{5000};
  bool stop_all_on_failure = true;
  // A node that cannot be reached for this long (its stream silent, reconnects failing) is
  // declared LOST: it counts as ended badly ("unreachable for 60 s: its link is lost; its
  // processes may still run", RootCause::unreachable), the other nodes are stopped as on any
  // failure and run() returns failed, so an elastic follow can re-plan without it. Counted from
  // the last byte the node's tail sent or the last connection that succeeded, so a node back
  // before the limit goes on as before. 0: never; the follower retries for as long as it runs
  // (a plain follow: the user decides, with `meshwork stop`). Not for a batch system's nodes
  // (`alive` set): those are reached through the login node, and the batch system says which
  // are lost.
  std::chrono::milliseconds lost_after{0};
  size_t chunk_bytes = 4u << 20;
  // When a batch system owns the processes (Slurm, slurm_run.h), it answers these instead of
  // the node's pid files and signals: whether node `index`'s processes may still run (false:
  // they are gone; a missing node<i>.exit then reads as killed), and how to stop them.
  std::function<Result<bool>(Node& node, size_t index)> alive;
  std::function<Status(Node& node, size_t index)> stop;
  // Progress and notable events ("info" | "warning" | "error"), from the follower's threads.
  std::function<void(const std::string& level, const std::string& text)> on_event;
  // Benchmarks: called on the store's writer thread once a chunk is committed, with its first
  // (oldest) line (bench/follow_bench.cpp measures the lag from the line's "time").
  std::function<void(const std::string& source, const std::string& first_line)> on_committed;
};

class RunFollower {
 public:
  RunFollower(std::filesystem::path db, store::RunId run, LaunchRecord record, NodeConnector connect,
              FollowOptions options = {});
  ~RunFollower();
  // Follows until every node's supervisor has ended (then sets the run's final status and root
  // cause in the store) or until detach(). One call per follower.
  Result<FollowOutcome> run();
  void detach();    // thread-safe: stop following; the run goes on
  void stop_run();  // thread-safe: SIGTERM (then SIGKILL) every node; run() returns "stopped"

 private:
  struct StreamGroup;  // node_stream.cpp
  void follow_node(size_t index);
  // The stream path (node_stream.cpp): one worker serving `groups`.
  void serve_streams(std::vector<StreamGroup*> groups);
  bool start_stream(StreamGroup& g);
  void read_stream(StreamGroup& g);
  void handle_frame(StreamGroup& g, const follow::Frame& frame);
  void stream_lost(StreamGroup& g, const std::string& why);
  void stream_checks(StreamGroup& g);
  void fall_back(StreamGroup& g, const std::string& why);
  Node* control(StreamGroup& g);
  std::vector<std::unique_ptr<StreamGroup>> make_groups();
  // Shared by both paths.
  void submit(size_t index, int rank, uint64_t offset, std::string bytes);
  void record_end(Node* node, size_t index, const NodeExit& exit, bool was_stopped);
  // lost_after passed with no contact: node `index` ended as unreachable, last heard `silent` ago.
  void record_lost(size_t index, std::chrono::milliseconds silent);
  bool lost_now(std::chrono::steady_clock::time_point last_contact) const;
  Result<bool> drain(Node& node, size_t index, std::vector<uint64_t>& offsets);
  Status load_offsets(size_t index, std::vector<uint64_t>& offsets);
  RootCause diagnose(Node& node, size_t index, const NodeExit& exit);
  RootCause from_status(size_t index, const NodeExit& exit) const;
  void report_restarts(Node& node, size_t index, size_t& seen);
  void event(const std::string& level, const std::string& text);
  // Stall reports (S frames): kept until the next flush, which writes them and the follower's
  // beat (core/store/rank_states.h) in one transaction; a flush is due at each heartbeat.
  void stall_report(const follow::Frame& frame);
  void flush_states();

  std::filesystem::path db_;
  store::RunId run_;
  LaunchRecord rec_;
  NodeConnector connect_;
  FollowOptions opt_;
  std::unique_ptr<store::StoreWriter> writer_;
  std::mutex store_mu_;
  std::unique_ptr<store::RunStore> reader_;  // offsets, status, events (guarded by store_mu_)
  std::atomic<bool> detached_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> user_stop_{false};
  std::atomic<bool> resync_{false};
  std::atomic<int64_t> reconnects_{0};
  std::mutex mu_;
  std::vector<std::optional<NodeExit>> exits_;
  std::vector<RootCause> failures_;
  bool stopped_nodes_ = false;  // some node ended after a stop (guarded by mu_)
  std::vector<std::string> fatal_;  // per node: a connect error that retrying cannot fix
  std::atomic<uint64_t> resync_epoch_{0};  // bumped by a failed chunk: streams restart from the store
  std::mutex threads_mu_;
  std::vector<std::thread> extra_threads_;  // file-path fallbacks and stops started by workers
  std::mutex states_mu_;
  std::vector<store::StoredRankState> pending_states_;  // guarded by states_mu_
  std::chrono::steady_clock::time_point last_beat_{};   // guarded by states_mu_
  std::mutex committed_mu_;
  std::map<std::string, std::deque<std::string>> committed_last_;  // on_committed's first lines
};

}  // namespace meshwork::remote
