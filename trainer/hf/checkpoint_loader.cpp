#include "trainer/hf/checkpoint_loader.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "trainer/hf/weight_names.h"

namespace meshwork::trainer::hf {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool convertible(Dtype d) { return d == Dtype::F32 || d == Dtype::F16 || d == Dtype::BF16 || d == Dtype::F64; }

}  // namespace

Result<std::unique_ptr<HfCheckpoint>> HfCheckpoint::open(const std::filesystem::path& dir, const ModelSpec& spec,
                                                         const std::vector<std::vector<ParamShape>>& units) {
  // meshtrain's decoder has q/k/v biases (Qwen2) but none on o_proj or the MLP: a Llama config
  // asking for them would load into a model that drops those weights.
  if (spec.o_proj_bias)
    return Error{"model.attention_bias", "true",
                 "false for a Llama checkpoint (meshtrain's attention has no o_proj bias)"};
  if (spec.mlp_bias)
    return Error{"model.mlp_bias", "true", "false (meshtrain's MLP has no biases)"};
  auto index = SafetensorsIndex::open(dir);
  if (!index) return index.error();
  std::unique_ptr<HfCheckpoint> ck(new HfCheckpoint());
  ck->index_ = std::move(*index);
  ck->found_.resize(units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    for (const ParamShape& p : units[u]) {
      const std::vector<HfPiece> pieces = hf_tensor_pieces(spec.architecture, static_cast<int>(u), p.name, p.shape);
      if (pieces.empty())
        return Error{"meshtrain parameter " + p.name, "unit " + std::to_string(u),
                     "a parameter of trainer/hf/weight_names.h"}
            .as(ErrorKind::internal);
      ck->found_[u].emplace_back();
      for (const HfPiece& piece : pieces) {
        const std::string& name = piece.name;
        auto found = ck->index_.find(name);
        if (!found) {
          // A tensor absent from the index (or from the shard it names): say which file to look in.
          if (found.error().kind == ErrorKind::io) return found.error();
          return Error{ck->index_.index_path().string(), "no tensor " + name,
                       "every tensor of a " + spec.architecture + " model with this config.json" +
                           (p.name == "head" ? " (tie_word_embeddings false: lm_head.weight is needed)" : "")};
        }
        const TensorInfo& info = *found->info;
        const std::string where = found->file->path().string() + ": " + name;
        if (info.shape != piece.shape)
          return Error{where, "shape " + shape_text(info.shape),
                       shape_text(piece.shape) + " as config.json says (hidden_size " +
                           std::to_string(spec.hidden_size) + ", intermediate_size " +
                           std::to_string(spec.intermediate_size) + ", heads " +
                           std::to_string(spec.num_attention_heads) + "/" +
                           std::to_string(spec.num_key_value_heads) + " x head_dim " + std::to_string(spec.head_dim) +
                           ", vocab_size " + std::to_string(spec.vocab_size) +
                           (spec.is_moe() ? ", experts " + std::to_string(spec.moe.num_experts) + " of width " +
                                                std::to_string(spec.moe.expert_intermediate_size)
                                          : std::string()) +
                           ")"};
        if (!convertible(info.dtype))
          return Error{where, "dtype " + info.dtype_name, "F32, F16, BF16 or F64"};
        ck->model_bytes_ += static_cast<int64_t>(info.end - info.begin);
        int64_t numel = 1;
        for (int64_t d : piece.shape) numel *= d;
        ck->found_[u].back().push_back({*found, numel});
      }
    }
  }
  return ck;
}

void HfCheckpoint::read(int unit, int param, int64_t offset, int64_t count, float* out) const {
  // The range may span several pieces (experts): read each piece's part of it in turn.
  int64_t piece_begin = 0;
  for (const Piece& piece : found_[unit][param]) {
    const int64_t lo = std::max(offset, piece_begin), hi = std::min(offset + count, piece_begin + piece.numel);
    if (lo < hi) read_piece(piece.found, lo - piece_begin, hi - lo, out + (lo - offset));
    piece_begin += piece.numel;
    if (piece_begin >= offset + count) break;
  }
}

void HfCheckpoint::read_piece(const SafetensorsIndex::Found& f, int64_t offset, int64_t count, float* out) {
  const int64_t size = dtype_size(f.info->dtype);
  const std::byte* src = f.file->bytes(*f.info).data() + offset * size;
  convert_to_f32(f.info->dtype, src, static_cast<size_t>(count), out);
  // The file's pages were only a way in: drop them from this process's mapping (they stay in the
  // page cache), so a rank's resident memory is its fp32 parameters, not those plus the file's
  // bytes. Whole pages around the range; a neighbouring read that still needs one faults it in
  // again from the page cache (the mapping is read-only and file-backed, so nothing is lost).
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = reinterpret_cast<uintptr_t>(src) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(src) + count * size + page - 1) & ~(page - 1);
  madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

}  // namespace meshwork::trainer::hf
