// Running the real `meshwork` CLI from the end-to-end tests (cluster, Slurm, bundle): to
// completion, or in the background to be stopped or killed; and watching processes through
// /proc (the test nodes share one PID namespace, so a test sees every node's processes).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "core/shell_quote.h"
#include "test_util.h"

namespace meshwork::remote::test {

struct Cli {
  int code = -1;
  std::string out, err;
};

// Runs `meshwork ARGS...` to completion; stdout/stderr kept in tmp/cli.{out,err}.
inline Cli run_cli(const std::vector<std::string>& args, const std::filesystem::path& tmp) {
  std::vector<std::string> argv = {std::string(MESHWORK_BIN_DIR) + "/meshwork"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string cmd = shell_join(argv) + " > " + shell_quote((tmp / "cli.out").string()) + " 2> " +
                          shell_quote((tmp / "cli.err").string());
  Cli r;
  const int st = std::system(cmd.c_str());
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = read_text(tmp / "cli.out");
  r.err = read_text(tmp / "cli.err");
  return r;
}

// Starts `meshwork ARGS...` in the background; stdout/stderr to tmp/bg.{out,err}. Returns its pid.
inline pid_t spawn_cli(const std::vector<std::string>& args, const std::filesystem::path& tmp) {
  std::vector<std::string> argv = {std::string(MESHWORK_BIN_DIR) + "/meshwork"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string cmd = "exec " + shell_join(argv) + " > " + shell_quote((tmp / "bg.out").string()) + " 2> " +
                          shell_quote((tmp / "bg.err").string());
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

inline int wait_exit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Alive: /proc has it and it is not a zombie.
inline bool alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Polls pred every 100 ms until it holds or `limit` passes (an upper bound on waiting, never a
// measurement: the test asserts what pred saw).
template <class Pred>
bool wait_for(Pred pred, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return pred();
}

// The CLI's per-node bundle progress lines for `host` ("meshwork: bundle HOST: uploading 45.2 MiB
// of 103.5 MiB (43%), 120.3 MiB/s, ETA 0 s"), parsed. The last report of an upload is always printed
// (the CLI drops at most the lines in between), so a whole upload gives at least that one, at 100%.
struct BundleProgressLine {
  double done_mib = 0, total_mib = 0, rate_mib_s = 0;
  int percent = 0;
  long eta_s = -1;
};
inline std::vector<BundleProgressLine> bundle_progress_lines(const std::string& err, const std::string& host) {
  std::vector<BundleProgressLine> out;
  const std::regex line("meshwork: bundle " + host +
                        R"(: uploading ([0-9]+\.[0-9]) MiB of ([0-9]+\.[0-9]) MiB \(([0-9]+)%\), ([0-9]+\.[0-9]) MiB/s, ETA ([0-9]+) s)");
  for (std::sregex_iterator it(err.begin(), err.end(), line), end; it != end; ++it) {
    const std::smatch& m = *it;
    out.push_back({std::stod(m[1]), std::stod(m[2]), std::stod(m[4]), std::stoi(m[3]), std::stol(m[5])});
  }
  return out;
}

}  // namespace meshwork::remote::test
