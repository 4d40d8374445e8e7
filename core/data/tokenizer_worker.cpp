#include "core/data/tokenizer_worker.h"
#include "core/resource_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace meshwork::data {

namespace fs = std::filesystem;

std::string default_python() {
  if (const char* p = std::getenv("MESHWORK_PYTHON"); p && *p) return p;
#ifdef MESHWORK_PYTHON
  std::error_code ec;
  if (std::string(MESHWORK_PYTHON).size() > 0 && fs::exists(MESHWORK_PYTHON, ec)) return MESHWORK_PYTHON;
#endif
  return "python3";
}

fs::path default_worker_script() {
  return resource_dir() / "python" / "meshwork_tokenize.py";
}

Result<std::unique_ptr<TokenizerWorker>> TokenizerWorker::start(const std::string& python, const fs::path& script,
                                                                const std::vector<std::string>& args,
                                                                const fs::path& stderr_path) {
  std::error_code ec;
  if (!fs::exists(script, ec))
    return Error{"tokenizer worker", script.string(), "missing (reinstall meshwork: share/meshwork/python)"}.as(ErrorKind::io);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Error{"tokenizer worker", "pipe", std::strerror(errno)}.as(ErrorKind::internal);
  std::vector<std::string> argv_s = {python, "-u", script.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Error{"tokenizer worker", "fork", std::strerror(errno)}.as(ErrorKind::internal);
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    execvp(argv[0], argv.data());
    dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  ::close(fds[1]);
  std::unique_ptr<TokenizerWorker> w(new TokenizerWorker());
  w->pid_ = pid;
  w->fd_ = fds[0];
  w->python_ = python;
  w->stderr_path_ = stderr_path;
  return w;
}

TokenizerWorker::~TokenizerWorker() {
  if (fd_ >= 0) ::close(fd_);
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int st;
    waitpid(pid_, &st, 0);
  }
}

bool TokenizerWorker::read_exact(void* dst, size_t n, bool& eof, const std::atomic<bool>* cancel, bool& cancelled) {
  auto* p = static_cast<uint8_t*>(dst);
  size_t got = 0;
  while (got < n) {
    if (cancel && cancel->load()) {
      cancelled = true;
      return false;
    }
    const ssize_t r = ::read(fd_, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      eof = got == 0;
      return false;
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

Result<bool> TokenizerWorker::next(WorkerFrame& frame, const std::atomic<bool>* cancel) {
  uint32_t header[2];
  bool eof = false, cancelled = false;
  const Error cut{"tokenizer worker", python_, "stopped in the middle of a frame"};
  if (!read_exact(header, sizeof header, eof, cancel, cancelled)) {
    if (cancelled) return Error{"data prepare", "", "cancelled"}.as(ErrorKind::does_not_fit);
    if (eof) return false;
    return cut.as(ErrorKind::internal);
  }
  frame.type = header[0];
  frame.payload.resize(header[1]);
  if (header[1] > 0 && !read_exact(frame.payload.data(), header[1], eof, cancel, cancelled)) {
    if (cancelled) return Error{"data prepare", "", "cancelled"}.as(ErrorKind::does_not_fit);
    return cut.as(ErrorKind::internal);
  }
  return true;
}

Status TokenizerWorker::wait() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  int st = 0;
  waitpid(pid_, &st, 0);
  pid_ = -1;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return Status::Ok();
  std::ifstream in(stderr_path_);
  std::stringstream text;
  text << in.rdbuf();
  std::string tail = text.str();
  if (tail.size() > 2000) tail = "..." + tail.substr(tail.size() - 2000);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  const std::string how = WIFEXITED(st) ? "exited with status " + std::to_string(WEXITSTATUS(st))
                                        : "was killed by signal " + std::to_string(WTERMSIG(st));
  return Error{"tokenizer worker", python_,
               how + (tail.empty() ? std::string() : ":\n" + tail) +
                   "\n(the worker needs the bootstrap's Python with tokenizers and sentencepiece: scripts/bootstrap, or set MESHWORK_PYTHON)"}
      .as(ErrorKind::io);
}

}  // namespace meshwork::data
