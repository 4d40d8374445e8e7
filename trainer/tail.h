// `meshtrain tail`: the node side of following a run. One process per node (or per
// shared run directory, on Slurm) reads every rank's metrics file past the offsets the workbench
// sends on stdin and writes the new complete lines, the node's exit and a heartbeat on stdout
// in the follow stream format (core/follow_stream.h). The workbench reads that stdout through one
// SSH exec channel: one channel per node, not an SFTP round trip per file per poll. No LibTorch
// here: meshtrain is already on every node, so the tail ships with it.
//
//   meshtrain tail [--dir DIR] [--poll-ms 250] [--heartbeat-ms 2000] [--no-liveness]
//                  [--restarts] [--chunk-bytes 4194304] [--stall-ms 3000]
//
// --dir: the run directory (default "."). --no-liveness: do not look at the nodes' processes
// (Slurm: the batch system says whether a job runs; its processes are on other machines).
// --restarts: report new lines of node<i>.restarts (R frames). --stall-ms: a rank whose flight
// record (flight-rank<r>.bin, core/flight_record.h) has not changed this long is reported in an
// S frame with its process state (running, stopped, zombie, gone), again when that state
// changes, and once more when the record moves again. The tail ends after every node
// it serves has ended (E frame, exit 0), and when its stdout is closed (the workbench went
// away: SIGPIPE).
#pragma once

#include <string>
#include <vector>

namespace meshwork::trainer {

int tail_main(const std::vector<std::string>& args);

}  // namespace meshwork::trainer
