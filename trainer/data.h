// llm.c token shards and the deterministic batch order (no LibTorch here).
//
// A shard is a 256 x int32 little-endian header (magic 20240520 with uint16 tokens, or 20240801
// with uint32 tokens; version; token count) followed by the tokens. A data path is one shard or
// a directory whose *.bin files, sorted by name, are read as one concatenated token stream.
//
// Order: sequence i is tokens [i*T, i*T + T] of the stream (T + 1 tokens: inputs and the
// shifted targets); there are floor((N - 1) / T) of them, reused in order after the last
// (epochs). The global batch at step k is sequences k*G .. k*G + G - 1 (mod the count), G the
// global batch: the same set whatever the mesh shape. Data-parallel rank d of D takes the
// contiguous G/D of them starting at d*G/D; its micro-batch m is the m-th run of micro_batch
// sequences inside that.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace meshwork::trainer {

class TokenData {
 public:
  // Maps every shard. Errors name "--data": missing path, no .bin in a directory, a bad magic
  // or version, a size that does not match the header, a token >= vocab_size.
  static Result<std::unique_ptr<TokenData>> open(const std::filesystem::path& path,
                                                 int64_t vocab_size);
  ~TokenData();

  int64_t num_tokens() const { return total_; }
  // Number of sequences of length seq_len (each needs seq_len + 1 tokens).
  int64_t num_sequences(int64_t seq_len) const { return (total_ - 1) / seq_len; }
  // Copies seq_len + 1 tokens of sequence `index` (taken mod num_sequences) into out.
  void sequence(int64_t index, int64_t seq_len, int64_t* out) const;
  // The sequence indices of data-parallel rank `dp_rank` of `dp_size`, micro-batch `micro`
  // (micro_batch sequences) at optimizer step `step` (the order in the header comment).
  static std::vector<int64_t> batch_indices(int64_t step, int64_t global_batch, int64_t dp_rank,
                                            int64_t dp_size, int64_t micro, int64_t micro_batch);
  const std::vector<std::filesystem::path>& files() const { return files_; }
  // The data position after `steps` optimizer steps: the sequences of the global order consumed
  // so far, whatever the mesh shape (a checkpoint records it; resume continues from it).
  static int64_t position_after(int64_t steps, int64_t global_batch) { return steps * global_batch; }

 private:
  struct Shard {
    const uint8_t* base = nullptr;  // mmap of the whole file
    size_t bytes = 0;
    int64_t first = 0;              // index of its first token in the stream
    int64_t count = 0;
    int width = 2;                  // bytes per token
  };
  int64_t token(int64_t i) const;
  std::vector<std::filesystem::path> files_;
  std::vector<Shard> shards_;
  int64_t total_ = 0;
};

// The bundled corpus: <resource_dir()>/data/kjv.bin (core/resource_dir.h: the environment,
// the install tree beside the executable, or the source tree).
std::filesystem::path default_data_path();

}  // namespace meshwork::trainer
