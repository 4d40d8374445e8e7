// What every rank of a meshtrain task sets up alike, training (train.cpp) and calibration
// (calibrate.cpp): its files in the run directory (rank<r>.log, metrics-rank<r>.jsonl, rank<r>.pid),
// its intra-op threads and device, its communicators, the common fields of its start record and
// its end record. One RankContext per rank; the task runs inside RankContext::run().
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "core/error.h"
#include "core/mesh.h"
#include "core/metrics.h"
#include "trainer/comm.h"
#include "trainer/metrics_sink.h"
#include "trainer/options.h"

namespace meshwork::trainer {

// Seconds since the Unix epoch: the time field of every record.
double now_unix();

class RankContext {
 public:
  // Opens the rank's log and metrics files (the run directory must exist).
  RankContext(const TrainerOptions& o, const LaunchEnv& env);

  // Runs `task` as this rank: checks the metrics files, writes the pid file, sets the threads
  // (the node's cores split between its ranks, docs/design.md "Facts") and the device, then
  // `task`. An exception out of it ends the run "failed" with its first line (exit code 3).
  // Returns the process exit code: 2 for an unwritable --metrics or no CUDA device, else task's.
  int run(const std::function<int()>& task);

  // Ends the run with `msg` (log, end record and, when tell, rank 0's stderr); returns `code`.
  int fail(int code, const std::string& msg, bool tell = false);
  // The end record: status "ok", "failed" or "stopped", and why.
  void end(const std::string& status, const std::string& reason);

  // This rank's communicator over `shape` (collective: every rank calls it alike), its groups
  // named under `group_prefix`. `first`: the run's first communicator, whose rank 0 hosts the
  // TCPStore unless a supervisor does.
  Result<std::unique_ptr<Communicator>> connect(const MeshShape& shape, bool first,
                                                const std::string& group_prefix = CommOptions{}.group_prefix) const;

  // A start record with what every task reports: rank, time, host, pid, node (in `comm`'s mesh),
  // world and versions (meshtrain, torch, backend, threads). The task adds mesh and config.
  StartRecord start_record(const Communicator& comm) const;

  std::filesystem::path run_file(const std::string& name) const;
  const TrainerOptions& options() const { return o_; }
  const LaunchEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int threads() const { return threads_; }
  bool cuda() const { return device_.is_cuda(); }
  at::Device device() const { return device_; }

 private:
  const TrainerOptions& o_;
  const LaunchEnv& env_;

 public:
  Log log;
  MetricsSink sink;

 private:
  int threads_ = 1;
  at::Device device_ = at::kCPU;
};

}  // namespace meshwork::trainer
