// Slurm's outputs, read defensively. Slurm's text formats are stable across versions; its JSON
// (squeue --json, sinfo --json) changed shape between 22.05, 23.11 and 24.11 (e.g. `job_state`
// a string, then a list of strings; numbers became {"set", "infinite", "number"} objects).
// Every parser here takes what it knows, ignores what it does not (a new field is never an
// error), and fails only when the output is not Slurm's at all. Tested on outputs recorded from
// the real daemons (tests/data/slurm/).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace meshwork::remote {

// GPUs of one node from a GRES string: "gpu:8", "gpu:h100:8", "gpu:a100:4(S:0-1)",
// "gpu:h100:4,nic:2", "(null)". Types of several gpu entries are joined with "+".
struct SlurmGpus {
  int count = 0;
  std::string type;  // "" when the GRES names none
};
SlurmGpus parse_gres_gpus(const std::string& gres);

// One partition as sinfo reports it. sinfo prints one line per (partition, node state), so a
// partition's lines are summed here.
struct SlurmPartition {
  std::string name;
  bool is_default = false;                // sinfo marks it with '*'
  bool up = true;                         // AVAIL "up"
  std::string time_limit;                 // as Slurm writes it: "10:00", "1-00:00:00", "infinite"
  int nodes = 0;
  std::map<std::string, int> node_states;  // "idle" -> 3, "alloc" -> 1, ...
  int cpus_per_node = 0;                   // the smallest over its node groups
  long long memory_mb_per_node = 0;        // the smallest
  SlurmGpus gpus_per_node;                 // the smallest count
  std::string node_list;                   // "n[1-2]"; the groups of several lines joined by ","
  int idle_nodes() const;
};

// The sinfo format Meshwork asks for; parse_sinfo reads exactly these fields.
inline constexpr const char* kSinfoFormat = "%P|%a|%l|%D|%t|%c|%m|%G|%N";
Result<std::vector<SlurmPartition>> parse_sinfo(const std::string& text);

// A job as `scontrol show job` (text) or `squeue --json` reports it.
struct SlurmJob {
  std::string id;
  std::string name;
  std::string state;       // "PENDING", "RUNNING", "TIMEOUT", ... (the first state when a list)
  std::string reason;      // pending reason / why it ended ("None" dropped to "")
  std::string exit_code;   // "0:0" (status:signal)
  std::string partition;
  std::string node_list;   // "n[1-2]"
  std::string time_limit;  // "00:01:00"
  std::string std_out;     // expanded path (scontrol) or pattern (squeue --json)
  int restarts = 0;
  std::string source;      // who said so: "sacct", "scontrol", "squeue"
  bool active() const;     // not yet ended: pending, running, configuring, completing, ...
};
// `scontrol show job ID` (one or several records; `-o` one-line form too).
Result<std::vector<SlurmJob>> parse_scontrol_jobs(const std::string& text);
// `squeue --json` of 22.05 (job_state a string) or 23.11+/24.11 (job_state a list; numbers as
// {"set","number"} objects).
Result<std::vector<SlurmJob>> parse_squeue_json(const std::string& text);

// `sacct -P -n -X -j ID -o JobID,State,ExitCode,Reason` (kSacctFields): one line per job
// allocation, fields separated by '|'. "CANCELLED by 1000" is state CANCELLED; more fields than
// asked are ignored, a header line is skipped. Where accounting exists, sacct still knows a job
// after scontrol forgot it (MinJobAge), so it gives the final state of an old job.
inline constexpr const char* kSacctFields = "JobID,State,ExitCode,Reason";
Result<std::vector<SlurmJob>> parse_sacct(const std::string& text);
// True when sacct's output says this cluster keeps no accounting ("Slurm accounting storage is
// disabled"), so asking again is pointless.
bool sacct_disabled(const std::string& err);

// `scontrol show node NAME`: the node's NodeAddr (what the other nodes reach it at).
Result<std::string> parse_node_addr(const std::string& text);

// `sbatch --parsable`: "123" or "123;cluster".
Result<std::string> parse_sbatch_job_id(const std::string& out);

// Key=value pairs of one scontrol record (values may contain spaces only in a few known keys).
std::map<std::string, std::string> parse_scontrol_record(const std::string& record);

// A node as `scontrol show node NAMES` reports it (blank-line separated records, or the one-line
// `-o` form): its name, State= ("IDLE", "DOWN+NOT_RESPONDING", "MIXED+DRAIN", ...) and Reason=.
struct SlurmNodeState {
  std::string name;
  std::string state;
  std::string reason;
  // Slurm holds the node out of service or cannot reach it: DOWN, FAIL(ING), DRAIN(ED/ING),
  // NOT_RESPONDING (sinfo's '*'). A job re-planned after a loss leaves such a node out.
  bool lost() const;
};
std::vector<SlurmNodeState> parse_scontrol_nodes(const std::string& text);

// One line saying what a final Slurm state means ("the job ran past its time limit").
std::string slurm_state_meaning(const std::string& state);

}  // namespace meshwork::remote
