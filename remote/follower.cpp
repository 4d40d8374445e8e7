#include "remote/follower.h"

#include "remote/node_stream.h"

#include <pthread.h>

#include <algorithm>
#include <ctime>
#include <thread>

#include "core/exit_record.h"
#include "remote/parse_util.h"
#include "remote/probe_parsers.h"
#include "remote/run_layout.h"

namespace meshwork::remote {

using namespace detail;

std::string RootCause::text() const {
  std::string out = "node " + std::to_string(node) + " (" + host + ")";
  if (rank >= 0) {
    RankFailure f;
    f.exit_code = exit_code;
    f.signal = signal;
    out += ", rank " + std::to_string(rank) + ": " + f.how();
    if (!last_phase.empty()) out += " " + last_phase;
  } else if (!reason.empty()) {
    out += ": " + reason;
  } else if (signal > 0) {
    out += ": killed by signal " + std::to_string(signal);
  } else {
    out += ": exit code " + std::to_string(exit_code);
  }
  if (!source.empty()) out += "\n" + source;
  if (!stderr_tail.empty()) out += "\n" + stderr_tail;
  return out;
}

std::string FollowOutcome::state_name() const {
  switch (state) {
    case State::succeeded: return "ok";
    case State::failed: return "failed";
    case State::stopped: return "stopped";
    case State::detached: return "detached";
  }
  return "?";
}

RunFollower::RunFollower(std::filesystem::path db, store::RunId run, LaunchRecord record,
                         NodeConnector connect, FollowOptions options)
    : db_(std::move(db)), run_(run), rec_(std::move(record)), connect_(std::move(connect)),
      opt_(std::move(options)) {}

RunFollower::~RunFollower() = default;

void RunFollower::detach() { detached_ = true; }

void RunFollower::stop_run() {
  user_stop_ = true;
  stop_requested_ = true;
}

void RunFollower::event(const std::string& level, const std::string& text) {
  if (opt_.on_event) opt_.on_event(level, text);
}

Status RunFollower::load_offsets(size_t index, std::vector<uint64_t>& offsets) {
  writer_->flush();  // what we queued before is committed: the stored offsets are the truth
  std::lock_guard lock(store_mu_);
  const int first = rec_.first_rank(index);
  offsets.assign(static_cast<size_t>(rec_.nodes[index].slots), 0);
  for (int k = 0; k < rec_.nodes[index].slots; ++k) {
    auto off = reader_->source_offset(run_, rec_.source_of(index, first + k));
    if (!off) return off.error();
    offsets[static_cast<size_t>(k)] = *off;
  }
  return {};
}

// Reads what each rank file has past its offset and queues the complete lines. Returns whether
// anything was read; an Error when the link failed.
Result<bool> RunFollower::drain(Node& node, size_t index, std::vector<uint64_t>& offsets) {
  bool progressed = false;
  const int first = rec_.first_rank(index);
  for (int k = 0; k < rec_.nodes[index].slots; ++k) {
    const int rank = first + k;
    uint64_t& off = offsets[static_cast<size_t>(k)];
    while (true) {
      auto data = node.read_range(rec_.nodes[index].run_dir + "/" + metrics_file(rank), off, opt_.chunk_bytes);
      if (!data) return data.error();
      if (!data->has_value()) break;  // the rank has not created its file yet
      const std::string& bytes = **data;
      const auto nl = bytes.rfind('\n');
      if (nl == std::string::npos) break;  // only a partial line so far
      const size_t cut = nl + 1;
      submit(index, rank, off, bytes.substr(0, cut));
      off += cut;
      progressed = true;
      if (bytes.size() < opt_.chunk_bytes) break;
    }
  }
  return progressed;
}

namespace {

std::string tail_lines(const std::string& text, size_t max_lines) {
  std::vector<std::string> lines = split_lines(text);
  while (!lines.empty() && trim(lines.back()).empty()) lines.pop_back();
  const size_t from = lines.size() > max_lines ? lines.size() - max_lines : 0;
  std::string out;
  for (size_t i = from; i < lines.size(); ++i) out += (out.empty() ? "" : "\n") + lines[i];
  return out;
}

std::string read_tail(Node& node, const std::string& path, size_t bytes) {
  // Read the last `bytes` of the file: find its size by reading from an offset that is large
  // enough, in one read (SFTP has no tail).
  auto all = node.read_range(path, 0, 64u << 20);
  if (!all || !all->has_value()) return {};
  const std::string& s = **all;
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

}  // namespace

// What the node's exit status alone says (its supervisor left no record, or it was not read).
RootCause RunFollower::from_status(size_t index, const NodeExit& exit) const {
  RootCause rc;
  rc.node = index;
  rc.host = rec_.nodes[index].host;
  rc.exit_status = exit.status;
  rc.exit_code = exit.status;
  rc.signal = exit.signal();
  rc.time = exit.time;
  return rc;
}

// The supervisor's exit record says which rank failed, on which node, how, when and after which
// step (trainer/supervisor.cpp writes it before it stops its ranks). Without one (the supervisor
// was killed outright) the node's status is all we know. Either way the tails of the failing
// rank's log and of the supervisor's stderr go along for the user.
RootCause RunFollower::diagnose(Node& node, size_t index, const NodeExit& exit) {
  RootCause rc = from_status(index, exit);
  const std::string dir = rec_.nodes[index].run_dir + "/";
  const std::string record_file = exit_record_file(static_cast<int>(index));
  auto text = node.read_range(dir + record_file, 0, 64u << 10);
  std::optional<ExitRecord> record;
  if (!text) {
    rc.source = "no exit record: " + record_file + ": " + text.error().message();
  } else if (!text->has_value()) {
    rc.source = "no exit record: " + record_file + " does not exist (its supervisor ended before it could write one)";
  } else if (auto parsed = parse_exit_record(**text); !parsed) {
    rc.source = "no exit record: " + record_file + ": " + parsed.error().message();
  } else {
    record = *parsed;
  }
  if (record) {
    rc.from_record = true;
    rc.source = "from the exit record " + record_file + " (" + std::string(to_string(record->outcome)) + ")";
    if (const auto& f = record->failure) {
      rc.rank = f->rank;
      rc.exit_code = f->exit_code;
      rc.signal = f->signal;
      rc.time = f->time;
      rc.last_phase = f->when();
      rc.first_hand = f->node == static_cast<int>(index);
      if (f->node >= 0 && static_cast<size_t>(f->node) < rec_.nodes.size()) {
        rc.node = static_cast<size_t>(f->node);
        rc.host = rec_.nodes[rc.node].host;
      }
    } else {
      rc.exit_code = record->exit_code;
      rc.signal = 0;
      rc.reason = record->reason;
      rc.time = record->time;
    }
  }
  const std::string err = read_tail(node, dir + node_file(static_cast<int>(index), ".err"), 8192);
  std::string tail;
  if (rc.rank >= 0 && rc.first_hand) {  // a relayed failure's rank log is on another node
    tail = tail_lines(read_tail(node, dir + rank_log_file(rc.rank), 4096), 15);
    if (!tail.empty()) tail = rank_log_file(rc.rank) + ":\n" + tail;
  }
  const std::string err_tail = tail_lines(err, 15);
  if (!err_tail.empty()) {
    tail += (tail.empty() ? "" : "\n") + node_file(static_cast<int>(index), ".err") + ":\n" + err_tail;
  }
  rc.stderr_tail = tail;
  return rc;
}

// The node's wrapper appends "<attempt> <status> <time>" to node<i>.restarts when it starts the
// ranks again (launch.h); each new line becomes an event, in the store too.
void RunFollower::report_restarts(Node& node, size_t index, size_t& seen) {
  auto text = node.read_range(rec_.nodes[index].run_dir + "/" + node_file(static_cast<int>(index), ".restarts"), 0,
                              64u << 10);
  if (!text || !text->has_value()) return;
  const std::string& t = **text;
  const std::vector<std::string> lines = split_lines(t.substr(0, t.rfind('\n') + 1));  // whole lines
  for (; seen < lines.size(); ++seen) {
    const auto w = words(lines[seen]);
    if (w.size() < 2) continue;
    const std::string msg = "node " + std::to_string(index) + " (" + rec_.nodes[index].host + "): restart " + w[0] +
                            " of " + std::to_string(rec_.max_restarts) + " from the latest checkpoint after status " +
                            w[1];
    event("warning", msg);
    std::lock_guard lock(store_mu_);
    (void)reader_->add_event(run_, "warning", msg);
  }
}

void RunFollower::submit(size_t index, int rank, uint64_t offset, std::string bytes) {
  std::string source = rec_.source_of(index, rank);
  if (opt_.on_committed) {
    // The chunk's first line, its oldest: the benchmark's lag (bench/follow_bench.cpp).
    std::lock_guard lock(committed_mu_);
    committed_last_[source].push_back(bytes.substr(0, bytes.find('\n') + 1));
  }
  writer_->submit(run_, std::move(source), offset, std::move(bytes));
}

// A node ended (its node<i>.exit, or no process left): keep how, and when it failed (not stopped)
// find out why and ask every node to stop.
void RunFollower::record_end(Node* node, size_t index, const NodeExit& finished, bool was_stopped) {
  const std::string host = rec_.nodes[index].host;
  std::lock_guard lock(mu_);
  if (exits_[index]) return;  // already known (a restarted stream reports it again)
  exits_[index] = finished;
  if (was_stopped) stopped_nodes_ = true;
  if (finished.status != 0 && !user_stop_ && !was_stopped) {
    RootCause rc = node ? diagnose(*node, index, finished) : from_status(index, finished);
    if (!node) rc.source = "no exit record: node " + std::to_string(index) + " could not be reached to read it";
    event("error", "node " + std::to_string(index) + " ended: " + rc.text());
    failures_.push_back(std::move(rc));
    if (opt_.stop_all_on_failure) stop_requested_ = true;
  } else {
    event("info", "node " + std::to_string(index) + " (" + host + ") ended with status " +
                      std::to_string(finished.status));
  }
}

bool RunFollower::lost_now(std::chrono::steady_clock::time_point last_contact) const {
  return opt_.lost_after.count() > 0 && !opt_.alive && std::chrono::steady_clock::now() - last_contact >= opt_.lost_after;
}

namespace {

// "60 s", "1.5 s"
std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

}  // namespace

// Nothing of the node is known, not even whether its processes ended: its supervisor may still
// run, so no exit record can be read and none may come. It counts as a failure (the others are
// stopped, run() returns failed) whose cause is the link, with the time it was last heard.
void RunFollower::record_lost(size_t index, std::chrono::milliseconds silent) {
  std::lock_guard lock(mu_);
  if (exits_[index]) return;  // it ended before it was lost: that is known
  const auto last_heard = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch() - silent);
  exits_[index] = NodeExit{-1, static_cast<double>(last_heard.count()) / 1000.0};
  RootCause rc;
  rc.node = index;
  rc.host = rec_.nodes[index].host;
  rc.exit_status = -1;
  rc.exit_code = -1;
  rc.time = exits_[index]->time;
  rc.unreachable = true;
  rc.reason = "unreachable for " + seconds_text(silent) + ": its link is lost; its processes may still run";
  rc.source = "declared lost by the follower after " + seconds_text(opt_.lost_after) +
              " without contact (lost_after); no exit record could be read";
  event("error", "node " + std::to_string(index) + " (" + rc.host + ") " + rc.reason);
  {
    std::lock_guard store_lock(store_mu_);
    (void)reader_->add_event(run_, "error", "node " + std::to_string(index) + " (" + rc.host + ") " + rc.reason);
  }
  failures_.push_back(std::move(rc));
  if (opt_.stop_all_on_failure) stop_requested_ = true;
}

void RunFollower::follow_node(size_t index) {
  pthread_setname_np(pthread_self(), "mw-files");  // the benchmark sums the follower's threads by name
  const std::string host = rec_.nodes[index].host;
  std::unique_ptr<Node> node;
  std::vector<uint64_t> offsets;
  bool ended = false;
  bool stopped_here = false;
  size_t restarts_seen = 0;
  auto backoff = std::chrono::milliseconds(200);
  auto last_alive_check = std::chrono::steady_clock::now();
  auto last_contact = std::chrono::steady_clock::now();  // lost_after, as on the stream path
  while (!detached_) {
    if (!node && lost_now(last_contact)) {
      record_lost(index, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                               last_contact));
      return;
    }
    if (!node) {
      auto conn = connect_(index);
      if (auto* err = std::get_if<ConnectError>(&conn)) {
        if (err->kind == ConnectFailure::host_key_changed || err->kind == ConnectFailure::host_key_unknown ||
            err->kind == ConnectFailure::auth) {
          std::lock_guard lock(mu_);
          fatal_[index] = err->error.message();
          event("error", err->error.message());
          return;
        }
        event("warning", "node " + std::to_string(index) + " (" + host + "): " + err->error.message() + "; retrying");
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
        continue;
      }
      node = std::move(std::get<0>(conn));
      last_contact = std::chrono::steady_clock::now();
      backoff = std::chrono::milliseconds(200);
      if (auto st = load_offsets(index, offsets); !st) {
        event("error", st.error().message());
        node.reset();
        std::this_thread::sleep_for(backoff);
        continue;
      }
    }
    if (resync_.exchange(false)) (void)load_offsets(index, offsets);
    auto progressed = drain(*node, index, offsets);
    if (progressed) last_contact = std::chrono::steady_clock::now();
    if (!progressed) {
      ++reconnects_;
      event("warning", "node " + std::to_string(index) + " (" + host + "): link lost (" +
                           progressed.error().message() + "); reconnecting");
      node.reset();
      continue;
    }
    if (ended) {
      if (!*progressed) return;  // final drain done
      continue;
    }
    auto exit = read_node_exit(*node, rec_, index);
    if (!exit) {
      node.reset();
      continue;
    }
    std::optional<NodeExit> finished = *exit;
    // No exit file, but nothing alive: the wrapper itself was killed (SIGKILL after a grace).
    if (!finished && std::chrono::steady_clock::now() - last_alive_check > std::chrono::seconds(2)) {
      last_alive_check = std::chrono::steady_clock::now();
      if (rec_.max_restarts > 0) report_restarts(*node, index, restarts_seen);
      auto alive = opt_.alive ? opt_.alive(*node, index) : node_alive(*node, rec_, index);
      if (alive.ok() && !*alive) {
        auto again = read_node_exit(*node, rec_, index);  // it may have just been written
        if (again.ok() && again->has_value()) {
          finished = **again;
        } else {
          finished = NodeExit{128 + 9, static_cast<double>(std::time(nullptr))};
        }
      }
    }
    if (finished) {
      ended = true;
      // Stopped (by `meshwork stop`, or by us after another node failed) is not a failure.
      auto marker = node->read_range(rec_.nodes[index].run_dir + "/" + node_file(static_cast<int>(index), ".stop"), 0, 1);
      const bool was_stopped = marker.ok() && marker->has_value();
      record_end(node.get(), index, *finished, was_stopped);
      continue;  // one more drain for what was written last
    }
    if (stop_requested_ && !stopped_here) {
      stopped_here = true;
      const Status st = opt_.stop ? opt_.stop(*node, index) : stop_node(*node, rec_, index, opt_.stop_grace);
      if (!st) {
        event("warning", st.error().message());
      }
      last_alive_check = {};  // check at once whether it is gone
      continue;
    }
    if (!*progressed) std::this_thread::sleep_for(opt_.poll);
  }
}

Result<FollowOutcome> RunFollower::run() {
  auto reader = store::RunStore::open(db_);
  if (!reader) return reader.error();
  reader_ = std::move(*reader);
  auto writer = store::StoreWriter::start(
      db_, store::StoreWriter::Options{},
      [this](store::RunId, const std::string& source, const Result<store::IngestCounts>& r) {
        if (!r) {
          resync_ = true;  // e.g. a gap after a restart: re-read the offsets from the store
          ++resync_epoch_;
          event("warning", source + ": " + r.error().message());
        }
        if (opt_.on_committed) {
          std::string last;
          {
            std::lock_guard lock(committed_mu_);
            auto& q = committed_last_[source];
            if (q.empty()) return;
            last = std::move(q.front());
            q.pop_front();
          }
          opt_.on_committed(source, last);
        }
      });
  if (!writer) return writer.error();
  writer_ = std::move(*writer);
  const size_t n = rec_.nodes.size();
  exits_.assign(n, std::nullopt);
  fatal_.assign(n, "");
  {
    std::lock_guard lock(store_mu_);
    (void)reader_->set_status(run_, store::kStatusRunning);
  }
  std::vector<std::thread> threads;
  if (opt_.transport == FollowTransport::files) {
    for (size_t i = 0; i < n; ++i) threads.emplace_back([this, i] { follow_node(i); });
  } else {
    // A few workers, each serving every k-th stream (node_stream.cpp).
    auto groups = make_groups();
    const size_t workers = std::max<size_t>(1, std::min(opt_.stream_workers, groups.size()));
    std::vector<std::vector<StreamGroup*>> share(workers);
    for (size_t g = 0; g < groups.size(); ++g) share[g % workers].push_back(groups[g].get());
    for (auto& mine : share) threads.emplace_back([this, mine] { serve_streams(mine); });
    for (auto& t : threads) t.join();
    threads.clear();
    groups.clear();
  }
  for (auto& t : threads) t.join();
  {
    // Fallbacks and stops the workers started; none starts after the workers ended.
    std::lock_guard lock(threads_mu_);
    for (auto& t : extra_threads_) t.join();
    extra_threads_.clear();
  }
  writer_->flush();

  FollowOutcome out;
  out.reconnects = reconnects_;
  std::lock_guard lock(store_mu_);
  for (size_t i = 0; i < n; ++i) {
    if (!fatal_[i].empty()) {
      return Error{"node " + std::to_string(i), rec_.nodes[i].host, fatal_[i]};
    }
  }
  if (detached_) {
    out.state = FollowOutcome::State::detached;
    return out;
  }
  if (!failures_.empty()) {
    // The first failure: a failing rank named by an exit record beats a node that only ended
    // (its exit may even come first: it stops faster); then the rank that failed first; of two
    // records of the same failure, the failing rank's own supervisor's (it has the rank's log).
    auto first = std::min_element(failures_.begin(), failures_.end(), [](const RootCause& a, const RootCause& b) {
      if ((a.rank >= 0) != (b.rank >= 0)) return a.rank >= 0;
      if (a.time != b.time) return a.time < b.time;
      return a.first_hand && !b.first_hand;
    });
    // A node lost before that failure explains it (its peers' collectives with it fail after
    // it went silent): the earliest such node is the cause.
    for (auto it = failures_.begin(); it != failures_.end(); ++it)
      if (it->unreachable && it->time <= first->time && (!first->unreachable || it->time < first->time)) first = it;
    out.state = FollowOutcome::State::failed;
    out.root_cause = *first;
    (void)reader_->set_status(run_, store::kStatusFailed, first->text());
    (void)reader_->add_event(run_, "error", "root cause: " + first->text());
  } else if (user_stop_ || stopped_nodes_) {
    out.state = FollowOutcome::State::stopped;
    (void)reader_->set_status(run_, store::kStatusStopped, "stopped by the user");
    (void)reader_->add_event(run_, "info", "stopped by the user");
  } else {
    out.state = FollowOutcome::State::succeeded;
    (void)reader_->set_status(run_, store::kStatusOk);
  }
  return out;
}

}  // namespace meshwork::remote
