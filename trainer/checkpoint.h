// Sharded, atomic checkpoints.
//
// Layout: <dir>/step-<k, 8 digits>/ holds rank<r>.pt per rank (this rank's flat parameters or
// shards, AdamW moments, step, RNG state, data position), meta.json (mesh, world, model, seed)
// and COMPLETE. Each file is written to a temporary name, fsynced and renamed; COMPLETE is
// written by rank 0 only after every rank's file is in place (a world barrier), so a kill at any
// moment leaves either a complete checkpoint or one that resume ignores. Resume takes the
// newest step directory with COMPLETE; it needs the same mesh shape and model (no resharding).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/error.h"

namespace meshwork::trainer {

struct RankState {
  int64_t step = 0;            // completed optimizer steps
  int64_t data_position = 0;   // index of the next sequence of the global order
  std::vector<at::Tensor> params, exp_avg, exp_avg_sq;
  at::Tensor rng;              // CPU generator state
};

std::filesystem::path checkpoint_step_dir(const std::filesystem::path& dir, int64_t step);
// Writes rank `rank`'s file atomically (temp + fsync + rename).
Status save_rank_state(const std::filesystem::path& step_dir, int rank, const RankState& state);
// Rank 0 after the barrier: meta.json then COMPLETE (each atomically).
Status mark_complete(const std::filesystem::path& step_dir, const std::string& meta_json);
// Newest complete step directory, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);
Result<std::string> read_meta(const std::filesystem::path& step_dir);
Result<RankState> load_rank_state(const std::filesystem::path& step_dir, int rank);

}  // namespace meshwork::trainer
