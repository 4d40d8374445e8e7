#include "trainer/hf/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

namespace meshwork::trainer::hf {
namespace fs = std::filesystem;

namespace {

// The position of a dtype in the Rust crate's Dtype enum (BOOL, F4, F6_E2M3, F6_E3M2, U8, I8,
// F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64): the
// library sorts by it, descending. Only the relative order matters.
int rust_rank(Dtype d) {
  switch (d) {
    case Dtype::BOOL: return 0;
    case Dtype::U8: return 4;
    case Dtype::I8: return 5;
    case Dtype::F8_E5M2: return 6;
    case Dtype::F8_E4M3: return 7;
    case Dtype::I16: return 9;
    case Dtype::U16: return 10;
    case Dtype::F16: return 11;
    case Dtype::BF16: return 12;
    case Dtype::I32: return 13;
    case Dtype::U32: return 14;
    case Dtype::F32: return 15;
    case Dtype::F64: return 17;
    case Dtype::I64: return 18;
    case Dtype::U64: return 19;
  }
  return 0;
}

Status write_all(int fd, const char* data, size_t size) {
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::write(fd, data + off, size - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error{"write", std::strerror(errno), "room to write", ErrorKind::io};
    off += static_cast<size_t>(n);
  }
  return {};
}

}  // namespace

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorSpec> safetensors_order(std::vector<TensorSpec> tensors) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
    const int ra = rust_rank(a.dtype), rb = rust_rank(b.dtype);
    if (ra != rb) return ra > rb;
    return a.name < b.name;
  });
  return tensors;
}

std::string safetensors_header(const std::vector<TensorSpec>& ordered,
                               const std::map<std::string, std::string>& metadata) {
  // Built by hand: nlohmann::json sorts object keys, the format keeps the data order.
  std::string h = "{";
  auto key = [](const std::string& k) { return nlohmann::json(k).dump(); };
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) h += ",";
      first = false;
      h += key(k) + ":" + key(v);
    }
    h += "}";
  }
  uint64_t offset = 0;
  for (const TensorSpec& t : ordered) {
    if (h.size() > 1) h += ",";
    h += key(t.name) + ":{\"dtype\":\"" + std::string(dtype_name(t.dtype)) + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) h += (i ? "," : "") + std::to_string(t.shape[i]);
    const uint64_t end = offset + static_cast<uint64_t>(t.bytes());
    h += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + h;
}

Result<SafetensorsWriter> SafetensorsWriter::create(const fs::path& path, std::vector<TensorSpec> tensors,
                                                    const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter w;
  w.path_ = path;
  w.order_ = safetensors_order(std::move(tensors));
  for (size_t i = 1; i < w.order_.size(); ++i)
    if (w.order_[i].name == w.order_[i - 1].name)
      return Error{"tensor", w.order_[i].name, "a name that appears once in " + path.string()};
  w.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd_ < 0)
    return Error{path.string(), std::strerror(errno), "a writable safetensors file", ErrorKind::io};
  const std::string header = safetensors_header(w.order_, metadata);
  if (Status s = write_all(w.fd_, header.data(), header.size()); !s.ok()) return w.fail("header").error();
  return w;
}

SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&& o) noexcept
    : path_(std::move(o.path_)), order_(std::move(o.order_)), next_(o.next_), fd_(o.fd_) {
  o.fd_ = -1;
}

SafetensorsWriter& SafetensorsWriter::operator=(SafetensorsWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    order_ = std::move(o.order_);
    next_ = o.next_;
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status SafetensorsWriter::fail(const std::string& what) {
  const std::string why = std::strerror(errno);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  return Error{path_.string(), what + ": " + why, "room to write the safetensors file", ErrorKind::io};
}

Status SafetensorsWriter::write(const std::string& name, std::span<const std::byte> data) {
  if (fd_ < 0) return Error{path_.string(), name, "an open writer", ErrorKind::internal};
  if (next_ >= order_.size() || order_[next_].name != name)
    return Error{path_.string(), name,
                 next_ < order_.size() ? "tensor " + order_[next_].name + " next" : "no more tensors",
                 ErrorKind::internal};
  if (static_cast<int64_t>(data.size()) != order_[next_].bytes())
    return Error{name, std::to_string(data.size()) + " bytes",
                 std::to_string(order_[next_].bytes()) + " bytes (dtype x shape)", ErrorKind::internal};
  if (Status s = write_all(fd_, reinterpret_cast<const char*>(data.data()), data.size()); !s.ok())
    return fail(name);
  ++next_;
  return {};
}

Status SafetensorsWriter::finish() {
  if (fd_ < 0) return Error{path_.string(), "finish", "an open writer", ErrorKind::internal};
  if (next_ != order_.size())
    return Error{path_.string(), "tensor " + order_[next_].name + " not written", "every tensor written",
                 ErrorKind::internal};
  if (::fsync(fd_) != 0) return fail("fsync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return fail("close");
  return {};
}

Status write_file_synced(const fs::path& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error{path.string(), std::strerror(errno), "a writable file", ErrorKind::io};
  Status s = write_all(fd, text.data(), text.size());
  if (s.ok() && ::fsync(fd) != 0) s = Error{path.string(), std::strerror(errno), "fsync", ErrorKind::io};
  ::close(fd);
  if (!s.ok()) return Error{path.string(), s.error().message(), "a writable file", ErrorKind::io};
  return {};
}

}  // namespace meshwork::trainer::hf
