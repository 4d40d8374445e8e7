// A checkpoint rank file (trainer/checkpoint.h: rank<r>.pt, the zip archive torch::pickle_save
// writes) opened as views of the memory-mapped file instead of copies.
//
// load_rank_state reads the whole file and unpickles every tensor into fresh memory: the
// parameters and both AdamW moments, twice the file at its peak. The exporter needs only the
// parameters, one tensor's piece at a time: here the archive's data.pkl (a few KB) is unpickled
// with a record reader that hands out pointers into the read-only mapping (the archive stores
// records uncompressed, 64-byte aligned), so a tensor costs memory only for the pages read, and
// release_pages() gives those back (they stay in the page cache).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "core/error.h"

namespace meshwork::trainer::hf {

class MappedRankFile {
 public:
  static Result<std::unique_ptr<MappedRankFile>> open(const std::filesystem::path& path);
  ~MappedRankFile();
  MappedRankFile(const MappedRankFile&) = delete;
  MappedRankFile& operator=(const MappedRankFile&) = delete;

  // "param/<i>" for i = 0.. while present (the flat parameter of unit i), as read-only views.
  const std::vector<at::Tensor>& params() const { return params_; }
  // Any tensor of the file by its key ("exp_avg/3", "rng", ...) as a read-only view; null if absent.
  const at::Tensor* find(const std::string& key) const {
    auto it = tensors_.find(key);
    return it == tensors_.end() ? nullptr : &it->second;
  }
  const std::filesystem::path& path() const { return path_; }
  // Drops this process's pages of the mapping (MADV_DONTNEED); views stay valid and fault in
  // again from the page cache when read.
  void release_pages() const;

 private:
  MappedRankFile() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::vector<at::Tensor> params_;
  std::map<std::string, at::Tensor> tensors_;
};

}  // namespace meshwork::trainer::hf
