// `meshtrain export`: a meshtrain checkpoint step directory (any mesh shape) as a Hugging Face
// model directory that transformers loads with AutoModelForCausalLM.from_pretrained.
//
// Consolidation. A step directory holds rank<r>.pt (each rank's flat parameters, one per unit)
// and meta.json (model config, mesh shape, the group FSDP sharded over). Rank r's flat
// parameter of unit u is, for its tp coordinate t, the FSDP shard of its group rank g:
// elements [g * s, (g + 1) * s) of tp rank t's local flat unit, padded to a multiple of the group
// size n (s = ceil(local numel / n)). So each tp rank's local unit is the concatenation of one
// shard group's shards in group-rank order, cut to its numel; each parameter of that local unit
// is the plan's piece (tp_local_param), and tp_unsplit joins the tp pieces into the full
// tensor. Ranks of other dp_replicate replicas hold copies and are not read.
//
// Output: model.safetensors, or model-0000k-of-0000n.safetensors + model.safetensors.index.json
// when the tensors exceed max_shard_bytes (split like transformers' save_pretrained: a shard is
// closed when the next tensor would overflow it), config.json (core's model_spec_to_json with the
// dtype), and the tokenizer files of the run's model directory when it had them.
//
// Atomic: everything is written into <out>.tmp-XXXXXX beside <out>, each file fsynced, then the
// directory is renamed to <out> (and the parent fsynced): a kill leaves no <out>, at most a
// .tmp- directory. An existing <out> is refused unless force.
//
// Memory: rank files are read one at a time and only the parameters of the ranks needed (one
// replica) are kept (the AdamW moments are dropped as each file is read): about the fp32 model
// plus one rank file. Tensors are consolidated, converted and written one at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"

namespace meshwork::trainer::hf {

struct ExportOptions {
  std::filesystem::path checkpoint;  // a step directory, or a checkpoint directory (newest complete step)
  std::filesystem::path out;
  int64_t max_shard_bytes = 5'000'000'000;  // transformers' default "5GB"
  std::string dtype;  // "fp32" | "bf16"; empty: bf16 if the source checkpoint or the run's precision was, else fp32
  bool force = false;                       // replace an existing out
};

struct ExportSummary {
  std::filesystem::path step_dir;
  std::vector<std::string> files;  // written, in out
  int64_t tensors = 0, bytes = 0;
};

Result<ExportSummary> export_checkpoint(const ExportOptions& options);

// `meshtrain export ...` (args after "export"): parses, exports, prints a summary; the exit code.
int export_main(const std::vector<std::string>& args);

// "5GB", "500MB", "10KB", "123" (bytes); decimal units as transformers' max_shard_size.
Result<int64_t> parse_byte_size(const std::string& text, const std::string& field);

}  // namespace meshwork::trainer::hf
