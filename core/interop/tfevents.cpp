#include "core/interop/tfevents.h"

#include <array>
#include <cstring>

namespace meshwork::interop {

namespace {

// Slicing-by-8 tables for the reflected Castagnoli polynomial 0x82F63B78.
struct Crc32cTables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Crc32cTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};
const Crc32cTables kCrc;

uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, aarch64), as the rest of Meshwork
}
uint32_t load_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Protocol buffer wire format, just what Event needs: varints, fixed 32/64, length-delimited.
class Proto {
 public:
  Proto(const char* p, size_t n) : p_(reinterpret_cast<const uint8_t*>(p)), end_(p_ + n) {}
  bool done() const { return p_ >= end_; }
  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      const uint8_t b = *p_++;
      v |= uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  bool key(uint32_t& field, uint32_t& wire) {
    uint64_t k = 0;
    if (!varint(k) || (k >> 3) == 0 || (k >> 3) > 0x1FFFFFFF) return false;
    field = static_cast<uint32_t>(k >> 3);
    wire = static_cast<uint32_t>(k & 7);
    return true;
  }
  bool fixed64(uint64_t& v) {
    if (end_ - p_ < 8) return false;
    std::memcpy(&v, p_, 8);
    p_ += 8;
    return true;
  }
  bool fixed32(uint32_t& v) {
    if (end_ - p_ < 4) return false;
    std::memcpy(&v, p_, 4);
    p_ += 4;
    return true;
  }
  bool bytes(std::string_view& out) {
    uint64_t n = 0;
    if (!varint(n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    out = std::string_view(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }
  bool skip(uint32_t wire) {
    uint64_t v = 0;
    uint32_t w = 0;
    std::string_view s;
    switch (wire) {
      case 0: return varint(v);
      case 1: return fixed64(v);
      case 2: return bytes(s);
      case 5: return fixed32(w);
      default: return false;  // groups (3, 4) never appear in Event
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

double as_double(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The single number of a scalar TensorProto; nullopt for anything else (a real tensor, strings).
std::optional<double> tensor_scalar(std::string_view bytes) {
  Proto t(bytes.data(), bytes.size());
  uint64_t dtype = 0;
  std::optional<double> value;
  int values = 0;
  std::string_view content;
  while (!t.done()) {
    uint32_t field = 0, wire = 0;
    if (!t.key(field, wire)) return std::nullopt;
    std::string_view packed;
    if (field == 1 && wire == 0) {
      if (!t.varint(dtype)) return std::nullopt;
    } else if (field == 4 && wire == 2) {
      if (!t.bytes(content)) return std::nullopt;
    } else if ((field == 5 || field == 6 || field == 7 || field == 10) && wire == 2) {
      if (!t.bytes(packed)) return std::nullopt;
      Proto p(packed.data(), packed.size());
      while (!p.done()) {
        uint64_t v64 = 0;
        uint32_t v32 = 0;
        if (field == 5 ? !p.fixed32(v32) : field == 6 ? !p.fixed64(v64) : !p.varint(v64)) return std::nullopt;
        value = field == 5 ? as_float(v32) : field == 6 ? as_double(v64)
              : field == 7 ? static_cast<double>(static_cast<int32_t>(v64)) : static_cast<double>(static_cast<int64_t>(v64));
        ++values;
      }
    } else if (field == 5 && wire == 5) {  // an unpacked float_val
      uint32_t v32 = 0;
      if (!t.fixed32(v32)) return std::nullopt;
      value = as_float(v32);
      ++values;
    } else if (!t.skip(wire)) {
      return std::nullopt;
    }
  }
  if (values == 0 && !content.empty()) {  // tensor_content: raw little-endian values
    if (dtype == 1 && content.size() == 4) return as_float(load_u32(content.data()));
    if (dtype == 2 && content.size() == 8) return as_double(load_u64(content.data()));
    if (dtype == 3 && content.size() == 4) return static_cast<double>(static_cast<int32_t>(load_u32(content.data())));
    if (dtype == 9 && content.size() == 8) return static_cast<double>(static_cast<int64_t>(load_u64(content.data())));
    return std::nullopt;
  }
  if (values != 1) return std::nullopt;
  return value;
}

// Appends the scalars of one Summary.Value; false when it does not decode.
bool read_value(std::string_view bytes, int64_t step, double wall_time, std::vector<ScalarPoint>& out) {
  Proto v(bytes.data(), bytes.size());
  std::string_view tag, tensor;
  std::optional<double> simple;
  while (!v.done()) {
    uint32_t field = 0, wire = 0;
    if (!v.key(field, wire)) return false;
    if (field == 1 && wire == 2) {
      if (!v.bytes(tag)) return false;
    } else if (field == 2 && wire == 5) {
      uint32_t bits = 0;
      if (!v.fixed32(bits)) return false;
      simple = as_float(bits);
    } else if (field == 8 && wire == 2) {
      if (!v.bytes(tensor)) return false;
    } else if (!v.skip(wire)) {
      return false;
    }
  }
  if (!simple && !tensor.empty()) simple = tensor_scalar(tensor);
  if (simple && !tag.empty()) out.push_back({step, wall_time, std::string(tag), *simple});
  return true;
}

bool read_event(std::string_view bytes, std::vector<ScalarPoint>& out) {
  Proto e(bytes.data(), bytes.size());
  double wall_time = 0;
  int64_t step = 0;
  std::string_view summary;
  while (!e.done()) {
    uint32_t field = 0, wire = 0;
    if (!e.key(field, wire)) return false;
    if (field == 1 && wire == 1) {
      uint64_t bits = 0;
      if (!e.fixed64(bits)) return false;
      wall_time = as_double(bits);
    } else if (field == 2 && wire == 0) {
      uint64_t v = 0;
      if (!e.varint(v)) return false;
      step = static_cast<int64_t>(v);
    } else if (field == 5 && wire == 2) {
      if (!e.bytes(summary)) return false;
    } else if (!e.skip(wire)) {
      return false;
    }
  }
  if (summary.empty()) return true;  // file_version, graphs, session logs: no scalars
  Proto s(summary.data(), summary.size());
  while (!s.done()) {
    uint32_t field = 0, wire = 0;
    if (!s.key(field, wire)) return false;
    std::string_view value;
    if (field == 1 && wire == 2) {
      if (!s.bytes(value) || !read_value(value, step, wall_time, out)) return false;
    } else if (!s.skip(wire)) {
      return false;
    }
  }
  return true;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  const auto& t = kCrc.t;
  while (size >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    const uint32_t lo = static_cast<uint32_t>(v) ^ c, hi = static_cast<uint32_t>(v >> 32);
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

Error EventRead::cut_error(std::string_view name) const {
  return Error{std::string(name), "offset " + std::to_string(intact_end),
               "the last record is cut short (the " + std::to_string(records) + " intact records before it are kept)"};
}

EventRead read_event_records(std::string_view bytes, uint64_t base, std::string_view name) {
  EventRead r;
  r.intact_end = base;
  size_t pos = 0;
  // A record above this is not a scalar event file's: a corrupt length, not a reason to wait.
  constexpr uint64_t kMaxRecord = 256ull << 20;
  auto bad = [&](const std::string& what) {
    r.corrupt = Error{std::string(name), "offset " + std::to_string(base + pos),
                      what + " (the " + std::to_string(r.records) + " intact records before it are kept)"};
  };
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 12) {
      r.cut = true;
      break;
    }
    const uint64_t length = load_u64(bytes.data() + pos);
    if (masked_crc32c(bytes.data() + pos, 8) != load_u32(bytes.data() + pos + 8)) {
      bad("the record's length fails its CRC-32C: not an intact TFRecord");
      break;
    }
    if (length > kMaxRecord) {
      bad("a record of " + std::to_string(length) + " bytes: over the 256 MiB an event can hold");
      break;
    }
    if (bytes.size() - pos - 12 < length + 4) {
      r.cut = true;
      break;
    }
    const char* data = bytes.data() + pos + 12;
    if (masked_crc32c(data, length) != load_u32(data + length)) {
      bad("the record's data fails its CRC-32C");
      break;
    }
    const size_t before = r.scalars.size();
    if (!read_event(std::string_view(data, length), r.scalars)) {
      r.scalars.resize(before);
      bad("the record is not a tensorflow.Event");
      break;
    }
    pos += 12 + length + 4;
    ++r.records;
    r.intact_end = base + pos;
  }
  return r;
}

}  // namespace meshwork::interop
