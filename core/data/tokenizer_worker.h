// The tokenizer worker process (resources/python/meshwork_tokenize.py, run with the bootstrap's
// Python where the reference libraries live) and its frames: see the script's docstring for the
// protocol. One worker per preparation; it reads the inputs itself and streams ids back.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"

namespace meshwork::data {

struct WorkerFrame {
  enum Type : uint32_t { meta = 'M', tokens = 'T', progress = 'P', file_done = 'F', error = 'E' };
  uint32_t type = 0;
  std::vector<uint8_t> payload;
};

// The Python that runs the worker: $MESHWORK_PYTHON, else the one the build was configured with
// (the bootstrap's env), else python3 on PATH.
std::string default_python();
// The worker script: <resource_dir()>/python/meshwork_tokenize.py (core/resource_dir.h: the
// environment, the install tree beside the executable, or the source tree).
std::filesystem::path default_worker_script();

class TokenizerWorker {
 public:
  // Starts `python script args...`; its stderr goes to `stderr_path` (shown when it fails).
  static Result<std::unique_ptr<TokenizerWorker>> start(const std::string& python,
                                                        const std::filesystem::path& script,
                                                        const std::vector<std::string>& args,
                                                        const std::filesystem::path& stderr_path);
  ~TokenizerWorker();  // kills a worker still running

  // The next frame; false at the end of the stream (then call wait()). A read interrupted by a
  // signal while *cancel is set returns Error{"data prepare", "", "cancelled"}.
  Result<bool> next(WorkerFrame& frame, const std::atomic<bool>* cancel = nullptr);
  // Waits for the exit: Ok on status 0, else an error quoting the end of its stderr.
  Status wait();

 private:
  TokenizerWorker() = default;
  bool read_exact(void* dst, size_t n, bool& eof, const std::atomic<bool>* cancel, bool& cancelled);

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string python_;
  std::filesystem::path stderr_path_;
};

}  // namespace meshwork::data
