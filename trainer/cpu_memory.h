// Exact CPU tensor memory: a c10 allocator wrapper installed as LibTorch's CPU allocator (at
// the highest priority, before any tensor exists). It counts the bytes of every live CPU
// allocation it hands out (tensor storages and ATen's CPU scratch) and the high-water mark.
// The step records' mem_bytes / mem_peak_bytes on CPU come from here (docs/metrics.md).
#pragma once

#include <cstdint>

namespace meshwork::trainer {

void install_tracking_cpu_allocator();
int64_t cpu_bytes_in_use();
int64_t cpu_peak_bytes();
void reset_cpu_peak();  // peak := current

}  // namespace meshwork::trainer
