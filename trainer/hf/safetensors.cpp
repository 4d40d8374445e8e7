#include "trainer/hf/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

namespace meshwork::trainer::hf {

// The data section is read by memcpy of little-endian bytes straight into host values.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using nlohmann::json;

struct DtypeEntry {
  Dtype dtype;
  std::string_view name;
  int64_t size;
};
constexpr std::array<DtypeEntry, 15> kDtypes{{
    {Dtype::BOOL, "BOOL", 1},
    {Dtype::U8, "U8", 1},
    {Dtype::I8, "I8", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1},
    {Dtype::F8_E4M3, "F8_E4M3", 1},
    {Dtype::I16, "I16", 2},
    {Dtype::U16, "U16", 2},
    {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},
    {Dtype::I32, "I32", 4},
    {Dtype::U32, "U32", 4},
    {Dtype::F32, "F32", 4},
    {Dtype::I64, "I64", 8},
    {Dtype::U64, "U64", 8},
    {Dtype::F64, "F64", 8},
}};
constexpr std::string_view kDtypeList =
    "one of BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64";

const DtypeEntry& entry_of(Dtype dtype) {
  for (const auto& e : kDtypes)
    if (e.dtype == dtype) return e;
  return kDtypes[0];
}

std::string where(const std::filesystem::path& path, std::string_view tensor) {
  return path.string() + ": " + std::string(tensor);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string range_text(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

// Parses the header, recording every top-level key seen twice: nlohmann keeps only the last
// value of a repeated key, which would silently drop a tensor.
Result<json> parse_json_object(std::string_view text, const std::string& field) {
  std::optional<std::string> duplicate;
  std::set<std::string> keys;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key &&
        !keys.insert(parsed.get<std::string>()).second && !duplicate)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), callback);
  } catch (const json::parse_error& e) {
    return Error{field, "not valid JSON (error at byte " + std::to_string(e.byte) + ")",
                 "a JSON object"};
  } catch (const json::exception& e) {
    // Valid syntax the parser still cannot hold, e.g. a number past double's range (5e555555,
    // found by fuzzing): nlohmann throws out_of_range, not parse_error.
    return Error{field, std::string("not readable JSON (") + e.what() + ")", "a JSON object"};
  }
  if (!value.is_object()) return Error{field, std::string(value.type_name()), "a JSON object"};
  if (duplicate) return Error{field, "\"" + *duplicate + "\" appears twice", "each name once"};
  return value;
}

// A JSON integer as int64 / uint64, or nullopt for anything else (floats, negatives, strings).
std::optional<uint64_t> as_unsigned(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

Result<TensorInfo> parse_entry(const std::filesystem::path& path, const std::string& name,
                               const json& entry, uint64_t data_size) {
  const std::string at = where(path, name);
  if (!entry.is_object())
    return Error{at, entry.dump(), "an object with dtype, shape and data_offsets"};
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key))
      return Error{at + ": " + key, "missing", "present in every tensor entry"};

  TensorInfo info;
  info.name = name;
  const json& dtype = entry["dtype"];
  const DtypeEntry* found = nullptr;
  if (dtype.is_string())
    for (const auto& e : kDtypes)
      if (e.name == dtype.get<std::string>()) found = &e;
  if (!found) return Error{at + ": dtype", dtype.dump(), std::string(kDtypeList)};
  info.dtype = found->dtype;
  info.dtype_name = std::string(found->name);

  const json& shape = entry["shape"];
  if (!shape.is_array())
    return Error{at + ": shape", shape.dump(), "an array of non-negative integers"};
  for (const json& d : shape) {
    auto dim = as_unsigned(d);
    if (!dim || *dim > static_cast<uint64_t>(INT64_MAX))
      return Error{at + ": shape", shape.dump(), "an array of non-negative integers"};
    info.shape.push_back(static_cast<int64_t>(*dim));
  }

  const json& offsets = entry["data_offsets"];
  std::optional<uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = as_unsigned(offsets[0]);
    end = as_unsigned(offsets[1]);
  }
  if (!begin || !end)
    return Error{at + ": data_offsets", offsets.dump(), "[begin, end], two non-negative integers"};
  if (*begin > *end) return Error{at + ": data_offsets", offsets.dump(), "begin <= end"};
  if (*end > data_size)
    return Error{at + ": data_offsets", offsets.dump(),
                 "within the data section of " + std::to_string(data_size) + " bytes"};
  info.begin = *begin;
  info.end = *end;

  // product(shape) * size in 128 bits: a huge shape must not wrap around to the stored size.
  unsigned __int128 expected = static_cast<unsigned __int128>(found->size);
  for (int64_t d : info.shape) {
    expected *= static_cast<uint64_t>(d);
    if (expected > data_size) expected = static_cast<unsigned __int128>(data_size) + 1;
  }
  if (expected != *end - *begin)
    return Error{at,
                 std::to_string(*end - *begin) + " bytes for " + info.dtype_name + " " +
                     shape_text(info.shape),
                 "product(shape) * " + std::to_string(found->size) + " bytes"};
  return info;
}

Status check_overlaps(const std::filesystem::path& path,
                      const std::map<std::string, TensorInfo, std::less<>>& tensors) {
  std::vector<const TensorInfo*> sorted;
  for (const auto& [name, info] : tensors)
    if (info.end > info.begin) sorted.push_back(&info);  // empty ranges overlap nothing
  std::sort(sorted.begin(), sorted.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return std::tie(a->begin, a->end, a->name) < std::tie(b->begin, b->end, b->name);
  });
  // Sorted by begin, a range overlaps an earlier one exactly when it starts before the furthest
  // end reached so far.
  const TensorInfo* reach = sorted.empty() ? nullptr : sorted[0];
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->begin < reach->end)
      return Error{where(path, sorted[i]->name),
                   "bytes " + range_text(sorted[i]->begin, sorted[i]->end) + " overlap " +
                       reach->name + "'s " + range_text(reach->begin, reach->end),
                   "a byte range no other tensor uses"};
    if (sorted[i]->end > reach->end) reach = sorted[i];
  }
  return Status::Ok();
}

Result<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{path.string(), std::strerror(errno), "a readable file"}.as(ErrorKind::io);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::string_view dtype_name(Dtype dtype) { return entry_of(dtype).name; }
int64_t dtype_size(Dtype dtype) { return entry_of(dtype).size; }

int64_t TensorInfo::numel() const {
  // A zero anywhere makes the tensor empty, however large the other dimensions: [2^32, 2^32, 0]
  // passes the byte-size check with 0 bytes, and its leading product must not overflow. Without
  // a zero the product is at most the checked byte count.
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float f16_to_f32(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits;
  if (exponent == 31)
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, or nan keeping its payload
  else
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  return std::bit_cast<float>(bits);
}

float bf16_to_f32(uint16_t bf16) { return std::bit_cast<float>(static_cast<uint32_t>(bf16) << 16); }

void convert_to_f32(Dtype dtype, const std::byte* src, size_t n, float* out) {
  switch (dtype) {
    case Dtype::F32:
      std::memcpy(out, src, n * sizeof(float));
      break;
    case Dtype::F64:
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, src + i * 8, 8);
        out[i] = static_cast<float>(v);
      }
      break;
    case Dtype::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, src + i * 2, 2);
        out[i] = f16_to_f32(v);
      }
      break;
    case Dtype::BF16:
      // A loop of its own (no per-element dtype test) so the compiler vectorizes it: loading a
      // checkpoint is mostly this widening.
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, src + i * 2, 2);
        out[i] = bf16_to_f32(v);
      }
      break;
    default:
      break;
  }
}

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile file;
  file.path_ = path;
  const std::string name = path.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error{name, std::strerror(errno), "a readable safetensors file"}.as(ErrorKind::io);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Error{name, std::strerror(err), "a readable safetensors file"}.as(ErrorKind::io);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{name, "not a regular file", "a readable safetensors file"}.as(ErrorKind::io);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Error{name, std::to_string(size) + " bytes", "at least 8 bytes (the header length)"};
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file open
  if (map == MAP_FAILED)
    return Error{name, std::strerror(map_errno), "a file that can be memory-mapped"}.as(
        ErrorKind::io);
  file.map_ = static_cast<const std::byte*>(map);
  file.map_size_ = size;

  uint64_t header_size;
  std::memcpy(&header_size, file.map_, 8);
  if (header_size > kMaxHeaderBytes)
    return Error{name, "header length " + std::to_string(header_size),
                 "at most " + std::to_string(kMaxHeaderBytes) + " bytes"};
  if (header_size > size - 8)
    return Error{name,
                 "header length " + std::to_string(header_size) + " in a file of " +
                     std::to_string(size) + " bytes",
                 "a header that ends within the file (8 + length <= file size)"};
  file.data_ = file.map_ + 8 + header_size;
  const std::string_view header(reinterpret_cast<const char*>(file.map_ + 8), header_size);
  if (Status s = file.parse_header(header, size - 8 - header_size); !s) return s.error();
  return file;
}

Status SafetensorsFile::parse_header(std::string_view header, uint64_t data_size) {
  auto parsed = parse_json_object(header, path_.string() + ": header");
  if (!parsed) return parsed.error();
  for (const auto& [name, entry] : parsed->items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        return Error{where(path_, name), entry.dump(), "an object of string values"};
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          return Error{where(path_, name) + ": " + key, value.dump(), "a string"};
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    auto info = parse_entry(path_, name, entry, data_size);
    if (!info) return info.error();
    tensors_.emplace(name, std::move(*info));
  }
  return check_overlaps(path_, tensors_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_size_ = std::exchange(other.map_size_, 0);
    data_ = std::exchange(other.data_, nullptr);
    tensors_ = std::move(other.tensors_);  // nodes move: TensorInfo pointers stay valid
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() {
  if (map_) ::munmap(const_cast<std::byte*>(map_), map_size_);
  map_ = nullptr;
  map_size_ = 0;
  data_ = nullptr;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& info) const {
  return {data_ + info.begin, static_cast<size_t>(info.end - info.begin)};
}

namespace {

bool is_float_dtype(Dtype d) {
  return d == Dtype::F32 || d == Dtype::F16 || d == Dtype::BF16 || d == Dtype::F64;
}

// [begin, begin + count) within [0, limit), without overflowing.
bool in_range(int64_t begin, int64_t count, int64_t limit) {
  return begin >= 0 && count >= 0 && begin <= limit && count <= limit - begin;
}

std::string slice_text(int64_t begin, int64_t count) {
  return "[" + std::to_string(begin) + ", " + std::to_string(begin) + " + " +
         std::to_string(count) + ")";
}

}  // namespace

Status SafetensorsFile::read_rows_f32(const TensorInfo& info, int64_t row_begin, int64_t row_count,
                                      float* out) const {
  const std::string at = where(path_, info.name);
  if (!is_float_dtype(info.dtype))
    return Error{at + ": dtype", info.dtype_name, "F32, F16, BF16 or F64 to read as float"};
  if (info.shape.size() != 1 && info.shape.size() != 2)
    return Error{at + ": shape", shape_text(info.shape), "a 1-D or 2-D tensor to read rows of"};
  const int64_t rows = info.shape[0];
  const int64_t cols = info.shape.size() == 2 ? info.shape[1] : 1;
  if (!in_range(row_begin, row_count, rows))
    return Error{at + ": rows", slice_text(row_begin, row_count),
                 "within the " + std::to_string(rows) + " rows"};
  const int64_t size = dtype_size(info.dtype);
  convert_to_f32(info.dtype, data_ + info.begin + row_begin * cols * size,
                 static_cast<size_t>(row_count * cols), out);
  return Status::Ok();
}

Status SafetensorsFile::read_cols_f32(const TensorInfo& info, int64_t col_begin, int64_t col_count,
                                      float* out) const {
  const std::string at = where(path_, info.name);
  if (!is_float_dtype(info.dtype))
    return Error{at + ": dtype", info.dtype_name, "F32, F16, BF16 or F64 to read as float"};
  if (info.shape.size() != 2)
    return Error{at + ": shape", shape_text(info.shape), "a 2-D tensor to read columns of"};
  const int64_t rows = info.shape[0];
  const int64_t cols = info.shape[1];
  if (!in_range(col_begin, col_count, cols))
    return Error{at + ": columns", slice_text(col_begin, col_count),
                 "within the " + std::to_string(cols) + " columns"};
  const int64_t size = dtype_size(info.dtype);
  for (int64_t r = 0; r < rows; ++r)
    convert_to_f32(info.dtype, data_ + info.begin + (r * cols + col_begin) * size,
                   static_cast<size_t>(col_count), out + r * col_count);
  return Status::Ok();
}

Result<SafetensorsIndex> SafetensorsIndex::open(const std::filesystem::path& dir) {
  SafetensorsIndex index;
  index.dir_ = dir;
  const auto index_path = dir / "model.safetensors.index.json";
  const auto single_path = dir / "model.safetensors";
  std::error_code ec;
  if (!std::filesystem::exists(index_path, ec)) {
    if (!std::filesystem::exists(single_path, ec))
      return Error{dir.string(), "no model.safetensors.index.json or model.safetensors",
                   "a Hugging Face checkpoint directory"}
          .as(ErrorKind::io);
    index.index_path_ = single_path;
    auto file = SafetensorsFile::open(single_path);
    if (!file) return file.error();
    for (const auto& name : file->names()) index.weight_map_[name] = "model.safetensors";
    index.shards_["model.safetensors"] = std::make_unique<SafetensorsFile>(std::move(*file));
    return index;
  }
  index.index_path_ = index_path;
  auto text = read_text(index_path);
  if (!text) return text.error();
  auto parsed = parse_json_object(*text, index_path.string());
  if (!parsed) return parsed.error();
  const std::string at = index_path.string() + ": weight_map";
  if (!parsed->contains("weight_map") || !(*parsed)["weight_map"].is_object())
    return Error{at, parsed->contains("weight_map") ? (*parsed)["weight_map"].dump() : "missing",
                 "an object mapping tensor names to shard files"};
  for (const auto& [name, shard] : (*parsed)["weight_map"].items()) {
    const std::string shard_name = shard.is_string() ? shard.get<std::string>() : "";
    // A shard is a plain file name in the directory, never a path out of it.
    if (shard_name.empty() || shard_name.find('/') != std::string::npos || shard_name == "." ||
        shard_name == "..")
      return Error{at + ": " + name, shard.dump(), "a shard file name in " + dir.string()};
    if (!std::filesystem::is_regular_file(dir / shard_name, ec))
      return Error{at + ": " + name, shard.dump() + " does not exist",
                   "a shard file in " + dir.string()}
          .as(ErrorKind::io);
    index.weight_map_[name] = shard_name;
  }
  return index;
}

Result<SafetensorsIndex::Found> SafetensorsIndex::find(const std::string& name) {
  auto it = weight_map_.find(name);
  if (it == weight_map_.end())
    return Error{index_path_.string(), "no tensor " + name, "a tensor the checkpoint lists"};
  auto& shard = shards_[it->second];
  if (!shard) {
    auto file = SafetensorsFile::open(dir_ / it->second);
    if (!file) {
      shards_.erase(it->second);
      return file.error();
    }
    shard = std::make_unique<SafetensorsFile>(std::move(*file));
  }
  const TensorInfo* info = shard->find(name);
  if (!info)
    return Error{index_path_.string() + ": " + name, "not in " + it->second,
                 "a tensor present in the shard the weight_map names"};
  return Found{shard.get(), info};
}

std::vector<std::string> SafetensorsIndex::names() const {
  std::vector<std::string> out;
  for (const auto& [name, shard] : weight_map_) out.push_back(name);
  return out;
}

}  // namespace meshwork::trainer::hf
