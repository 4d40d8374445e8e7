// One block of fresh memory for all the parameters a rank loads from a checkpoint, mapped 2 MiB
// aligned with transparent huge pages requested (madvise(MADV_HUGEPAGE)).
//
// Why: loading widens the file's bf16 into fresh fp32 storage, and the first touch of that storage
// (a page fault and a kernel zeroing per 4 KiB page) costs more than reading the file itself
// (docs/trainer.md, "Loading a Hugging Face checkpoint"). With huge pages a fault brings in 2 MiB
// at once: 512 times fewer faults for the same bytes.
#pragma once

#include <cstddef>
#include <memory>

namespace meshwork::trainer::hf {

class ParamArena {
 public:
  // A zero-filled mapping of at least `bytes` (rounded up to 2 MiB), or nullptr when the kernel
  // refuses the mapping (the caller then allocates piece by piece as before).
  static std::shared_ptr<ParamArena> create(size_t bytes);
  ~ParamArena();
  ParamArena(const ParamArena&) = delete;
  ParamArena& operator=(const ParamArena&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  ParamArena() = default;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace meshwork::trainer::hf
