// Writing Hugging Face safetensors files, byte for byte as the `safetensors` library does (no
// LibTorch here; the format is described in safetensors.h).
//
// The library's layout, which the tests check against files it writes:
//   - tensors are ordered by dtype, larger-ranked first in the Rust enum's order (I64 before F64
//     before F32 before BF16 ...), then by name; the header lists them in that order, and the
//     data section holds them back to back in that order (data_offsets follow each other);
//   - the header is compact JSON: {"__metadata__":{...},"name":{"dtype":..,"shape":..,
//     "data_offsets":[b,e]},...}, padded with spaces so that 8 + its length is a multiple of 8.
//
// The writer streams: the header is known from the names, dtypes and shapes alone, so it is
// written first and each tensor's bytes are appended as they are produced (one tensor in
// memory at a time). finish() fsyncs the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "trainer/hf/safetensors.h"

namespace meshwork::trainer::hf {

struct TensorSpec {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  int64_t numel() const;
  int64_t bytes() const { return numel() * dtype_size(dtype); }
};

// The entries in the order the library writes them (dtype rank descending, then name).
std::vector<TensorSpec> safetensors_order(std::vector<TensorSpec> tensors);
// The 8-byte length prefix followed by the padded header JSON, for tensors already in
// safetensors_order. An empty metadata map writes no "__metadata__" key.
std::string safetensors_header(const std::vector<TensorSpec>& ordered,
                               const std::map<std::string, std::string>& metadata);

class SafetensorsWriter {
 public:
  // Creates `path` and writes the header. Tensors must then be appended with write() in
  // order() order. Errors name the file (ErrorKind::io).
  static Result<SafetensorsWriter> create(const std::filesystem::path& path,
                                          std::vector<TensorSpec> tensors,
                                          const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
  SafetensorsWriter(SafetensorsWriter&& other) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&& other) noexcept;
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter();

  const std::vector<TensorSpec>& order() const { return order_; }
  // The next tensor's raw little-endian bytes; `name` must be the next one of order() and the
  // size its dtype * numel.
  Status write(const std::string& name, std::span<const std::byte> data);
  // After the last tensor: flush, fsync, close.
  Status finish();

 private:
  SafetensorsWriter() = default;
  Status fail(const std::string& what);

  std::filesystem::path path_;
  std::vector<TensorSpec> order_;
  size_t next_ = 0;
  int fd_ = -1;
};

// Writes `text` to `path` and fsyncs it (small files of an export: config.json, the index).
Status write_file_synced(const std::filesystem::path& path, const std::string& text);

}  // namespace meshwork::trainer::hf
