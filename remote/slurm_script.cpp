#include "remote/slurm_script.h"

#include <algorithm>

#include "remote/run_layout.h"
#include "core/shell_quote.h"

namespace meshwork::remote {

namespace {

bool plain_word(const std::string& s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("-_.:,=+/@%[]").find(c) != std::string_view::npos;
  });
}

Status word_field(const char* field, const std::string& v, bool optional = true) {
  if (v.empty() && optional) return {};
  if (!plain_word(v)) {
    return Error{field, v, "one word of letters, digits and - _ . : , = + / @ % [ ] (no spaces or quotes)"};
  }
  return {};
}

std::string sanitize_name(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '_';
  return out.substr(0, 64);
}

// "$(scontrol show node NAME)" reduced to its NodeAddr.
std::string node_addr_of(const std::string& name_expr) {
  return "$(scontrol show node \"" + name_expr + "\" 2>/dev/null | tr ' ' '\\n' | sed -n 's/^NodeAddr=//p' | head -n 1)";
}

}  // namespace

Status check_slurm_options(const SlurmJobOptions& opt) {
  if (opt.nodes < 1) return Error{"--nodes", std::to_string(opt.nodes), "at least 1"};
  if (opt.gpus_per_node < 0) return Error{"--gpus-per-node", std::to_string(opt.gpus_per_node), ">= 0"};
  if (opt.nproc_per_node < 0) return Error{"--nproc-per-node", std::to_string(opt.nproc_per_node), ">= 1"};
  if (Status s = word_field("--partition", opt.partition); !s) return s;
  if (Status s = word_field("--account", opt.account); !s) return s;
  if (Status s = word_field("--qos", opt.qos); !s) return s;
  if (Status s = word_field("--time", opt.time); !s) return s;
  for (const std::string& a : opt.sbatch_args) {
    if (Status s = word_field("--sbatch-arg", a, false); !s) return s;
    if (a.rfind("-", 0) != 0) return Error{"--sbatch-arg", a, "an sbatch option (starting with -), e.g. --exclusive"};
  }
  return {};
}

std::string slurm_batch_script(const LaunchRecord& rec, const SlurmJobOptions& opt) {
  const size_t nnodes = rec.nodes.size();
  const int slots = rec.nodes.front().slots;
  const std::string port = std::to_string(rec.master_port);
  // The node command: meshtrain_command() (the one place a run becomes a command line) with the
  // two per-node facts left to the shell: the node rank from Slurm, the master from the job.
  const std::vector<std::string> argv = meshtrain_command(rec, 0);
  std::string command;
  for (size_t k = 0; k < argv.size(); ++k) {
    std::string word = shell_quote(argv[k]);
    if (k > 0 && argv[k - 1] == "--node-rank") word = "\"$i\"";
    if (k > 0 && argv[k - 1] == "--master-addr") word = "\"$MASTER_ADDR\"";
    command += (command.empty() ? "" : " ") + word;
  }
  std::string s = "#!/bin/bash\n";
  s += "# Written by meshwork: one meshtrain supervisor per node (see docs/remote.md, Slurm).\n";
  s += "#SBATCH --job-name=" + sanitize_name(opt.job_name.empty() ? "meshwork" : opt.job_name) + "\n";
  if (!opt.partition.empty()) s += "#SBATCH --partition=" + opt.partition + "\n";
  s += "#SBATCH --nodes=" + std::to_string(nnodes) + "\n";
  s += "#SBATCH --ntasks-per-node=1\n";
  if (opt.gpus_per_node > 0) s += "#SBATCH --gpus-per-node=" + std::to_string(opt.gpus_per_node) + "\n";
  if (!opt.account.empty()) s += "#SBATCH --account=" + opt.account + "\n";
  if (!opt.qos.empty()) s += "#SBATCH --qos=" + opt.qos + "\n";
  if (!opt.time.empty()) s += "#SBATCH --time=" + opt.time + "\n";
  s += "#SBATCH --output=slurm-%j.out\n";
  for (const std::string& a : opt.sbatch_args) s += "#SBATCH " + a + "\n";
  s += "set -u\n";
  s += "export MASTER_PORT=" + port + " WORLD_SIZE=" + std::to_string(rec.world_size()) +
       " NNODES=" + std::to_string(nnodes) + " LOCAL_WORLD_SIZE=" + std::to_string(slots) + "\n";
  s += "if [ \"${1:-}\" != node ]; then\n";
  s += "  # The batch step: the master is the allocation's first node, as the others reach it.\n";
  s += "  first=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
  s += "  MASTER_ADDR=" + node_addr_of("$first") + "\n";
  s += "  if [ -z \"$MASTER_ADDR\" ]; then\n";
  s += "    echo \"meshwork: no NodeAddr for the job's first node '$first' (scontrol show node): "
       "cannot tell the other nodes where the master is; not starting\" >&2\n";
  s += "    exit 1\n";
  s += "  fi\n";
  s += "  export MASTER_ADDR\n";
  s += "  echo \"meshwork: job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, master $MASTER_ADDR:$MASTER_PORT ($first)\"\n";
  s += "  srun --nodes=" + std::to_string(nnodes) + " --ntasks=" + std::to_string(nnodes) +
       " --ntasks-per-node=1 --kill-on-bad-exit=1 bash ./" + kSlurmScriptFile + " node\n";
  s += "  exit $?\n";
  s += "fi\n";
  s += "# One task per node.\n";
  s += "i=$SLURM_NODEID\n";
  s += "export NODE_RANK=$i\n";
  s += "me=" + node_addr_of("$SLURMD_NODENAME") + "\n";
  s += "if [ -z \"$me\" ]; then echo \"meshwork: no NodeAddr for node $SLURMD_NODENAME\" >&2; exit 1; fi\n";
  s += "# Gloo binds to the address the other nodes reach this one at (hostnames may resolve to loopback).\n";
  s += "export MESHWORK_GLOO_HOSTNAME=$me\n";
  s += "rm -f node$i.exit node$i.restarts\n";
  s += "echo \"$SLURMD_NODENAME $me\" > node$i.host  # which Slurm node ran node i, for the root cause\n";
  s += "exec > node$i.out 2> node$i.err < /dev/null\n";
  s += "echo $$ > node$i.pgid\n";
  s += "# Slurm's SIGTERM (scancel, time limit) ends the trainer; the trap lets this shell outlive it to record how.\n";
  s += "term=0; trap 'term=1' TERM\n";
  s += "a=0; x=\n";
  s += "# A job Slurm requeued (node failure, preemption, scontrol requeue) runs this script again:\n";
  s += "# it goes on from the newest complete checkpoint (meshtrain starts at step 0 when there is none).\n";
  s += "if [ \"${SLURM_RESTART_COUNT:-0}\" -gt 0 ]; then x=--resume; fi\n";
  s += "while :; do\n";
  s += "  " + command + " $x\n";
  s += "  st=$?\n";
  s += "  if [ $st -eq 0 ] || [ $term -eq 1 ] || [ $a -ge " + std::to_string(std::max(0, rec.max_restarts)) +
       " ]; then break; fi\n";
  s += "  sleep 2; [ -e node$i.stop ] && break; [ $term -eq 1 ] && break\n";
  s += "  a=$((a+1)); echo \"$a $st $(date +%s.%N)\" >> node$i.restarts\n";
  s += "  x=\"--resume --master-port $((" + port + "+a))\"\n";
  s += "done\n";
  s += "echo \"$st $(date +%s.%N)\" > node$i.exit.tmp && mv -f node$i.exit.tmp node$i.exit\n";
  s += "exit $st\n";
  return s;
}

}  // namespace meshwork::remote
