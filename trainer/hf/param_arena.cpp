#include "trainer/hf/param_arena.h"

#include <sys/mman.h>

#include <cstdint>

namespace meshwork::trainer::hf {

namespace {
constexpr size_t kHuge = size_t(2) << 20;  // x86-64's PMD huge page
}

std::shared_ptr<ParamArena> ParamArena::create(size_t bytes) {
  const size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
  // One huge page more than needed, so a 2 MiB-aligned start lies inside (only aligned ranges get
  // huge pages); the unused head and tail are never touched.
  void* map = ::mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) return nullptr;
  std::shared_ptr<ParamArena> a(new ParamArena());
  a->map_ = map;
  a->map_size_ = size + kHuge;
  a->data_ = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(map) + kHuge - 1) & ~(kHuge - 1));
  a->size_ = size;
  (void)::madvise(a->data_, size, MADV_HUGEPAGE);  // advice: 4 KiB pages where THP is off
  return a;
}

ParamArena::~ParamArena() {
  if (map_) ::munmap(map_, map_size_);
}

}  // namespace meshwork::trainer::hf
