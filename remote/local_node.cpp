// The local machine as a node: fork + /bin/sh -c, pipes read with poll(), plain file I/O.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "remote/exec_stream.h"
#include "remote/node.h"
#include "core/shell_quote.h"

namespace meshwork::remote {

namespace {

// A command's stdout as a non-blocking pipe (the follow stream of a local `meshtrain tail`, as
// SshExecStream is over SSH). The command runs in a process group of its own, ended (SIGTERM,
// then reaped) when the stream is dropped; stdin gets `stdin_data`, then EOF.
class LocalExecStream final : public ExecStream {
 public:
  static Result<std::unique_ptr<ExecStream>> start(const std::string& command, const std::string& stdin_data) {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0) return Error{"local", "pipe", std::strerror(errno)};
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(in[0]);
      close(in[1]);
      return Error{"local", "pipe", std::strerror(errno)};
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
      for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
      return Error{"local", "pipe", std::strerror(errno)};
    }
    const pid_t pid = fork();
    if (pid < 0) {
      for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
      return Error{"local", "fork", std::strerror(errno)};
    }
    if (pid == 0) {
      setpgid(0, 0);
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(pid, pid);  // as the child does: whichever runs first
    close(in[0]);
    close(out[1]);
    close(err[1]);
    struct sigaction ign {}, old {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old);
    for (size_t off = 0; off < stdin_data.size();) {
      const ssize_t n = write(in[1], stdin_data.data() + off, stdin_data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    sigaction(SIGPIPE, &old, nullptr);
    close(in[1]);
    fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
    fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);
    return std::unique_ptr<ExecStream>(new LocalExecStream(pid, out[0], err[0]));
  }

  ~LocalExecStream() override {
    close(out_);
    close(err_);
    if (!reaped_) {
      kill(-pid_, SIGTERM);
      reap(0);
    }
  }

  int poll_fd() const override { return out_; }

  Result<size_t> read_some(std::string& out) override {
    drain_stderr();
    size_t got = 0;
    char buf[65536];
    while (!eof_) {
      const ssize_t n = read(out_, buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
        got += static_cast<size_t>(n);
      } else if (n == 0) {
        eof_ = true;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        break;
      } else {
        return Error{"local", "stream", std::strerror(errno)}.as(ErrorKind::remote);
      }
    }
    return got;
  }

  bool at_eof() override { return eof_; }

  int exit_status() override {
    if (!eof_) return -1;
    reap(0);
    return status_;
  }

  std::string stderr_text() const override { return stderr_; }

 private:
  LocalExecStream(pid_t pid, int out, int err) : pid_(pid), out_(out), err_(err) {}

  void drain_stderr() {
    char buf[4096];
    ssize_t n;
    while ((n = read(err_, buf, sizeof buf)) > 0)
      if (stderr_.size() < 8192) stderr_.append(buf, static_cast<size_t>(std::min<ssize_t>(n, 8192 - static_cast<ssize_t>(stderr_.size()))));
  }

  void reap(int flags) {
    if (reaped_) return;
    int status = 0;
    pid_t r;
    while ((r = waitpid(pid_, &status, flags)) < 0 && errno == EINTR) {
    }
    if (r != pid_) return;
    reaped_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  pid_t pid_;
  int out_;
  int err_;
  bool eof_ = false;
  bool reaped_ = false;
  int status_ = -1;
  std::string stderr_;
};

class LocalNode final : public Node {
 public:
  LocalNode() { spec_.host = "local"; }
  const HostSpec& spec() const override { return spec_; }
  bool is_local() const override { return true; }

  Result<ExecResult> exec(const std::string& command, std::chrono::seconds timeout,
                          const std::string& stdin_data) override {
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      return Error{"local", "pipe", std::strerror(errno)};
    }
    const pid_t pid = fork();
    if (pid < 0) return Error{"local", "fork", std::strerror(errno)};
    if (pid == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(err[1], 2);
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    close(err[1]);
    // stdin is small (a script or nothing): write it, then EOF. SIGPIPE would kill us if the
    // command does not read it, so ignore it for the write.
    if (!stdin_data.empty()) {
      struct sigaction ign {}, old {};
      ign.sa_handler = SIG_IGN;
      sigaction(SIGPIPE, &ign, &old);
      size_t off = 0;
      while (off < stdin_data.size()) {
        ssize_t n = write(in[1], stdin_data.data() + off, stdin_data.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      sigaction(SIGPIPE, &old, nullptr);
    }
    close(in[1]);
    ExecResult r;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[65536];
    bool timed_out = false;
    while (open_fds > 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        timed_out = true;
        break;
      }
      if (poll(fds, 2, 100) < 0 && errno != EINTR) break;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = read(fds[i].fd, buf, sizeof buf);
        if (n > 0) {
          (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
        } else {
          close(fds[i].fd);
          fds[i].fd = -1;
          --open_fds;
        }
      }
    }
    for (auto& f : fds) {
      if (f.fd >= 0) close(f.fd);
    }
    if (timed_out) kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
      return Error{"local", command.substr(0, 120),
                   "did not finish within " + std::to_string(timeout.count()) + " s"};
    }
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  }

  Status upload_file(const std::string& local_path, const std::string& remote_path, int mode,
                     const ProgressFn& progress, uint64_t /*offset: a local copy is never cut*/) override {
    std::error_code ec;
    const uint64_t total = std::filesystem::file_size(local_path, ec);
    if (ec) return Error{"deploy", local_path, "must be a readable local file"};
    std::filesystem::copy_file(local_path, remote_path,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) return Error{"local", remote_path, "could not write: " + ec.message()};
    if (chmod(remote_path.c_str(), static_cast<mode_t>(mode)) != 0) {
      return Error{"local", remote_path, "could not set the file mode"};
    }
    if (progress) progress(total, total);
    return {};
  }

  Status append_file(const std::string& local_path, const std::string& remote_path, uint64_t offset,
                     const ProgressFn& progress) override {
    std::ifstream in(local_path, std::ios::binary);
    if (!in) return Error{"deploy", local_path, "must be a readable local file"};
    in.seekg(0, std::ios::end);
    const uint64_t total = static_cast<uint64_t>(in.tellg());
    if (offset > total) return Error{"deploy", local_path, "offset past the end of the file"};
    std::error_code ec;
    if (offset == 0) {
      std::ofstream(remote_path, std::ios::binary | std::ios::trunc);
    } else {
      std::filesystem::resize_file(remote_path, offset, ec);
      if (ec) return Error{"local", remote_path, "could not be cut to " + std::to_string(offset) + " bytes: " + ec.message()};
    }
    std::ofstream out(remote_path, std::ios::binary | std::ios::app);
    if (!out) return Error{"local", remote_path, "could not be written"};
    in.seekg(static_cast<std::streamoff>(offset));
    out << in.rdbuf();
    if (!out) return Error{"local", remote_path, "could not be written"};
    if (progress) progress(total, total);
    return {};
  }

  Result<std::optional<std::string>> read_range(const std::string& path, uint64_t offset,
                                                size_t max_bytes) override {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) return std::optional<std::string>();
      return Error{"local", path, "could not be read"};
    }
    in.seekg(static_cast<std::streamoff>(offset));
    std::string out(max_bytes, '\0');
    in.read(out.data(), static_cast<std::streamsize>(max_bytes));
    out.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
    return std::optional<std::string>(std::move(out));
  }

  Result<std::unique_ptr<ExecStream>> open_stream(const std::string& command, const std::string& stdin_data) override {
    return LocalExecStream::start(command, stdin_data);
  }

 private:
  HostSpec spec_;
};

class SshNode final : public Node {
 public:
  explicit SshNode(std::unique_ptr<SshSession> s) : s_(std::move(s)) {}
  const HostSpec& spec() const override { return s_->spec(); }
  bool is_local() const override { return false; }
  std::string fingerprint() const override { return s_->fingerprint(); }
  Result<ExecResult> exec(const std::string& command, std::chrono::seconds timeout,
                          const std::string& stdin_data) override {
    return s_->exec(command, timeout, stdin_data);
  }
  Status upload_file(const std::string& local_path, const std::string& remote_path, int mode,
                     const ProgressFn& progress, uint64_t offset) override {
    return s_->upload_file(local_path, remote_path, mode, progress, offset);
  }
  Status append_file(const std::string& local_path, const std::string& remote_path, uint64_t offset,
                     const ProgressFn& progress) override {
    // umask 077: the part is private, as SFTP creates it (0600).
    const std::string q = shell_quote(remote_path);
    const std::string cmd = offset == 0 ? "umask 077 && cat > " + q
                                        : "truncate -s " + std::to_string(offset) + " -- " + q + " && cat >> " + q;
    return s_->stream_file(local_path, offset, cmd, progress);
  }

  Result<std::optional<std::string>> read_range(const std::string& path, uint64_t offset,
                                                size_t max_bytes) override {
    return s_->read_range(path, offset, max_bytes);
  }
  Result<std::unique_ptr<ExecStream>> open_stream(const std::string& command, const std::string& stdin_data) override {
    return s_->open_stream(command, stdin_data);
  }

 private:
  std::unique_ptr<SshSession> s_;
};

}  // namespace

std::unique_ptr<Node> make_local_node() { return std::make_unique<LocalNode>(); }

std::variant<std::unique_ptr<Node>, ConnectError> connect_node(const HostSpec& spec,
                                                              const SshOptions& options) {
  if (spec.is_local()) return make_local_node();
  auto r = SshSession::connect(spec, options);
  if (auto* err = std::get_if<ConnectError>(&r)) return *err;
  return std::unique_ptr<Node>(std::make_unique<SshNode>(std::move(std::get<0>(r))));
}

}  // namespace meshwork::remote
