// Resuming a checkpoint at another mesh shape (docs/checkpoints.md).
//
// Saving: each rank describes what its flat tensors hold as pieces of the global tensors
// (rank_slices): for every flat parameter (one FSDP shard, or a whole unit, of tp's local
// pieces) the runs of tensor parallel's source_runs() over its range, which name the global
// tensor and element offsets; consecutive runs of one rowwise piece become one strided slice.
//
// Loading at any shape: a rank builds each of its flat tensors (the parameter and both AdamW
// moments) from the same runs of its own new layout, reading each run from whichever old rank
// file holds it (the merged slice index), through read-only mappings of those files only
// (trainer/hf/mapped_rank_file.h). Nothing else is materialised: a rank holds its own share
// plus the pages of the mapped files it is reading, released after every flat tensor. FSDP
// padding past a unit's end is zero, as a fresh run makes it.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/error.h"
#include "trainer/checkpoint.h"
#include "trainer/optimizer.h"
#include "trainer/parallelize.h"

namespace meshwork::trainer {

namespace hf {
class MappedRankFile;
}

// "embed", "norm", "head" (the root unit) and "layers.<l>.<param>" (decoder block l).
std::string global_tensor_name(int unit, const std::string& param);

// What this rank's flat tensors hold, as pieces of the global tensors (slices of `rank`).
SliceIndex rank_slices(const ParallelModel& pm, int rank);

// The rank files of one checkpoint, read through the slice index.
class ShardReader {
 public:
  // `meta` is the step directory's meta.json; errors name what is missing.
  static Result<std::unique_ptr<ShardReader>> open(const std::filesystem::path& step_dir,
                                                   const nlohmann::json& meta);
  ~ShardReader();

  // Elements [start, start + count) of global tensor `name` (flattened row-major) of `kind`
  // ("param", "exp_avg" or "exp_avg_sq") into out, from the mapped rank files.
  Status read(const std::string& kind, const std::string& name, int64_t start, int64_t count, float* out);
  // Whether the checkpoint holds global tensor `name` with this shape (a checkpoint of this model).
  Status check_shape(const std::string& name, const std::vector<int64_t>& shape) const;
  // A rank file's RNG state (the old rank's own when it existed, else rank 0's).
  Result<at::Tensor> rng(int rank);
  // Gives back the pages read so far (they stay in the page cache).
  void release_pages() const;

 private:
  ShardReader() = default;
  struct Run {
    int64_t start, count;  // in the global tensor
    int rank, slot;
    int64_t file_offset;
  };
  Result<const hf::MappedRankFile*> file(int rank);

  std::filesystem::path dir_;
  int world_ = 0;
  std::map<std::string, std::vector<Run>> runs_;  // by global name, sorted by start
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<int, std::unique_ptr<hf::MappedRankFile>> files_;  // opened on first use
};

// Fills every flat parameter of `pm` and its AdamW moments in `opt` from `reader` (module comment).
Status load_resharded(ShardReader& reader, ParallelModel& pm, AdamW& opt);

struct Restored {
  int64_t step = 0;         // completed optimizer steps
  bool same_shape = false;  // saved at this run's mesh, world and chunks per stage
  bool indexed = false;     // read through the slice index (else this rank's own whole file)
  std::string shapes;       // "saved at mesh … on N ranks, this run is mesh … on M"
};

// --resume from `step_dir` into `pm`, `opt` and the CPU generator. `run_meta` is this run's
// meta.json (model, model_config, seq_len, global_batch, mesh, world, pp_virtual_stages): the
// model, sequence length and global batch must be the checkpoint's; the shape may differ when the
// checkpoint has a slice index. Errors name "--resume", the step directory and what differs.
Result<Restored> restore_checkpoint(const std::filesystem::path& step_dir, const nlohmann::json& run_meta,
                                    int rank, ParallelModel& pm, AdamW& opt);

}  // namespace meshwork::trainer
