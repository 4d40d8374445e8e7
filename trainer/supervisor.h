// The per-node supervisor (`meshtrain --nproc-per-node N` without RANK in the environment), the
// role torchrun's agent plays. No LibTorch here.
//
// - Spawns the node's N ranks (re-running this executable with torchrun's environment:
//   RANK = node_rank * N + local_rank, ...), each with max(1, cores / N) intra-op threads and
//   its stdout/stderr appended to <run-dir>/rank<r>.log (global rank 0's stdout stays the
//   supervisor's, where the metrics go without --metrics). Ranks die with their supervisor
//   (PR_SET_PDEATHSIG).
// - The supervisor of node 0 hosts the run's TCPStore on --master-port; the ranks and the other
//   supervisors connect to it.
// - If a local rank exits non-zero or is killed, the supervisor writes its exit record
//   (core/exit_record.h: the rank, node, exit code or signal, time and last step) into the
//   store as "meshwork/failed", stops its other ranks (SIGTERM, SIGKILL after 2 s) and exits 3
//   naming the rank ("rank R on node N: <why>" on stderr). Every supervisor polls that key
//   (every 200 ms), so the other nodes stop their ranks too: nobody waits for a collective
//   timeout. A rank that ended without an `end` metrics record gets one from the supervisor.
// - SIGTERM/SIGINT to a supervisor stops the whole run the same way (status "stopped").
// - On success each node sets "meshwork/done/<node>"; node 0 keeps the store up until every
//   node is done.
// - However it ends (ok, a rank failed, another node's failure, stopped), it leaves
//   <run-dir>/exit-node<n>.json, the exit record the follower names the root cause from; a
//   node that ended because of another's failure records that failure.
// Files: <run-dir>/supervisor-node<n>.pid, .log and exit-node<n>.json; ranks write
// rank<r>.pid/.log and metrics-rank<r>.jsonl (global rank numbers, so nodes sharing a
// filesystem never collide).
#pragma once

#include <string>

#include "core/mesh.h"
#include "trainer/options.h"

namespace meshwork::trainer {

// Cores this process may run on (its affinity mask); ranks split them (docs/design.md, "Facts").
int usable_cores();

// Runs the supervisor; returns the process exit code (0 all ranks ok, 3 a rank failed or the
// run was stopped, 1 could not start).
int supervise(const TrainerOptions& options, const MeshShape& shape);

}  // namespace meshwork::trainer
