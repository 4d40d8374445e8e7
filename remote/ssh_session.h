// One SSH connection to one node (RAII over libssh's ssh_session): connect with the user's
// ssh_config, verify the host key against known_hosts, authenticate, run commands, move files by
// SFTP. A session is used by one thread at a time (an internal mutex enforces it); parallelism
// comes from one session per node (see node.h / probe.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <variant>
#include <string>

#include "core/error.h"
#include "remote/exec_stream.h"
#include "remote/host_spec.h"

namespace meshwork::remote {

// What the caller decides about an unknown host key. Return true to trust (it is then written to
// the known_hosts file); false refuses the connection. `fingerprint` is "SHA256:<base64>".
using HostKeyPrompt = std::function<bool(const std::string& host, const std::string& fingerprint)>;
// Asked only when every key method failed and the server accepts passwords; return nullopt to
// give up. The password is used once and never stored.
using PasswordPrompt = std::function<std::optional<std::string>(const std::string& host)>;

struct SshOptions {
  std::string ssh_config;   // --ssh-config: parse this file instead of ~/.ssh/config
  std::string known_hosts;  // --known-hosts: instead of ~/.ssh/known_hosts
  std::string identity;     // --identity: a private key file tried first
  HostKeyPrompt on_unknown_host_key;  // unset: unknown keys are refused
  PasswordPrompt on_password;         // unset: no password authentication
  std::chrono::seconds connect_timeout{10};
};

// Why a connection failed, so callers can act (the GUI asks about a key, offers a password).
enum class ConnectFailure { none, unreachable, host_key_unknown, host_key_changed, auth, protocol };
std::string_view to_string(ConnectFailure f);

struct ConnectError {
  ConnectFailure kind = ConnectFailure::none;
  Error error;              // field = the host as given, value/allowed = what and how to fix
  std::string fingerprint;  // the server's key, when it was seen
};

struct ExecResult {
  int exit_code = -1;      // the remote command's status; -1 when none was reported (killed)
  std::string out;
  std::string err;
  bool ok() const { return exit_code == 0; }
};

// Bytes done / total of one transfer.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

class SshSession {
 public:
  // Connects and authenticates. On failure returns the reason; never throws.
  static std::variant<std::unique_ptr<SshSession>, ConnectError> connect(const HostSpec& spec,
                                                                         const SshOptions& opts);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  const HostSpec& spec() const { return spec_; }
  const std::string& fingerprint() const { return fingerprint_; }
  // The resolved destination after ssh_config (HostName) and the user logged in as.
  const std::string& resolved_host() const { return resolved_host_; }
  bool connected() const;

  // Runs `command` through the remote user's shell; stdout and stderr captured separately.
  // `stdin_data` is written to the command's stdin, then EOF. An Error means the link failed
  // (not that the command failed: see ExecResult::exit_code).
  Result<ExecResult> exec(const std::string& command, std::chrono::seconds timeout = std::chrono::seconds(120),
                          const std::string& stdin_data = {});

  // SFTP. upload() writes `data` (or the local file) to `remote_path` with `mode`.
  // `offset` > 0 resumes a cut upload: the remote file is kept (not truncated) and written from
  // that byte on with the local file's bytes from the same offset; progress counts from offset.
  Status upload_file(const std::string& local_path, const std::string& remote_path, int mode,
                     const ProgressFn& progress = {}, uint64_t offset = 0);
  // Reads up to max_bytes from `remote_path` starting at `offset`; nullopt when the file does
  // not exist. An empty string means EOF.
  Result<std::optional<std::string>> read_range(const std::string& remote_path, uint64_t offset,
                                                size_t max_bytes);

  // Streams the local file from byte `offset` into the stdin of `command` on the node (an exec
  // channel: the bytes flow under SSH's window, no per-request acknowledgement as with SFTP
  // writes, so it runs at the link's rate). Error: the link failed or the command exited non-zero.
  Status stream_file(const std::string& local_path, uint64_t offset, const std::string& command,
                     const ProgressFn& progress = {});

  // Starts `command` on an exec channel of its own, writes `stdin_data` to it (then EOF) and
  // returns its stdout as a non-blocking stream (exec_stream.h). The stream uses this connection:
  // the session must outlive it, and while it is read no other call should use the session
  // from another thread (the follower keeps one session per stream).
  Result<std::unique_ptr<ExecStream>> open_stream(const std::string& command, const std::string& stdin_data);

 private:
  friend class SshExecStream;  // reads its channel under mu_ (ssh_session.cpp)
  SshSession() = default;
  Status ensure_sftp();
  Error link_error(const std::string& what) const;

  HostSpec spec_;
  std::string fingerprint_;
  std::string resolved_host_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::mutex mu_;
};

// The SHA256 fingerprint ("SHA256:...") of an OpenSSH public key file's key, for tests and for
// showing the user what a node's key should be.
Result<std::string> public_key_file_fingerprint(const std::string& path);

}  // namespace meshwork::remote
