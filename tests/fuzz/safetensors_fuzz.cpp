// safetensors files come from anywhere on the Hub. The reader maps a file, so the input is
// written to an anonymous in-memory file first. Invariants: never a crash, never a read
// outside the mapping (ASan); a refusal names what; every accepted tensor's byte range has
// exactly numel x dtype size bytes and converts to float row by row.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "trainer/hf/safetensors.h"

using namespace meshwork;
using namespace meshwork::trainer::hf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0) return 0;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  auto file = SafetensorsFile::open("/proc/self/fd/" + std::to_string(fd));
  close(fd);
  if (!file) return fuzz::check_refusal(file.error(), "safetensors"), 0;
  for (const auto& name : file->names()) {
    const TensorInfo* info = file->find(name);
    FUZZ_CHECK(info != nullptr, "a listed tensor is not found: " + name);
    const auto bytes = file->bytes(*info);
    FUZZ_CHECK(static_cast<int64_t>(bytes.size()) == info->numel() * dtype_size(info->dtype),
               "byte range != numel x dtype size for " + name);
    if (info->shape.size() != 2 || info->numel() > (1 << 16)) continue;
    if (info->shape[0] > 0) {  // then shape[1] <= numel: the buffer is small
      std::vector<float> rows(static_cast<size_t>(info->shape[1]));
      Status s = file->read_rows_f32(*info, info->shape[0] - 1, 1, rows.data());
      FUZZ_CHECK(s.ok() || !s.error().message().empty(), "a row read failed without words");
    }
  }
  return 0;
}
