// A long-running command on a node whose stdout is read without blocking: the follower's
// node streams (node_stream.cpp) keep many of them open and serve them from a few threads, each
// waiting in poll() on the streams' descriptors instead of a thread blocking per node.
#pragma once

#include <cstddef>
#include <string>

#include "core/error.h"

namespace meshwork::remote {

class ExecStream {
 public:
  virtual ~ExecStream() = default;
  // A descriptor that becomes readable when data may have arrived (the SSH socket). Data can
  // also sit already buffered: call read_some() until it returns 0 before waiting on it.
  virtual int poll_fd() const = 0;
  // Appends what has arrived on the command's stdout to `out`, without waiting. Returns the
  // number of bytes appended (0: nothing now); an Error when the link failed.
  virtual Result<size_t> read_some(std::string& out) = 0;
  // The command's stdout ended (it exited, or was killed).
  virtual bool at_eof() = 0;
  // The exit status once at_eof() (-1: none reported, e.g. killed by a signal) and the first
  // few KiB of its stderr (what a node whose meshtrain has no `tail` prints).
  virtual int exit_status() = 0;
  virtual std::string stderr_text() const = 0;
};

}  // namespace meshwork::remote
