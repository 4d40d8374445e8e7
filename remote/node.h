// A node of the cluster, reached over SSH or, for "local", directly: the same interface either
// way, so probe/deploy/launch/stream/stop never care which (the local machine is the default
// cluster and needs no setup).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "core/error.h"
#include "remote/host_spec.h"
#include "remote/ssh_session.h"

namespace meshwork::remote {

class Node {
 public:
  virtual ~Node() = default;
  virtual const HostSpec& spec() const = 0;
  std::string name() const { return spec().to_string(); }
  virtual bool is_local() const = 0;
  // The host key fingerprint ("" for the local node).
  virtual std::string fingerprint() const { return {}; }

  // Runs a shell command line (build it with shell_quote.h). An Error means the node could not
  // be reached; a failing command is ExecResult::exit_code != 0.
  virtual Result<ExecResult> exec(const std::string& command,
                                  std::chrono::seconds timeout = std::chrono::seconds(120),
                                  const std::string& stdin_data = {}) = 0;
  // offset > 0: resume a cut upload (SshSession::upload_file).
  virtual Status upload_file(const std::string& local_path, const std::string& remote_path,
                             int mode, const ProgressFn& progress = {}, uint64_t offset = 0) = 0;
  // Writes the local file from byte `offset` on into `remote_path`, whose first `offset` bytes
  // are kept (a resumed upload: the remote file is cut to `offset`, then appended to). Over SSH
  // the bytes are streamed through an exec channel (SshSession::stream_file): the link's rate,
  // unlike SFTP's one write in flight.
  virtual Status append_file(const std::string& local_path, const std::string& remote_path, uint64_t offset,
                             const ProgressFn& progress = {}) = 0;
  // nullopt: the file does not exist (yet); "": nothing past `offset`.
  virtual Result<std::optional<std::string>> read_range(const std::string& path, uint64_t offset,
                                                        size_t max_bytes) = 0;
  // A long-running command whose stdout is read without blocking (the follow stream of
  // `meshtrain tail`): an SSH exec channel, or on the local node a child process's pipe. A node
  // that cannot answers an Error, which tells the follower to use the file path.
  virtual Result<std::unique_ptr<ExecStream>> open_stream(const std::string& command, const std::string& stdin_data) {
    (void)stdin_data;
    return Error{name(), command.substr(0, 60), "streams need an SSH node"};
  }
};

// Connects to `spec` ("local" gives the local node, no SSH).
std::variant<std::unique_ptr<Node>, ConnectError> connect_node(const HostSpec& spec,
                                                              const SshOptions& options);

// The local machine as a node: commands run through /bin/sh -c, files are local files.
std::unique_ptr<Node> make_local_node();

}  // namespace meshwork::remote
