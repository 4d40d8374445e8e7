// Hugging Face safetensors files: the file layer of loading a checkpoint (no LibTorch here).
//
// A .safetensors file is
//   bytes [0, 8)          N, the header length: a little-endian uint64
//   bytes [8, 8 + N)      the header: UTF-8 JSON, an object mapping each tensor name to
//                         {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]},
//                         plus an optional "__metadata__" object of string -> string; writers may
//                         pad it with spaces
//   bytes [8 + N, size)   the data section: each tensor's raw little-endian row-major elements at
//                         [begin, end) relative to 8 + N, with no alignment promised
// A sharded checkpoint directory has model.safetensors.index.json, whose "weight_map" maps each
// tensor name to the shard file holding it; an unsharded one has a single model.safetensors.
//
// The file is memory-mapped read-only, so a rank that reads only its slices (read_rows_f32,
// read_cols_f32) touches only those pages. open() validates the whole header before returning:
// every malformed case is an Error naming the file and, where there is one, the tensor
// (ErrorKind::io when the file cannot be read, invalid_input when its content is malformed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace meshwork::trainer::hf {

// Every fixed-size element type safetensors defines (sub-byte F4/F6 types are refused).
enum class Dtype {
  BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64
};

std::string_view dtype_name(Dtype dtype);
int64_t dtype_size(Dtype dtype);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::string dtype_name;  // as the header spells it, e.g. "BF16"
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;

  int64_t numel() const;
};

// Headers larger than this are refused before being parsed (the Rust reference's limit).
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::filesystem::path& path);
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  // nullptr when the header has no tensor of that name. Valid while this object lives.
  const TensorInfo* find(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::span<const std::byte> bytes(const TensorInfo& info) const;

  // Rows [row_begin, row_begin + row_count) of a 1-D (one element per row) or 2-D tensor, as
  // float, into out (row_count * cols floats). F32, F16, BF16 and F64 convert; others are refused.
  Status read_rows_f32(const TensorInfo& info, int64_t row_begin, int64_t row_count,
                       float* out) const;
  // Columns [col_begin, col_begin + col_count) of every row of a 2-D tensor, into out
  // (rows * col_count floats, row-major).
  Status read_cols_f32(const TensorInfo& info, int64_t col_begin, int64_t col_count,
                       float* out) const;

 private:
  SafetensorsFile() = default;
  void unmap();
  Status parse_header(std::string_view header, uint64_t data_size);

  std::filesystem::path path_;
  const std::byte* map_ = nullptr;
  size_t map_size_ = 0;
  const std::byte* data_ = nullptr;  // the data section inside map_
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Converts n little-endian elements of dtype F32, F16, BF16 or F64 at src (any alignment) to
// float. The caller has checked the dtype.
void convert_to_f32(Dtype dtype, const std::byte* src, size_t n, float* out);
float f16_to_f32(uint16_t half);
float bf16_to_f32(uint16_t bf16);

// A checkpoint directory: model.safetensors.index.json and its shards, or one model.safetensors.
// Shards are opened on first use and stay open.
class SafetensorsIndex {
 public:
  struct Found {
    const SafetensorsFile* file = nullptr;
    const TensorInfo* info = nullptr;
  };

  // Reads the index (or opens the single file). Every shard the weight_map names must exist.
  static Result<SafetensorsIndex> open(const std::filesystem::path& dir);
  // The shard holding `name` and its entry; an error names the index file and the tensor.
  Result<Found> find(const std::string& name);
  std::vector<std::string> names() const;  // sorted
  const std::filesystem::path& index_path() const { return index_path_; }

 private:
  std::filesystem::path dir_;
  std::filesystem::path index_path_;  // the index file, or the single model.safetensors
  std::map<std::string, std::string> weight_map_;                   // tensor -> shard file name
  std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;  // opened so far
};

}  // namespace meshwork::trainer::hf
