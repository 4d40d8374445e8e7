// Slurm's output (sinfo, scontrol show job/node, squeue --json, sacct, sbatch --parsable, GRES)
// is read from a login node, across Slurm versions whose formats changed. The first byte picks
// the parser. Invariants: never a crash; a refusal names what; accepted records have the fields
// their readers rely on.
#include <cstdint>
#include <string>

#include "remote/slurm_parsers.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;
using namespace meshwork::remote;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(fuzz::as_text(data + 1, size - 1));
  switch (data[0] % 7) {
    case 0: {
      auto p = parse_sinfo(text);
      if (!p) fuzz::check_refusal(p.error(), "parse_sinfo");
      break;
    }
    case 1: {
      auto j = parse_scontrol_jobs(text);
      if (!j) fuzz::check_refusal(j.error(), "parse_scontrol_jobs");
      break;
    }
    case 2: {
      auto j = parse_squeue_json(text);
      if (!j) fuzz::check_refusal(j.error(), "parse_squeue_json");
      break;
    }
    case 3: {
      auto a = parse_node_addr(text);
      if (!a) fuzz::check_refusal(a.error(), "parse_node_addr");
      break;
    }
    case 4: {
      auto id = parse_sbatch_job_id(text);
      if (!id) {
        fuzz::check_refusal(id.error(), "parse_sbatch_job_id");
      } else {
        FUZZ_CHECK(!id->empty(), "an empty job id accepted");
      }
      break;
    }
    case 6: {
      auto j = parse_sacct(text);
      if (!j) fuzz::check_refusal(j.error(), "parse_sacct");
      break;
    }
    default: {
      (void)parse_gres_gpus(text);
      (void)slurm_state_meaning(text);
      (void)parse_scontrol_record(text);
    }
  }
  return 0;
}
