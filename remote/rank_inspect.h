// A rank's native stack and its last log lines, read on its node: what the workbench's "Fetch
// stack" and the diagnosis show for a culprit. gdb (every thread's backtrace) where the node has
// it, else eu-stack, else what the kernel says without a debugger: the process state, wchan of
// every thread and /proc/PID/stack (root only). The rank is found by the run's launch record
// (its node, run directory) and its pid by the store's ranks, so nothing is guessed.
#pragma once

#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/store/run_store.h"
#include "remote/ssh_session.h"

namespace meshwork::remote {

struct RankInspection {
  int rank = 0;
  int node = 0;
  std::string host;
  int64_t pid = 0;
  std::string tool;      // "gdb", "eu-stack" or "proc"
  std::string stack;     // the tool's output
  std::string log_tail;  // the last lines of rank<r>.log
};

// One SSH command on the rank's node (a local node runs it here). Errors name the rank and why
// (no launch record: a Slurm or imported run; no pid stored yet; the node cannot be reached).
Result<RankInspection> inspect_rank(const std::filesystem::path& db, store::RunId run, int rank,
                                    const SshOptions& ssh, int log_lines = 30);

// The shell command inspect_rank runs (exposed for tests): prints "tool: <name>", the stack, a
// line "--- log ---" and the log tail.
std::string inspect_command(int64_t pid, const std::string& log_path, int log_lines);

}  // namespace meshwork::remote
