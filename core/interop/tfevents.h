// TensorBoard event files (`events.out.tfevents.*`, written by Accelerate's and torchtitan's
// TensorBoard trackers through torch.utils.tensorboard / tensorboard's own writer): the scalars
// in them, with the byte offset after the last intact record so a re-import or a live follow
// resumes there.
//
// The file is a TFRecord stream; each record is
//   uint64 length | uint32 masked_crc32c(length) | length bytes | uint32 masked_crc32c(bytes)
// (little-endian; masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, CRC-32C = Castagnoli), and
// each record's bytes are a serialized tensorflow.Event protocol buffer:
//   Event   { double wall_time = 1; int64 step = 2; Summary summary = 5; ... }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; TensorProto tensor = 8; ... }
//   TensorProto { DataType dtype = 1; bytes tensor_content = 4; repeated float float_val = 5;
//                 repeated double double_val = 6; repeated int32 int_val = 7; repeated int64 int64_val = 10; }
// A scalar is a Value with simple_value (add_scalar's default) or a one-element numeric tensor
// (new-style scalars). Images, histograms, text and graphs are skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace meshwork::interop {

struct ScalarPoint {
  int64_t step = 0;
  double wall_time = 0;  // Unix seconds
  std::string tag;
  double value = 0;
};

struct EventRead {
  std::vector<ScalarPoint> scalars;
  uint64_t records = 0;
  uint64_t intact_end = 0;  // offset (in the file) just after the last intact record
  // The stream stops at the first bad record: a CRC that does not match, a length past any
  // sane size, or an Event that does not decode (an Error naming file and offset). Everything
  // before it is kept.
  std::optional<Error> corrupt;
  // The last record is cut short: a file still being written, or one cut by a crash. Not an
  // error while following; `cut_error()` words it for an import of a finished file.
  bool cut = false;
  Error cut_error(std::string_view name) const;
};

// Reads the records of `bytes`, which start at file offset `base` (0 for a whole file; the
// stored offset when resuming). `name` stands for the file in messages.
EventRead read_event_records(std::string_view bytes, uint64_t base, std::string_view name);

// CRC-32C (Castagnoli) of `data`, and TFRecord's masked form.
uint32_t crc32c(const void* data, size_t size);
inline uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

}  // namespace meshwork::interop
