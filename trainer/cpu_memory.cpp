#include "trainer/cpu_memory.h"

#include <malloc.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include <c10/core/CPUAllocator.h>

namespace meshwork::trainer {

namespace {

// Wraps LibTorch's default CPU allocator. Its DataPtrs are "simple" (context == data, one raw
// deleter), as kernels that call raw_allocate() (oneDNN's bf16 paths) require, so the sizes are
// kept in a table keyed by address.
class TrackingAllocator final : public c10::Allocator {
 public:
  explicit TrackingAllocator(c10::Allocator* base)
      : base_(base), base_deleter_(base->raw_deleter()) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    TORCH_CHECK(data == inner.get_context() && base_deleter_,
                "tracking allocator: the base CPU allocator is not simple");
    inner.release_context();  // owned here from now on, freed by release()
    {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[data] = n;
    }
    const int64_t now = current_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &TrackingAllocator::release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &TrackingAllocator::release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};

 private:
  static void release(void* p);
  c10::Allocator* base_;
  c10::DeleterFnPtr base_deleter_;
  std::mutex mu_;
  std::unordered_map<void*, size_t> sizes_;
};

TrackingAllocator* g_tracker = nullptr;

void TrackingAllocator::release(void* p) {
  if (!p) return;
  TrackingAllocator* self = g_tracker;
  size_t n = 0;
  {
    std::lock_guard<std::mutex> lock(self->mu_);
    auto it = self->sizes_.find(p);
    if (it != self->sizes_.end()) {
      n = it->second;
      self->sizes_.erase(it);
    }
  }
  self->current_.fetch_sub(static_cast<int64_t>(n));
  self->base_deleter_(p);
}

}  // namespace

void install_tracking_cpu_allocator() {
  if (g_tracker) return;
  // glibc hands blocks above its mmap threshold (128 KiB, adapting up to 32 MiB) back to the
  // kernel when they are freed, and trims the heap top, so every step's fresh activation and
  // gradient buffers page-fault again and are zeroed by the kernel (`small`: ~1,650 faults a
  // step). Keep freed memory in the process, as the jemalloc/tcmalloc setups of PyTorch's CPU
  // performance guide do; current and peak tensor bytes are still counted exactly below.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  g_tracker = new TrackingAllocator(c10::GetCPUAllocator());  // lives for the process
  c10::SetCPUAllocator(g_tracker, /*priority=*/255);
}
int64_t cpu_bytes_in_use() { return g_tracker ? g_tracker->current_.load() : 0; }
int64_t cpu_peak_bytes() { return g_tracker ? g_tracker->peak_.load() : 0; }
void reset_cpu_peak() {
  if (g_tracker) g_tracker->peak_.store(g_tracker->current_.load());
}

}  // namespace meshwork::trainer
