// Sharded, atomic checkpoints that resume at any mesh shape.
//
// Layout: <dir>/step-<k, 8 digits>/ holds rank<r>.pt per rank (this rank's flat parameters or
// shards, AdamW moments, step, RNG state, data position), meta.json (mesh, world, model, seed,
// step, data position, global batch, and the slice index) and COMPLETE. Each file is written to
// a temporary name, fsynced and renamed; COMPLETE is written by rank 0 only after every rank's
// file is in place (a world barrier), so a kill at any moment leaves either a complete
// checkpoint or one that resume ignores. Resume takes the newest step directory with COMPLETE.
//
// The slice index (meta.json "tensors", as torch's distributed checkpoint keeps its metadata):
// for every global tensor of the model (its name, e.g. "layers.3.wq", and full shape) the
// pieces of it the rank files hold, each a run of `count` elements of the tensor flattened
// row-major, repeated `rows` times `stride` apart, stored contiguously from `file_offset` in
// flat tensor "param/<slot>" of rank<r>.pt (and alike in "exp_avg/<slot>", "exp_avg_sq/<slot>").
// Runs rather than DCP's n-d boxes because an FSDP flat shard cuts rows anywhere. Pieces held
// alike by several ranks (dp_replicate replicas, tp's copies) are listed once, from the lowest
// rank. Each rank writes its own pieces to rank<r>.slices.json; rank 0 merges them into
// meta.json (and removes them) before COMPLETE. docs/checkpoints.md has the format and the
// resharding rule (trainer/reshard.h).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace meshwork::trainer {

struct RankState {
  int64_t step = 0;            // completed optimizer steps
  int64_t data_position = 0;   // index of the next sequence of the global order
  std::vector<at::Tensor> params, exp_avg, exp_avg_sq;
  at::Tensor rng;              // CPU generator state
};

// One piece of a global tensor in a rank file (the header comment).
struct TensorSlice {
  int rank = 0;
  int slot = 0;             // the file's flat tensors param/<slot>, exp_avg/<slot>, exp_avg_sq/<slot>
  int64_t file_offset = 0;  // element of that flat tensor where the piece starts
  int64_t start = 0;        // element of the global tensor (flattened row-major) of row 0
  int64_t count = 0;        // consecutive elements per row
  int64_t rows = 1;
  int64_t stride = 0;       // global elements from one row's start to the next's
  bool operator==(const TensorSlice&) const = default;
};

struct GlobalTensor {
  std::vector<int64_t> shape;
  std::vector<TensorSlice> slices;
};

// The index by global tensor name.
using SliceIndex = std::map<std::string, GlobalTensor>;

// {"slice_fields": [...], "tensors": {name: {"shape": [...], "slices": [[rank, slot, ...], ...]}}}
nlohmann::json slice_index_to_json(const SliceIndex& index);
// `where` names the file in errors.
Result<SliceIndex> slice_index_from_json(const nlohmann::json& doc, const std::string& where);

std::filesystem::path checkpoint_step_dir(const std::filesystem::path& dir, int64_t step);
// Writes rank `rank`'s file atomically (temp + fsync + rename).
Status save_rank_state(const std::filesystem::path& step_dir, int rank, const RankState& state);
// This rank's pieces (rank<r>.slices.json, atomically), before the barrier.
Status save_rank_slices(const std::filesystem::path& step_dir, int rank, const SliceIndex& slices);
// Rank 0 after the barrier: merges the `world` ranks' slice files into meta.json's "tensors"
// (each piece held alike by several ranks once, and every tensor checked to be covered), then
// meta.json and COMPLETE (each atomically). world 0: meta_json as given, no index.
Status mark_complete(const std::filesystem::path& step_dir, const std::string& meta_json, int world = 0);
// Newest complete step directory, if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);
Result<std::string> read_meta(const std::filesystem::path& step_dir);
Result<RankState> load_rank_state(const std::filesystem::path& step_dir, int rank);

}  // namespace meshwork::trainer
