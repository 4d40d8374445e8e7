// The follower's stream path (follower.h, "Transport"): a few worker threads, each serving many
// node streams. A worker waits in poll() on its streams' SSH sockets and reads only the ones that
// became readable, without blocking; once every poll interval it also runs each stream's timers
// (heartbeat watch, stop requests, Slurm's liveness). Compared with the file path (a thread and
// an SFTP open/read/close per rank file per poll), a node costs the workbench nothing while its
// ranks write nothing, and one read per burst of lines when they do.
//
// Exactly once, as on the file path: the tail starts from the offsets the store holds (after the
// writer's queue is committed), each F frame becomes one store chunk at its offset, and the
// offsets advance in the chunk's transaction. When a stream breaks (link lost, tail killed, no
// heartbeat, a bad frame), whatever partial frame was buffered is dropped and a new tail starts
// from the store's offsets again: nothing is lost and nothing is stored twice.
#include <poll.h>
#include <pthread.h>

#include <algorithm>
#include <ctime>

#include "remote/launch.h"
#include "remote/node_stream.h"
#include "remote/parse_util.h"
#include "remote/run_layout.h"
#include "core/shell_quote.h"

namespace meshwork::remote {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

// "node 3 (host)" or "nodes 0-7 (host)" for the events.
std::string who(const LaunchRecord& rec, const std::vector<size_t>& nodes) {
  const std::string host = " (" + rec.nodes[nodes.front()].host + ")";
  if (nodes.size() == 1) return "node " + std::to_string(nodes.front()) + host;
  return "nodes " + std::to_string(nodes.front()) + "-" + std::to_string(nodes.back()) + host;
}

}  // namespace

std::vector<std::unique_ptr<RunFollower::StreamGroup>> RunFollower::make_groups() {
  std::vector<std::unique_ptr<StreamGroup>> out;
  std::map<std::pair<std::string, std::string>, StreamGroup*> by_place;
  for (size_t i = 0; i < rec_.nodes.size(); ++i) {
    StreamGroup*& g = by_place[{rec_.nodes[i].host, rec_.nodes[i].run_dir}];
    if (!g) {
      out.push_back(std::make_unique<StreamGroup>());
      g = out.back().get();
      g->last_contact = Clock::now();  // lost_after counts from the start of the follow
    }
    g->nodes.push_back(i);
    for (int k = 0; k < rec_.nodes[i].slots; ++k) g->rank_node[rec_.first_rank(i) + k] = i;
  }
  return out;
}

void RunFollower::serve_streams(std::vector<StreamGroup*> groups) {
  pthread_setname_np(pthread_self(), "mw-stream");  // the benchmark sums the follower's threads by name
  std::vector<pollfd> fds;
  std::vector<StreamGroup*> polled;
  auto next_checks = Clock::now();
  while (!detached_) {
    const auto now = Clock::now();
    const bool checks = now >= next_checks;
    if (checks) next_checks = now + opt_.poll;
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_checks - now);
    fds.clear();
    polled.clear();
    bool any = false;
    for (StreamGroup* g : groups) {
      if (!g->done && !g->stream && now >= g->retry_at) start_stream(*g);
      if (!g->done && g->stream && checks) stream_checks(*g);
      if (!g->done && lost_now(g->last_contact)) {
        // FollowOptions::lost_after: no byte and no connection for that long. Its nodes end as
        // unreachable (record_lost stops the others); nothing more can be read from them.
        const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - g->last_contact);
        for (size_t i : g->nodes) record_lost(i, silent);
        g->stream.reset();
        g->conn.reset();
        g->ctl.reset();
        g->done = true;
      }
      if (g->done) continue;
      any = true;
      if (g->stream) {
        fds.push_back(pollfd{g->stream->poll_fd(), POLLIN, 0});
        polled.push_back(g);
      } else {
        wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(g->retry_at - now));
      }
    }
    if (!any) return;
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(0, wait.count())));
    if (n <= 0) continue;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0 && polled[i]->stream) read_stream(*polled[i]);
    }
  }
}

bool RunFollower::start_stream(StreamGroup& g) {
  const size_t first = g.nodes.front();
  auto conn = connect_(first);
  if (auto* err = std::get_if<ConnectError>(&conn)) {
    if (err->kind == ConnectFailure::host_key_changed || err->kind == ConnectFailure::host_key_unknown ||
        err->kind == ConnectFailure::auth) {
      std::lock_guard lock(mu_);
      for (size_t i : g.nodes) fatal_[i] = err->error.message();
      event("error", err->error.message());
      g.done = true;
      return false;
    }
    event("warning", who(rec_, g.nodes) + ": " + err->error.message() + "; retrying");
    g.retry_at = Clock::now() + g.backoff;
    g.backoff = std::min<std::chrono::milliseconds>(g.backoff * 2, 2000ms);
    return false;
  }
  g.conn = std::move(std::get<0>(conn));
  g.last_contact = Clock::now();  // its sshd answered: the link is there
  // Everything queued is committed first: the stored offsets are the truth the tail starts from.
  g.epoch = resync_epoch_;
  writer_->flush();
  follow::TailRequest req;
  {
    std::lock_guard lock(store_mu_);
    for (size_t i : g.nodes) {
      const int first_rank = rec_.first_rank(i);
      req.nodes.push_back({static_cast<int>(i), first_rank, rec_.nodes[i].slots});
      for (int k = 0; k < rec_.nodes[i].slots; ++k) {
        auto off = reader_->source_offset(run_, rec_.source_of(i, first_rank + k));
        if (!off) {
          event("error", off.error().message());
          g.conn.reset();
          g.retry_at = Clock::now() + g.backoff;
          return false;
        }
        if (*off > 0) req.offsets.emplace_back(first_rank + k, *off);
      }
    }
  }
  std::string cmd = "cd -- " + shell_quote(rec_.nodes[first].run_dir) + " && exec ./" + shell_quote(rec_.trainer) +
                    " tail --poll-ms " + std::to_string(opt_.poll.count()) + " --heartbeat-ms " +
                    std::to_string(opt_.heartbeat.count()) + " --chunk-bytes " + std::to_string(opt_.chunk_bytes);
  if (opt_.alive) cmd += " --no-liveness";  // the batch system answers (stream_checks)
  if (rec_.max_restarts > 0) cmd += " --restarts";
  auto stream = g.conn->open_stream(cmd, follow::encode_request(req));
  if (!stream) {
    stream_lost(g, stream.error().message());
    return false;
  }
  g.stream = std::move(*stream);
  g.parser.reset();
  g.hello = false;
  g.last_frame = Clock::now();
  read_stream(g);  // the exec's reply may have brought stdout along: poll() would not see it
  return true;
}

void RunFollower::read_stream(StreamGroup& g) {
  g.chunk.clear();
  auto got = g.stream->read_some(g.chunk);
  if (!got) {
    stream_lost(g, got.error().message());
    return;
  }
  if (*got > 0) {
    g.last_frame = Clock::now();
    g.last_contact = g.last_frame;
    g.parser.feed(g.chunk);
  }
  while (g.stream) {
    auto frame = g.parser.next();
    if (!frame) {
      stream_lost(g, frame.error().message());
      return;
    }
    if (!frame->has_value()) break;
    handle_frame(g, **frame);
  }
  if (!g.stream || !g.stream->at_eof()) return;
  if (!g.hello) {
    // No hello: the tail never ran. meshtrain without `tail` refuses the word (exit 2); no
    // meshtrain or no run directory: the shell's 126/127/1.
    const int status = g.stream->exit_status();
    std::string err = g.stream->stderr_text();
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    const std::string why = "no follow stream (the tail exited " + std::to_string(status) + (err.empty() ? "" : ": ") +
                            err.substr(0, 200) + ")";
    if (status == 2 || status == 126 || status == 127) {
      fall_back(g, why);
    } else {
      stream_lost(g, why);
    }
    return;
  }
  stream_lost(g, "the node's tail ended mid-stream");
}

void RunFollower::stall_report(const follow::Frame& f) {
  // A report that does not parse is dropped: the diagnosis goes without it, the stream goes on.
  const nlohmann::json j = nlohmann::json::parse(f.body, nullptr, false);
  if (!j.is_object()) return;
  store::StoredRankState st;
  st.rank = static_cast<int>(f.a);
  st.time = static_cast<double>(std::time(nullptr));
  st.stalled = j.value("stalled", false);
  st.process = j.value("process", std::string());
  if (auto it = j.find("flight"); it != j.end() && it->is_object()) {
    Result<FlightState> fs = flight_state_from_json(*it);
    if (fs) st.flight = std::move(*fs);
  }
  std::lock_guard lock(states_mu_);
  pending_states_.push_back(std::move(st));
}

void RunFollower::flush_states() {
  std::vector<store::StoredRankState> states;
  {
    std::lock_guard lock(states_mu_);
    const auto now = Clock::now();
    if (pending_states_.empty() && now - last_beat_ < 2s) return;
    last_beat_ = now;
    states.swap(pending_states_);
  }
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  const double now = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  for (store::StoredRankState& st : states) st.time = now;
  std::lock_guard lock(store_mu_);
  (void)store::put_rank_states(*reader_, run_, states, now);
}

void RunFollower::handle_frame(StreamGroup& g, const follow::Frame& f) {
  using K = follow::Frame::Kind;
  auto node_of = [&](int64_t node) -> bool {
    return std::find(g.nodes.begin(), g.nodes.end(), static_cast<size_t>(node)) != g.nodes.end();
  };
  switch (f.kind) {
    case K::hello:
      g.hello = true;
      g.backoff = 200ms;
      if (!g.announced) {
        // One event per group, i.e. per tail the follower keeps (a Slurm run's nodes all share
        // the login node's run directory: one group, one tail): what the record of a run says
        // about how it was followed.
        g.announced = true;
        const std::string msg =
            who(rec_, g.nodes) + ": one meshtrain tail streams " + std::to_string(g.rank_node.size()) + " rank(s)";
        event("info", msg);
        std::lock_guard lock(store_mu_);
        (void)reader_->add_event(run_, "info", msg);
      }
      break;
    case K::file: {
      auto it = g.rank_node.find(static_cast<int>(f.a));
      if (it == g.rank_node.end()) {
        stream_lost(g, "rank " + std::to_string(f.a) + " is not one this stream serves");
        return;
      }
      submit(it->second, static_cast<int>(f.a), static_cast<uint64_t>(f.b), f.body);
      break;
    }
    case K::restart: {
      if (!node_of(f.a)) break;
      const size_t node = static_cast<size_t>(f.a);
      size_t& seen = g.restarts_seen[node];
      if (static_cast<size_t>(f.b) < seen) break;  // a restarted tail reports them again
      seen = static_cast<size_t>(f.b) + 1;
      const auto w = detail::words(f.body);
      if (w.size() < 2) break;
      const std::string msg = "node " + std::to_string(node) + " (" + rec_.nodes[node].host + "): restart " + w[0] +
                              " of " + std::to_string(rec_.max_restarts) +
                              " from the latest checkpoint after status " + w[1];
      event("warning", msg);
      std::lock_guard lock(store_mu_);
      (void)reader_->add_event(run_, "warning", msg);
      break;
    }
    case K::exit: {
      if (!node_of(f.a)) break;
      const NodeExit exit{static_cast<int>(f.b), f.time};
      // Only a failure needs the node's logs (diagnose): only then a control session.
      const bool failure = exit.status != 0 && !f.stopped && !user_stop_;
      record_end(failure ? control(g) : nullptr, static_cast<size_t>(f.a), exit, f.stopped);
      break;
    }
    case K::stall:
      stall_report(f);
      break;
    case K::heartbeat:
      flush_states();
      break;
    case K::end:
      g.done = true;
      g.stream.reset();
      g.conn.reset();
      g.ctl.reset();
      break;
  }
}

void RunFollower::stream_lost(StreamGroup& g, const std::string& why) {
  ++reconnects_;
  event("warning", who(rec_, g.nodes) + ": link lost (" + why + "); reconnecting");
  g.stream.reset();  // before its session
  g.conn.reset();
  g.parser.reset();
  g.hello = false;
  g.retry_at = Clock::now() + g.backoff;
  g.backoff = std::min<std::chrono::milliseconds>(g.backoff * 2, 2000ms);
}

void RunFollower::fall_back(StreamGroup& g, const std::string& why) {
  if (opt_.transport == FollowTransport::stream) {
    stream_lost(g, why);
    return;
  }
  event("info", who(rec_, g.nodes) + ": " + why + "; following its files one by one");
  g.stream.reset();
  g.conn.reset();
  g.ctl.reset();
  g.done = true;
  std::lock_guard lock(threads_mu_);
  for (size_t i : g.nodes) extra_threads_.emplace_back([this, i] { follow_node(i); });
}

Node* RunFollower::control(StreamGroup& g) {
  if (g.ctl) return g.ctl.get();
  auto conn = connect_(g.nodes.front());
  if (auto* err = std::get_if<ConnectError>(&conn)) {
    event("warning", who(rec_, g.nodes) + ": " + err->error.message());
    return nullptr;
  }
  g.ctl = std::move(std::get<0>(conn));
  return g.ctl.get();
}

// Once per poll interval for a running stream.
void RunFollower::stream_checks(StreamGroup& g) {
  const auto now = Clock::now();
  // A silent stream: the tail writes a heartbeat every opt_.heartbeat; before its hello it may
  // still be loading (a cold meshtrain on a network filesystem), so it gets longer.
  const auto limit = g.hello ? opt_.heartbeat * 3 + 2000ms : std::chrono::milliseconds(60000);
  if (now - g.last_frame > limit) {
    stream_lost(g, "no heartbeat for " + std::to_string(limit.count() / 1000) + " s");
    return;
  }
  if (resync_epoch_ != g.epoch) {  // a chunk failed in the store: start again from its offsets
    stream_lost(g, "the store asked to resume from its offsets");
    return;
  }
  auto ended = [&](size_t i) {
    std::lock_guard lock(mu_);
    return exits_[i].has_value();
  };
  if (stop_requested_ && !g.stop_sent) {
    // On a thread of its own: stopping waits for the processes (stop_grace), which must not hold
    // up the other streams of this worker. The tail then reports each node's end.
    g.stop_sent = true;
    std::vector<size_t> nodes;
    for (size_t i : g.nodes) {
      if (!ended(i)) nodes.push_back(i);
    }
    if (!nodes.empty()) {
      std::lock_guard lock(threads_mu_);
      extra_threads_.emplace_back([this, nodes] {
        auto conn = connect_(nodes.front());
        if (auto* err = std::get_if<ConnectError>(&conn)) {
          event("warning", err->error.message());
          return;
        }
        Node& node = *std::get<0>(conn);
        for (size_t i : nodes) {
          const Status st = opt_.stop ? opt_.stop(node, i) : stop_node(node, rec_, i, opt_.stop_grace);
          if (!st) event("warning", st.error().message());
        }
      });
    }
  }
  // A batch system's liveness (Slurm): the tail runs with --no-liveness, so a job that is gone
  // without its nodes' exit files (cancelled, timed out, a node lost) is noticed here.
  if (opt_.alive && now - g.last_alive > 2s) {
    g.last_alive = now;
    std::vector<size_t> gone;
    for (size_t i : g.nodes) {
      if (ended(i)) continue;
      Node* c = control(g);
      if (!c) return;
      auto alive = opt_.alive(*c, i);
      if (alive.ok() && !*alive) gone.push_back(i);
    }
    if (gone.empty()) return;
    // Close the stream first, then read what those nodes wrote last by files from the store's
    // offsets (the tail would never send their X: it waits for exit files that may not come).
    Node* c = control(g);
    if (!c) return;
    g.stream.reset();
    g.conn.reset();
    g.parser.reset();
    g.retry_at = Clock::now();
    writer_->flush();
    for (size_t i : gone) {
      std::vector<uint64_t> offsets;
      if (!load_offsets(i, offsets)) continue;
      for (int pass = 0; pass < 1000; ++pass) {
        auto progressed = drain(*c, i, offsets);
        if (!progressed || !*progressed) break;
      }
      auto again = read_node_exit(*c, rec_, i);
      const NodeExit exit = again.ok() && again->has_value() ? **again
                                                             : NodeExit{128 + 9, static_cast<double>(std::time(nullptr))};
      auto marker = c->read_range(rec_.nodes[i].run_dir + "/" + node_file(static_cast<int>(i), ".stop"), 0, 1);
      record_end(c, i, exit, marker.ok() && marker->has_value());
    }
    bool all = true;
    for (size_t i : g.nodes) all = all && ended(i);
    if (all) {
      writer_->flush();
      g.done = true;
      g.ctl.reset();
    }
  }
}

}  // namespace meshwork::remote
