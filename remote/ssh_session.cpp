#include "remote/ssh_session.h"

#include "core/shell_quote.h"

#include <fcntl.h>
#include <libssh/libssh.h>
#include <libssh/sftp.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace meshwork::remote {

std::string_view to_string(ConnectFailure f) {
  switch (f) {
    case ConnectFailure::none: return "none";
    case ConnectFailure::unreachable: return "unreachable";
    case ConnectFailure::host_key_unknown: return "host_key_unknown";
    case ConnectFailure::host_key_changed: return "host_key_changed";
    case ConnectFailure::auth: return "auth";
    case ConnectFailure::protocol: return "protocol";
  }
  return "?";
}

struct SshSession::Impl {
  ssh_session s = nullptr;
  sftp_session sftp = nullptr;
  ~Impl() {
    if (sftp) sftp_free(sftp);
    if (s) {
      if (ssh_is_connected(s)) ssh_disconnect(s);
      ssh_free(s);
    }
  }
};

namespace {

void init_libssh_once() {
  static std::once_flag once;
  std::call_once(once, [] { ssh_init(); });
}

std::string key_fingerprint(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t len = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) != SSH_OK) return "";
  char* fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
  std::string out = fp ? fp : "";
  ssh_string_free_char(fp);
  ssh_clean_pubkey_hash(&hash);
  return out;
}

// A channel that is closed and freed when its owner goes out of scope (every return path).
struct ChannelCloser {
  void operator()(ssh_channel ch) const {
    ssh_channel_close(ch);
    ssh_channel_free(ch);
  }
};
using OwnedChannel = std::unique_ptr<std::remove_pointer_t<ssh_channel>, ChannelCloser>;

// Opens a session on `ch` and starts `command` there. Returns the step that failed ("open
// channel", "exec") for the caller's link error, or nullptr when the command runs.
const char* start_exec(ssh_channel ch, const std::string& command) {
  if (ssh_channel_open_session(ch) != SSH_OK) return "open channel";
  if (ssh_channel_request_exec(ch, command.c_str()) != SSH_OK) return "exec";
  return nullptr;
}

}  // namespace

std::variant<std::unique_ptr<SshSession>, ConnectError> SshSession::connect(const HostSpec& spec,
                                                                          const SshOptions& opts) {
  init_libssh_once();
  const std::string who = spec.to_string();
  auto fail = [&](ConnectFailure kind, std::string value, std::string allowed,
                  std::string fp = {}) -> ConnectError {
    return ConnectError{kind, Error{who, std::move(value), std::move(allowed)}, std::move(fp)};
  };
  std::unique_ptr<SshSession> self(new SshSession());
  self->spec_ = spec;
  self->impl_ = std::make_unique<Impl>();
  ssh_session s = ssh_new();
  if (!s) return fail(ConnectFailure::protocol, "ssh_new", "libssh could not allocate a session");
  self->impl_->s = s;

  // Host first (an alias), then the config file (HostName/User/Port/IdentityFile/ProxyJump for
  // that alias), then what the user typed explicitly, which wins over the config as in ssh(1).
  ssh_options_set(s, SSH_OPTIONS_HOST, spec.host.c_str());
  const char* config = opts.ssh_config.empty() ? nullptr : opts.ssh_config.c_str();
  if (ssh_options_parse_config(s, config) != SSH_OK) {
    return fail(ConnectFailure::protocol, opts.ssh_config.empty() ? "~/.ssh/config" : opts.ssh_config,
                std::string("could not parse the ssh config: ") + ssh_get_error(s));
  }
  // ProxyJump: libssh turns it into the ProxyCommand `ssh [-l U] [-p P] [-J MORE] -W '[%h]:%p'
  // JUMP`, run by OpenSSH's client, which would read the user's own ~/.ssh files, not ours. Give
  // that client the same --ssh-config, --known-hosts and --identity (and no prompts: a jump host
  // whose key is not already trusted is refused, like a changed one) so a jump is checked the
  // way a direct connection is.
  char* proxy = nullptr;
  if (ssh_options_get(s, SSH_OPTIONS_PROXYCOMMAND, &proxy) == SSH_OK && proxy) {
    std::string cmd = proxy;
    ssh_string_free_char(proxy);
    if (cmd.rfind("ssh ", 0) == 0 && cmd.find(" -W ") != std::string::npos) {
      // libssh expands %h/%p/%% in the command: escape '%' in our paths.
      auto arg = [](const std::string& v) {
        std::string q = shell_quote(v), out;
        for (char c : q) out += c == '%' ? std::string("%%") : std::string(1, c);
        return out;
      };
      std::string ours = "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes";
      if (!opts.ssh_config.empty()) ours += " -F " + arg(opts.ssh_config);
      if (!opts.known_hosts.empty()) ours += " -o UserKnownHostsFile=" + arg(opts.known_hosts);
      if (!opts.identity.empty()) ours += " -i " + arg(opts.identity);
      cmd = ours + cmd.substr(3);
      ssh_options_set(s, SSH_OPTIONS_PROXYCOMMAND, cmd.c_str());
    }
  }
  if (!spec.user.empty()) ssh_options_set(s, SSH_OPTIONS_USER, spec.user.c_str());
  if (spec.port != 0) {
    unsigned int port = static_cast<unsigned int>(spec.port);
    ssh_options_set(s, SSH_OPTIONS_PORT, &port);
  }
  if (!opts.known_hosts.empty()) ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, opts.known_hosts.c_str());
  if (!opts.identity.empty()) ssh_options_set(s, SSH_OPTIONS_ADD_IDENTITY, opts.identity.c_str());
  // Without TCP_NODELAY, SFTP's request/response turns wait on Nagle: 1 MiB took 925 ms, not 12.
  int nodelay = 1;
  ssh_options_set(s, SSH_OPTIONS_NODELAY, &nodelay);
  long timeout = static_cast<long>(opts.connect_timeout.count());
  ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &timeout);
  char* resolved = nullptr;
  if (ssh_options_get(s, SSH_OPTIONS_HOST, &resolved) == SSH_OK && resolved) {
    self->resolved_host_ = resolved;
    ssh_string_free_char(resolved);
  }

  if (ssh_connect(s) != SSH_OK) {
    return fail(ConnectFailure::unreachable, self->resolved_host_,
                std::string("could not connect: ") + ssh_get_error(s));
  }

  // Host key: trust on first use only with the caller's explicit consent; a changed key is
  // always refused (it is what a man in the middle looks like).
  ssh_key server_key = nullptr;
  if (ssh_get_server_publickey(s, &server_key) != SSH_OK) {
    return fail(ConnectFailure::protocol, "host key", ssh_get_error(s));
  }
  self->fingerprint_ = key_fingerprint(server_key);
  ssh_key_free(server_key);
  const std::string known_file = opts.known_hosts.empty() ? "~/.ssh/known_hosts" : opts.known_hosts;
  switch (ssh_session_is_known_server(s)) {
    case SSH_KNOWN_HOSTS_OK:
      break;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER:
      return fail(ConnectFailure::host_key_changed, "host key " + self->fingerprint_,
                  "differs from the key recorded in " + known_file +
                      "; refused (possible man-in-the-middle). If the node was reinstalled, "
                      "remove its old entry (ssh-keygen -R HOST -f " + known_file + ") and connect again",
                  self->fingerprint_);
    case SSH_KNOWN_HOSTS_NOT_FOUND:
    case SSH_KNOWN_HOSTS_UNKNOWN: {
      const bool accepted = opts.on_unknown_host_key && opts.on_unknown_host_key(who, self->fingerprint_);
      if (!accepted) {
        return fail(ConnectFailure::host_key_unknown, "host key " + self->fingerprint_,
                    "is not in " + known_file +
                        "; accept this fingerprint explicitly (--accept-new-host-keys, or in the "
                        "workbench) after checking it",
                    self->fingerprint_);
      }
      if (ssh_session_update_known_hosts(s) != SSH_OK) {
        return fail(ConnectFailure::protocol, known_file,
                    std::string("could not record the host key: ") + ssh_get_error(s),
                    self->fingerprint_);
      }
      break;
    }
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      return fail(ConnectFailure::protocol, known_file,
                  std::string("could not check the host key: ") + ssh_get_error(s), self->fingerprint_);
  }

  // Authentication: agent and key files (ssh_config IdentityFile, --identity, the defaults),
  // then a password only if the caller can ask a person for one.
  int rc = ssh_userauth_none(s, nullptr);
  if (rc != SSH_AUTH_SUCCESS) rc = ssh_userauth_publickey_auto(s, nullptr, nullptr);
  if (rc != SSH_AUTH_SUCCESS && opts.on_password &&
      (ssh_userauth_list(s, nullptr) & SSH_AUTH_METHOD_PASSWORD)) {
    if (auto pw = opts.on_password(who)) {
      rc = ssh_userauth_password(s, nullptr, pw->c_str());
      std::fill(pw->begin(), pw->end(), '\0');
    }
  }
  if (rc != SSH_AUTH_SUCCESS) {
    return fail(ConnectFailure::auth, "authentication",
                "no key was accepted (tried ssh-agent, IdentityFile, --identity and ~/.ssh/id_*); "
                "add your public key to the node's authorized_keys or pass --identity FILE",
                self->fingerprint_);
  }
  return self;
}

SshSession::~SshSession() = default;

bool SshSession::connected() const { return impl_ && impl_->s && ssh_is_connected(impl_->s); }

Error SshSession::link_error(const std::string& what) const {
  return Error{spec_.to_string(), what, std::string("SSH link failed: ") + ssh_get_error(impl_->s)};
}

Result<ExecResult> SshSession::exec(const std::string& command, std::chrono::seconds timeout,
                                    const std::string& stdin_data) {
  std::lock_guard lock(mu_);
  OwnedChannel owned(ssh_channel_new(impl_->s));
  if (!owned) return link_error("channel");
  if (const char* failed = start_exec(owned.get(), command)) return link_error(failed);
  ssh_channel ch = owned.get();
  if (!stdin_data.empty() &&
      ssh_channel_write(ch, stdin_data.data(), static_cast<uint32_t>(stdin_data.size())) < 0) {
    return link_error("stdin");
  }
  ssh_channel_send_eof(ch);
  ExecResult r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<char> buf(64 * 1024);
  while (true) {
    int n = ssh_channel_read_timeout(ch, buf.data(), static_cast<uint32_t>(buf.size()), 0, 100);
    if (n == SSH_ERROR) return link_error("read");
    if (n > 0) r.out.append(buf.data(), static_cast<size_t>(n));
    int m = ssh_channel_read_nonblocking(ch, buf.data(), static_cast<uint32_t>(buf.size()), 1);
    if (m == SSH_ERROR) return link_error("read stderr");
    if (m > 0) r.err.append(buf.data(), static_cast<size_t>(m));
    if (n <= 0 && m <= 0 && ssh_channel_is_eof(ch)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      return Error{spec_.to_string(), command.substr(0, 120),
                   "did not finish within " + std::to_string(timeout.count()) + " s"};
    }
  }
  r.exit_code = ssh_channel_get_exit_status(ch);
  return r;
}

Status SshSession::stream_file(const std::string& local_path, uint64_t offset, const std::string& command,
                               const ProgressFn& progress) {
  std::lock_guard lock(mu_);
  std::ifstream in(local_path, std::ios::binary);
  if (!in) return Error{"deploy", local_path, "must be a readable local file"};
  in.seekg(0, std::ios::end);
  const uint64_t total = static_cast<uint64_t>(in.tellg());
  if (offset > total) return Error{"deploy", local_path, "stream offset past the end of the file"};
  in.seekg(static_cast<std::streamoff>(offset));
  OwnedChannel owned(ssh_channel_new(impl_->s));
  if (!owned) return link_error("channel");
  if (const char* failed = start_exec(owned.get(), command)) return link_error(failed);
  ssh_channel ch = owned.get();
  std::vector<char> buf(256 * 1024);
  uint64_t done = offset;
  while (done < total) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(std::max<std::streamsize>(0, in.gcount()));
    if (n == 0) break;
    for (size_t sent = 0; sent < n;) {
      const int w = ssh_channel_write(ch, buf.data() + sent, static_cast<uint32_t>(n - sent));
      if (w <= 0) return link_error("write");
      sent += static_cast<size_t>(w);
    }
    done += n;
    if (progress) progress(done, total);
  }
  ssh_channel_send_eof(ch);
  std::string err;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!ssh_channel_is_eof(ch)) {
    int n = ssh_channel_read_timeout(ch, buf.data(), static_cast<uint32_t>(buf.size()), 1, 100);
    if (n == SSH_ERROR) return link_error("read");
    if (n > 0 && err.size() < 4096) err.append(buf.data(), static_cast<size_t>(n));
    if (ssh_channel_read_nonblocking(ch, buf.data(), static_cast<uint32_t>(buf.size()), 0) == SSH_ERROR) {
      return link_error("read");
    }
    if (std::chrono::steady_clock::now() > deadline) return link_error("wait for " + command.substr(0, 60));
  }
  const int status = ssh_channel_get_exit_status(ch);
  if (status != 0) {
    return Error{spec_.to_string(), command.substr(0, 120), "failed (exit " + std::to_string(status) + "): " + err};
  }
  return {};
}

// The exec channel of a follow stream. Reads take the session's mutex, as every other call does.
// libssh's non-blocking read processes what the socket has (ssh_channel_poll) whenever the
// channel's buffer is empty, so reading stdout until it answers 0 leaves both the socket and the
// buffer empty: the caller's poll() on the socket then wakes for the next byte.
class SshExecStream final : public ExecStream {
 public:
  SshExecStream(SshSession& session, ssh_channel ch) : session_(session), ch_(ch) {}
  ~SshExecStream() override {
    std::lock_guard lock(session_.mu_);
    if (ssh_channel_is_open(ch_)) ssh_channel_close(ch_);
    ssh_channel_free(ch_);
  }
  int poll_fd() const override { return ssh_get_fd(session_.impl_->s); }
  Result<size_t> read_some(std::string& out) override {
    std::lock_guard lock(session_.mu_);
    char buf[64 * 1024];
    // stderr first: each read that finds its buffer empty pulls whatever the socket has into
    // libssh's buffers, so stdout must be read last or its bytes could wait there unseen by
    // poll() (keep the first few KiB of stderr: an old meshtrain's "unknown" message).
    while (true) {
      const int n = ssh_channel_read_nonblocking(ch_, buf, sizeof buf, 1);
      if (n == SSH_ERROR) return session_.link_error("read stream stderr");
      if (n <= 0) break;
      if (err_.size() < 4096) err_.append(buf, static_cast<size_t>(std::min<int>(n, 4096)));
    }
    size_t total = 0;
    while (true) {
      const int n = ssh_channel_read_nonblocking(ch_, buf, sizeof buf, 0);
      if (n == SSH_ERROR) return session_.link_error("read stream");
      if (n <= 0) break;  // 0: nothing now; SSH_EOF: the command's stdout ended
      out.append(buf, static_cast<size_t>(n));
      total += static_cast<size_t>(n);
    }
    return total;
  }
  bool at_eof() override {
    std::lock_guard lock(session_.mu_);
    return ssh_channel_is_eof(ch_) != 0 || ssh_channel_is_closed(ch_) != 0;
  }
  int exit_status() override {
    std::lock_guard lock(session_.mu_);
    return ssh_channel_get_exit_status(ch_);
  }
  std::string stderr_text() const override { return err_; }

 private:
  SshSession& session_;
  ssh_channel ch_;
  std::string err_;
};

Result<std::unique_ptr<ExecStream>> SshSession::open_stream(const std::string& command,
                                                            const std::string& stdin_data) {
  std::unique_lock lock(mu_);
  ssh_channel ch = ssh_channel_new(impl_->s);
  if (!ch) return link_error("channel");
  auto fail = [&](const std::string& what) -> Error {
    Error e = link_error(what);
    ssh_channel_free(ch);
    return e;
  };
  if (const char* failed = start_exec(ch, command)) return fail(failed);
  for (size_t sent = 0; sent < stdin_data.size();) {
    const int w = ssh_channel_write(ch, stdin_data.data() + sent, static_cast<uint32_t>(stdin_data.size() - sent));
    if (w <= 0) return fail("stdin");
    sent += static_cast<size_t>(w);
  }
  ssh_channel_send_eof(ch);
  lock.unlock();
  return std::unique_ptr<ExecStream>(std::make_unique<SshExecStream>(*this, ch));
}

Status SshSession::ensure_sftp() {
  if (impl_->sftp) return {};
  sftp_session sftp = sftp_new(impl_->s);
  if (!sftp) return link_error("sftp");
  if (sftp_init(sftp) != SSH_OK) {
    sftp_free(sftp);
    return link_error("sftp init (is the sftp subsystem enabled in sshd_config?)");
  }
  impl_->sftp = sftp;
  return {};
}

Status SshSession::upload_file(const std::string& local_path, const std::string& remote_path,
                               int mode, const ProgressFn& progress, uint64_t offset) {
  std::lock_guard lock(mu_);
  if (auto st = ensure_sftp(); !st) return st;
  std::ifstream in(local_path, std::ios::binary);
  if (!in) return Error{"deploy", local_path, "must be a readable local file"};
  in.seekg(0, std::ios::end);
  const uint64_t total = static_cast<uint64_t>(in.tellg());
  if (offset > total) return Error{"deploy", remote_path, "resume offset past the end of " + local_path};
  in.seekg(static_cast<std::streamoff>(offset));
  sftp_file f = sftp_open(impl_->sftp, remote_path.c_str(), O_WRONLY | O_CREAT | (offset == 0 ? O_TRUNC : 0),
                          static_cast<mode_t>(mode));
  if (!f) return Error{spec_.to_string(), remote_path, std::string("could not create: ") + ssh_get_error(impl_->s)};
  if (offset > 0 && sftp_seek64(f, offset) != 0) {
    sftp_close(f);
    return link_error("seek " + remote_path);
  }
  // Each SFTP write waits for its acknowledgement (libssh 0.10 has no pipelined writes), so the
  // request size sets the rate: 255 KiB requests, OpenSSH's largest (limits@openssh.com
  // max-write-length 261120; libssh caps a write at the server's limit and returns what it wrote,
  // so a server with a smaller limit gets several writes per chunk). Large files that must move
  // at the link's rate go through stream_file() instead (the runtime bundle).
  std::vector<char> buf(255 * 1024);
  uint64_t done = offset;
  Status result;
  while (done < total && result) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(std::max<std::streamsize>(0, in.gcount()));
    if (n == 0) break;
    for (size_t sent = 0; sent < n;) {
      const ssize_t w = sftp_write(f, buf.data() + sent, n - sent);
      if (w <= 0) {
        result = Error{spec_.to_string(), remote_path, std::string("write failed: ") + ssh_get_error(impl_->s)};
        break;
      }
      sent += static_cast<size_t>(w);
      done += static_cast<uint64_t>(w);
    }
    if (result && progress) progress(done, total);
  }
  sftp_close(f);
  if (result && sftp_chmod(impl_->sftp, remote_path.c_str(), static_cast<mode_t>(mode)) != SSH_OK) {
    result = Error{spec_.to_string(), remote_path, "could not set the file mode"};
  }
  return result;
}

Result<std::optional<std::string>> SshSession::read_range(const std::string& remote_path,
                                                          uint64_t offset, size_t max_bytes) {
  std::lock_guard lock(mu_);
  if (auto st = ensure_sftp(); !st) return st.error();
  sftp_file f = sftp_open(impl_->sftp, remote_path.c_str(), O_RDONLY, 0);
  if (!f) {
    if (sftp_get_error(impl_->sftp) == SSH_FX_NO_SUCH_FILE) return std::optional<std::string>();
    return link_error("open " + remote_path);
  }
  std::string out;
  if (sftp_seek64(f, offset) != 0) {
    sftp_close(f);
    return link_error("seek " + remote_path);
  }
  std::vector<char> buf(64 * 1024);
  while (out.size() < max_bytes) {
    const size_t want = std::min(buf.size(), max_bytes - out.size());
    ssize_t n = sftp_read(f, buf.data(), want);
    if (n < 0) {
      sftp_close(f);
      return link_error("read " + remote_path);
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  sftp_close(f);
  return std::optional<std::string>(std::move(out));
}

Result<std::string> public_key_file_fingerprint(const std::string& path) {
  init_libssh_once();
  ssh_key key = nullptr;
  if (ssh_pki_import_pubkey_file(path.c_str(), &key) != SSH_OK) {
    return Error{"public key", path, "must be an OpenSSH public key file"};
  }
  std::string fp = key_fingerprint(key);
  ssh_key_free(key);
  return fp;
}

}  // namespace meshwork::remote
