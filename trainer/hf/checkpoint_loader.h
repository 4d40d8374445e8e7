// Loading a Hugging Face checkpoint into meshtrain, one rank's slices at a time (no LibTorch here).
//
// HfCheckpoint::open checks the whole checkpoint against the model before any rank reads a byte:
// every tensor the model needs (trainer/hf/weight_names.h) is present, has the shape config.json
// implies and a dtype meshtrain converts (F32, F16, BF16, F64). Each failure is an Error naming
// the file and the tensor. Then read() copies any element range of one full tensor, converting
// from the file's dtype straight into the caller's fp32 storage: the parallelize step asks only
// for the ranges this rank owns (its tensor-parallel piece, inside that its FSDP shard), so the
// pages of the memory-mapped files a rank touches are those of its slices, and no rank builds a
// whole unit or tensor it does not own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/model_spec.h"
#include "trainer/hf/safetensors.h"

namespace meshwork::trainer::hf {

// One parameter of a unit's full (untensor-parallel) layout, in the model's order.
struct ParamShape {
  std::string name;             // meshtrain's name ("wq", "embed", ...)
  std::vector<int64_t> shape;   // the shape config.json implies
};

class HfCheckpoint {
 public:
  // `units[u]` lists unit u's parameters (Model::full_layout order). Refuses a spec whose weights
  // meshtrain's model does not hold (Llama's o_proj / MLP biases).
  static Result<std::unique_ptr<HfCheckpoint>> open(const std::filesystem::path& dir, const ModelSpec& spec,
                                                    const std::vector<std::vector<ParamShape>>& units);

  // Elements [offset, offset + count) of parameter `param` (index in units[unit]) of the full
  // row-major tensor, as float into out. The range was checked by the caller (inside the tensor).
  void read(int unit, int param, int64_t offset, int64_t count, float* out) const;

  // The file and tensor behind a parameter (for messages and the bench).
  // (A stacked expert parameter: its first expert's tensor.)
  const TensorInfo& info(int unit, int param) const { return *found_[unit][param].front().found.info; }
  // Bytes of every tensor the model reads (the checkpoint's size as far as meshtrain is concerned).
  int64_t model_bytes() const { return model_bytes_; }

 private:
  HfCheckpoint() = default;
  static void read_piece(const SafetensorsIndex::Found& f, int64_t offset, int64_t count, float* out);
  SafetensorsIndex index_;
  // Per unit and parameter, the HF tensors holding it one after the other (weight_names.h's
  // hf_tensor_pieces: one, or one per expert), each with its element count.
  struct Piece {
    SafetensorsIndex::Found found;
    int64_t numel = 0;
  };
  std::vector<std::vector<std::vector<Piece>>> found_;
  int64_t model_bytes_ = 0;
};

}  // namespace meshwork::trainer::hf
