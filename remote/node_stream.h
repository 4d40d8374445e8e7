// The state of one follow stream (follower.h, "Transport"): a `meshtrain tail` serving the nodes
// that share one host and run directory, read by one of the follower's worker threads. Internal
// to the follower (follower.cpp, node_stream.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/follow_stream.h"
#include "remote/exec_stream.h"
#include "remote/follower.h"
#include "remote/node.h"

namespace meshwork::remote {

struct RunFollower::StreamGroup {
  using Clock = std::chrono::steady_clock;
  std::vector<size_t> nodes;       // indices into the LaunchRecord, all on one host and run dir
  std::map<int, size_t> rank_node;  // global rank -> node index, for F frames
  std::unique_ptr<Node> conn;      // the streaming session (one exec channel)
  std::unique_ptr<ExecStream> stream;
  follow::StreamParser parser;
  std::unique_ptr<Node> ctl;  // a second session, on demand: stop, diagnose, Slurm liveness
  bool hello = false;         // the tail said V: it is a meshtrain with `tail`
  bool announced = false;     // the "one meshtrain tail" event was sent (once per group, not per reconnect)
  bool done = false;          // E seen (or handed to the file path, or a fatal connect error)
  bool stop_sent = false;
  uint64_t epoch = 0;  // resync_epoch_ when the stream started
  Clock::time_point retry_at{};
  Clock::time_point last_frame{};
  Clock::time_point last_alive{};
  Clock::time_point last_contact{};  // the last byte from the tail or connection made (lost_after)
  std::chrono::milliseconds backoff{200};
  std::map<size_t, size_t> restarts_seen;  // node -> restart lines reported
  std::string chunk;  // read buffer, reused
};

}  // namespace meshwork::remote
