// The safetensors reader against files written here byte by byte: round trips of every float
// dtype, row and column slices, a sharded index, and every malformed case with its exact error.
#include "trainer/hf/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace meshwork;
using namespace meshwork::trainer::hf;

namespace {

// The process id keeps runs apart; a test that needs an empty folder takes a name of its own.
fs::path test_dir(const std::string& name) {
  const fs::path d =
      fs::path(::testing::TempDir()) / ("safetensors-" + std::to_string(getpid()) + "-" + name);
  fs::create_directories(d);
  return d;
}

std::string u64_le(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// Any bytes at all, for the truncated and malformed cases.
void write_raw(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A well-formed file: the length, the header as given, the data.
void write_file(const fs::path& path, const std::string& header, const std::string& data) {
  write_raw(path, u64_le(header.size()) + header + data);
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
};

// The header of tensors laid out back to back, in the order given.
std::string header_of(const std::vector<Tensor>& tensors, const std::string& metadata = "") {
  std::string header = "{";
  if (!metadata.empty()) header += "\"__metadata__\":" + metadata + ",";
  size_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    std::string shape;
    for (size_t d = 0; d < t.shape.size(); ++d)
      shape += (d ? "," : "") + std::to_string(t.shape[d]);
    header += (i ? ",\"" : "\"") + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[" +
              shape + "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.data.size()) + "]}";
    offset += t.data.size();
  }
  return header + "}";
}

void write_tensors(const fs::path& path, const std::vector<Tensor>& tensors,
                   const std::string& metadata = "") {
  std::string data;
  for (const Tensor& t : tensors) data += t.data;
  write_file(path, header_of(tensors, metadata), data);
}

void expect_error(const Error& e, const std::string& field, const std::string& value,
                  const std::string& allowed, ErrorKind kind = ErrorKind::invalid_input) {
  EXPECT_EQ(e.field, field);
  EXPECT_EQ(e.value, value);
  EXPECT_EQ(e.allowed, allowed);
  EXPECT_EQ(e.kind, kind);
}

// Opens a file that must fail and checks its error.
void expect_open_error(const fs::path& path, const std::string& field, const std::string& value,
                       const std::string& allowed, ErrorKind kind = ErrorKind::invalid_input) {
  auto file = SafetensorsFile::open(path);
  ASSERT_FALSE(file.ok()) << path;
  expect_error(file.error(), field, value, allowed, kind);
}

// A one-tensor header with the given entry JSON, and `data_size` zero bytes of data.
void expect_entry_error(const std::string& entry, size_t data_size, const std::string& field_tail,
                        const std::string& value, const std::string& allowed) {
  const fs::path p = test_dir("entry") / "x.safetensors";
  write_file(p, "{\"w\":" + entry + "}", std::string(data_size, '\0'));
  expect_open_error(p, p.string() + ": w" + field_tail, value, allowed);
}

const std::string kDtypes =
    "one of BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64";

}  // namespace

TEST(SafetensorsFile, RoundTripsF32AndMetadata) {
  const fs::path p = test_dir("f32") / "model.safetensors";
  const std::vector<float> w{1.5f, -2.25f, 3e-38f, 1e30f, -0.0f, 7.0f};
  // A header padded with spaces, as writers align the data section: nothing relies on it.
  const std::string header =
      header_of({{"w", "F32", {2, 3}, bytes_of(w)}}, "{\"format\":\"pt\"}") + "     ";
  write_file(p, header, bytes_of(w));
  auto file = SafetensorsFile::open(p);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->names(), std::vector<std::string>{"w"});
  EXPECT_EQ(file->metadata().at("format"), "pt");
  const TensorInfo* info = file->find("w");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(file->find("v"), nullptr);
  EXPECT_EQ(info->dtype, Dtype::F32);
  EXPECT_EQ(info->dtype_name, "F32");
  EXPECT_EQ(info->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(info->begin, 0u);
  EXPECT_EQ(info->end, 24u);
  EXPECT_EQ(file->bytes(*info).size(), 24u);
  std::vector<float> out(6);
  ASSERT_TRUE(file->read_rows_f32(*info, 0, 2, out.data()));
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(w[i])) << i;
}

TEST(SafetensorsFile, ConvertsF16IncludingSubnormalsInfAndNan) {
  const fs::path p = test_dir("f16") / "model.safetensors";
  // 1, -2, 65504 (max), 2^-24 (smallest subnormal), 1023 * 2^-24 (largest subnormal),
  // 2^-14 (smallest normal), +inf, -inf, nan, -0.
  const std::vector<uint16_t> h{0x3c00, 0xc000, 0x7bff, 0x0001, 0x03ff,
                                0x0400, 0x7c00, 0xfc00, 0x7e00, 0x8000};
  write_tensors(p, {{"h", "F16", {10}, bytes_of(h)}});
  auto file = SafetensorsFile::open(p);
  ASSERT_TRUE(file.ok()) << file.error().message();
  std::vector<float> out(10);
  ASSERT_TRUE(file->read_rows_f32(*file->find("h"), 0, 10, out.data()));
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 65504.0f);
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(out[4], std::ldexp(1023.0f, -24));
  EXPECT_EQ(out[5], std::ldexp(1.0f, -14));
  EXPECT_EQ(out[6], std::numeric_limits<float>::infinity());
  EXPECT_EQ(out[7], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(out[8]));
  EXPECT_EQ(std::bit_cast<uint32_t>(out[9]), 0x80000000u);
}

TEST(SafetensorsFile, ConvertsBf16AndF64Exactly) {
  const fs::path p = test_dir("bf16") / "model.safetensors";
  const std::vector<float> values{1.0f, -3.140625f, 1e-40f, 3.3895314e38f};
  std::vector<uint16_t> bf;
  for (float v : values) bf.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16));
  const std::vector<double> d{0.5, -1e10, 1.0 / 3.0};
  // The F64 tensor starts at byte 8 of the data: offsets need no alignment.
  write_tensors(p, {{"b", "BF16", {4}, bytes_of(bf)}, {"d", "F64", {3}, bytes_of(d)}});
  auto file = SafetensorsFile::open(p);
  ASSERT_TRUE(file.ok()) << file.error().message();
  std::vector<float> out(4);
  ASSERT_TRUE(file->read_rows_f32(*file->find("b"), 0, 4, out.data()));
  for (size_t i = 0; i < bf.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(out[i]), static_cast<uint32_t>(bf[i]) << 16) << i;
  ASSERT_TRUE(file->read_rows_f32(*file->find("d"), 0, 3, out.data()));
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], -1e10f);
  EXPECT_EQ(out[2], static_cast<float>(1.0 / 3.0));
}

TEST(SafetensorsFile, ReadsRowAndColumnSlices) {
  const fs::path p = test_dir("slices") / "model.safetensors";
  std::vector<float> m(4 * 5);
  for (size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i);
  std::vector<uint16_t> mb;  // the same matrix in bf16 (small integers are exact)
  for (float v : m) mb.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16));
  const std::vector<float> bias{10, 11, 12, 13};
  // One odd byte first so every tensor starts unaligned.
  write_tensors(p, {{"pad", "U8", {1}, std::string(1, '\x7f')},
                    {"m", "F32", {4, 5}, bytes_of(m)},
                    {"mb", "BF16", {4, 5}, bytes_of(mb)},
                    {"bias", "F32", {4}, bytes_of(bias)}});
  auto file = SafetensorsFile::open(p);
  ASSERT_TRUE(file.ok()) << file.error().message();
  for (const char* name : {"m", "mb"}) {
    const TensorInfo& info = *file->find(name);
    std::vector<float> rows(2 * 5);
    ASSERT_TRUE(file->read_rows_f32(info, 1, 2, rows.data()));
    for (int i = 0; i < 10; ++i) EXPECT_EQ(rows[i], 5 + i) << name;
    std::vector<float> cols(4 * 2);
    ASSERT_TRUE(file->read_cols_f32(info, 3, 2, cols.data()));
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(cols[r * 2], r * 5 + 3) << name;
      EXPECT_EQ(cols[r * 2 + 1], r * 5 + 4) << name;
    }
  }
  std::vector<float> b(2);
  ASSERT_TRUE(file->read_rows_f32(*file->find("bias"), 2, 2, b.data()));
  EXPECT_EQ(b, (std::vector<float>{12, 13}));

  const std::string at = p.string() + ": ";
  float sink[32];
  Status s = file->read_rows_f32(*file->find("m"), 3, 2, sink);
  ASSERT_FALSE(s);
  expect_error(s.error(), at + "m: rows", "[3, 3 + 2)", "within the 4 rows");
  s = file->read_rows_f32(*file->find("m"), -1, 1, sink);
  ASSERT_FALSE(s);
  expect_error(s.error(), at + "m: rows", "[-1, -1 + 1)", "within the 4 rows");
  s = file->read_cols_f32(*file->find("m"), 4, 2, sink);
  ASSERT_FALSE(s);
  expect_error(s.error(), at + "m: columns", "[4, 4 + 2)", "within the 5 columns");
  s = file->read_cols_f32(*file->find("bias"), 0, 1, sink);
  ASSERT_FALSE(s);
  expect_error(s.error(), at + "bias: shape", "[4]", "a 2-D tensor to read columns of");
  s = file->read_rows_f32(*file->find("pad"), 0, 1, sink);
  ASSERT_FALSE(s);
  expect_error(s.error(), at + "pad: dtype", "U8", "F32, F16, BF16 or F64 to read as float");
}

TEST(SafetensorsFile, RefusesRowsOfHigherRanks) {
  const fs::path p = test_dir("rank3") / "model.safetensors";
  write_tensors(p, {{"t", "F32", {1, 1, 2}, std::string(8, '\0')}});
  auto file = SafetensorsFile::open(p);
  ASSERT_TRUE(file.ok()) << file.error().message();
  float out[2];
  Status s = file->read_rows_f32(*file->find("t"), 0, 1, out);
  ASSERT_FALSE(s);
  expect_error(s.error(), p.string() + ": t: shape", "[1, 1, 2]",
               "a 1-D or 2-D tensor to read rows of");
}

TEST(SafetensorsFile, MovesKeepTheMappingAndTheEntries) {
  const fs::path p = test_dir("move") / "model.safetensors";
  write_tensors(p, {{"w", "F32", {1}, bytes_of(std::vector<float>{4.0f})}});
  auto opened = SafetensorsFile::open(p);
  ASSERT_TRUE(opened.ok());
  const TensorInfo* info = opened->find("w");
  SafetensorsFile moved = std::move(*opened);
  EXPECT_EQ(moved.find("w"), info);
  float out = 0;
  ASSERT_TRUE(moved.read_rows_f32(*info, 0, 1, &out));
  EXPECT_EQ(out, 4.0f);
}

TEST(SafetensorsErrors, UnreadableAndTruncatedFiles) {
  const fs::path d = test_dir("truncated");
  expect_open_error(d / "missing.safetensors", (d / "missing.safetensors").string(),
                    "No such file or directory", "a readable safetensors file", ErrorKind::io);
  expect_open_error(d, d.string(), "not a regular file", "a readable safetensors file",
                    ErrorKind::io);
  const fs::path p = d / "x.safetensors";
  write_raw(p, "");
  expect_open_error(p, p.string(), "0 bytes", "at least 8 bytes (the header length)");
  write_raw(p, std::string(5, '\0'));
  expect_open_error(p, p.string(), "5 bytes", "at least 8 bytes (the header length)");
  // A header cut short: the length promises 30 bytes, the file has 8 + 12.
  write_raw(p, u64_le(30) + "{\"w\":{\"dtyp");
  expect_open_error(p, p.string(), "header length 30 in a file of 19 bytes",
                    "a header that ends within the file (8 + length <= file size)");
  // A length far past the end (and the sum 8 + length wrapping around must not pass).
  write_raw(p, u64_le(~0ull - 3) + "{}");
  expect_open_error(p, p.string(), "header length 18446744073709551612", "at most 100000000 bytes");
  write_raw(p, u64_le(100'000'001) + "{}");
  expect_open_error(p, p.string(), "header length 100000001", "at most 100000000 bytes");
  write_raw(p, u64_le(99'999'999) + "{}");
  expect_open_error(p, p.string(), "header length 99999999 in a file of 10 bytes",
                    "a header that ends within the file (8 + length <= file size)");
}

TEST(SafetensorsErrors, HeaderNotAJsonObject) {
  const fs::path p = test_dir("notjson") / "x.safetensors";
  write_file(p, "{\"w\": ", "");
  expect_open_error(p, p.string() + ": header", "not valid JSON (error at byte 7)",
                    "a JSON object");
  write_file(p, "[1, 2]", "");
  expect_open_error(p, p.string() + ": header", "array", "a JSON object");
  write_file(p, "", "");
  expect_open_error(p, p.string() + ": header", "not valid JSON (error at byte 1)",
                    "a JSON object");
}

TEST(SafetensorsErrors, EntriesWithMissingOrWrongFields) {
  expect_entry_error("[1]", 0, "", "[1]", "an object with dtype, shape and data_offsets");
  expect_entry_error(R"({"shape":[1],"data_offsets":[0,4]})", 4, ": dtype", "missing",
                     "present in every tensor entry");
  expect_entry_error(R"({"dtype":"F32","data_offsets":[0,4]})", 4, ": shape", "missing",
                     "present in every tensor entry");
  expect_entry_error(R"({"dtype":"F32","shape":[1]})", 4, ": data_offsets", "missing",
                     "present in every tensor entry");
  expect_entry_error(R"({"dtype":5,"shape":[1],"data_offsets":[0,4]})", 4, ": dtype", "5", kDtypes);
  expect_entry_error(R"({"dtype":"Q4","shape":[1],"data_offsets":[0,4]})", 4, ": dtype", "\"Q4\"",
                     kDtypes);
  expect_entry_error(R"({"dtype":"F32","shape":"1","data_offsets":[0,4]})", 4, ": shape", "\"1\"",
                     "an array of non-negative integers");
  expect_entry_error(R"({"dtype":"F32","shape":[-1,2],"data_offsets":[0,4]})", 4, ": shape",
                     "[-1,2]", "an array of non-negative integers");
  expect_entry_error(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})", 4, ": shape", "[1.5]",
                     "an array of non-negative integers");
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})", 4, ": data_offsets",
                     "[0]", "[begin, end], two non-negative integers");
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":[0,"4"]})", 4, ": data_offsets",
                     "[0,\"4\"]", "[begin, end], two non-negative integers");
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":[-4,0]})", 4, ": data_offsets",
                     "[-4,0]", "[begin, end], two non-negative integers");
}

TEST(SafetensorsErrors, OffsetsAndSizes) {
  expect_entry_error(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})", 4, ": data_offsets",
                     "[4,0]", "begin <= end");
  expect_entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 4, ": data_offsets",
                     "[0,8]", "within the data section of 4 bytes");
  expect_entry_error(R"({"dtype":"F32","shape":[2],"data_offsets":[0,4]})", 4, "",
                     "4 bytes for F32 [2]", "product(shape) * 4 bytes");
  expect_entry_error(R"({"dtype":"BF16","shape":[3,1],"data_offsets":[0,4]})", 4, "",
                     "4 bytes for BF16 [3, 1]", "product(shape) * 2 bytes");
  // A product that wraps around 2^64 to exactly the stored size must still be refused.
  expect_entry_error(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]})", 4,
                     "", "0 bytes for U8 [4294967296, 4294967296]", "product(shape) * 1 bytes");
  // Empty tensors are fine anywhere.
  const fs::path p = test_dir("empty") / "x.safetensors";
  write_file(p,
             R"({"e":{"dtype":"F32","shape":[0,3],"data_offsets":[2,2]},)"
             R"("s":{"dtype":"U8","shape":[],"data_offsets":[1,2]}})",
             "ab");
  auto file = SafetensorsFile::open(p);
  ASSERT_TRUE(file.ok()) << file.error().message();
  EXPECT_EQ(file->find("s")->numel(), 1);
  EXPECT_EQ(file->find("e")->numel(), 0);
  // Empty with huge other dimensions: 0 elements, not their product wrapped around int64.
  const fs::path q = test_dir("empty-huge") / "x.safetensors";
  write_file(q, R"({"z":{"dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", "");
  auto huge = SafetensorsFile::open(q);
  ASSERT_TRUE(huge.ok()) << huge.error().message();
  EXPECT_EQ(huge->find("z")->numel(), 0);
  EXPECT_TRUE(huge->bytes(*huge->find("z")).empty());
}

TEST(SafetensorsErrors, OverlapsAndDuplicates) {
  const fs::path p = test_dir("overlap") / "x.safetensors";
  write_file(p,
             R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
             R"("c":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
             std::string(20, '\0'));
  expect_open_error(p, p.string() + ": c", "bytes [8, 16) overlap a's [0, 16)",
                    "a byte range no other tensor uses");
  write_file(p,
             R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             std::string(8, '\0'));
  expect_open_error(p, p.string() + ": header", "\"a\" appears twice", "each name once");
  // A key repeated inside an entry is not a duplicate tensor.
  write_file(p, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":{"a":1}}})",
             std::string(4, '\0'));
  EXPECT_TRUE(SafetensorsFile::open(p).ok());
}

TEST(SafetensorsErrors, MetadataMustBeStrings) {
  const fs::path p = test_dir("metadata") / "x.safetensors";
  write_file(p, R"({"__metadata__":{"format":1}})", "");
  expect_open_error(p, p.string() + ": __metadata__: format", "1", "a string");
  write_file(p, R"({"__metadata__":[]})", "");
  expect_open_error(p, p.string() + ": __metadata__", "[]", "an object of string values");
}

TEST(SafetensorsIndex, ReadsShardsLazily) {
  const fs::path d = test_dir("sharded");
  write_tensors(d / "model-00001-of-00002.safetensors",
                {{"a", "F32", {2}, bytes_of(std::vector<float>{1, 2})}});
  write_tensors(d / "model-00002-of-00002.safetensors",
                {{"b", "F16", {1}, bytes_of(std::vector<uint16_t>{0x3c00})}});
  write_raw(d / "model.safetensors.index.json",
            R"({"metadata":{"total_size":10},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
            R"("b":"model-00002-of-00002.safetensors"}})");
  auto index = SafetensorsIndex::open(d);
  ASSERT_TRUE(index.ok()) << index.error().message();
  EXPECT_EQ(index->names(), (std::vector<std::string>{"a", "b"}));
  auto b = index->find("b");
  ASSERT_TRUE(b.ok()) << b.error().message();
  float out[2];
  ASSERT_TRUE(b->file->read_rows_f32(*b->info, 0, 1, out));
  EXPECT_EQ(out[0], 1.0f);
  auto a = index->find("a");
  ASSERT_TRUE(a.ok()) << a.error().message();
  ASSERT_TRUE(a->file->read_rows_f32(*a->info, 0, 2, out));
  EXPECT_EQ(out[1], 2.0f);
  EXPECT_EQ(a->file->path(), d / "model-00001-of-00002.safetensors");
  auto none = index->find("c");
  ASSERT_FALSE(none.ok());
  const std::string at = (d / "model.safetensors.index.json").string();
  expect_error(none.error(), at, "no tensor c", "a tensor the checkpoint lists");
}

TEST(SafetensorsIndex, OpensASingleFile) {
  const fs::path d = test_dir("single");
  write_tensors(d / "model.safetensors", {{"w", "F32", {1}, bytes_of(std::vector<float>{3})}});
  auto index = SafetensorsIndex::open(d);
  ASSERT_TRUE(index.ok()) << index.error().message();
  auto w = index->find("w");
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_EQ(w->info->shape, std::vector<int64_t>{1});
  EXPECT_EQ(index->index_path(), d / "model.safetensors");
}

TEST(SafetensorsIndex, Errors) {
  const fs::path d = test_dir("index-errors");
  auto empty = SafetensorsIndex::open(d);
  ASSERT_FALSE(empty.ok());
  expect_error(empty.error(), d.string(), "no model.safetensors.index.json or model.safetensors",
               "a Hugging Face checkpoint directory", ErrorKind::io);

  const fs::path index_path = d / "model.safetensors.index.json";
  const std::string at = index_path.string();
  write_raw(index_path, R"({"weight_map":{"a":"one.safetensors","b":"two.safetensors"}})");
  write_tensors(d / "one.safetensors", {{"x", "F32", {1}, std::string(4, '\0')}});
  auto missing_shard = SafetensorsIndex::open(d);
  ASSERT_FALSE(missing_shard.ok());
  expect_error(missing_shard.error(), at + ": weight_map: b", "\"two.safetensors\" does not exist",
               "a shard file in " + d.string(), ErrorKind::io);

  write_raw(index_path, R"({"weight_map":{"a":"one.safetensors"}})");
  auto index = SafetensorsIndex::open(d);
  ASSERT_TRUE(index.ok()) << index.error().message();
  auto a = index->find("a");
  ASSERT_FALSE(a.ok());
  expect_error(a.error(), at + ": a", "not in one.safetensors",
               "a tensor present in the shard the weight_map names");

  write_raw(index_path, R"({"weight_map":{"a":"../one.safetensors"}})");
  auto outside = SafetensorsIndex::open(d);
  ASSERT_FALSE(outside.ok());
  expect_error(outside.error(), at + ": weight_map: a", "\"../one.safetensors\"",
               "a shard file name in " + d.string());

  write_raw(index_path, R"({"weight_map":[]})");
  auto not_object = SafetensorsIndex::open(d);
  ASSERT_FALSE(not_object.ok());
  expect_error(not_object.error(), at + ": weight_map", "[]",
               "an object mapping tensor names to shard files");

  write_raw(index_path, R"({"weight_map":{"a":"one.safetensors"},"weight_map":{}})");
  auto twice = SafetensorsIndex::open(d);
  ASSERT_FALSE(twice.ok());
  expect_error(twice.error(), at, "\"weight_map\" appears twice", "each name once");

  // A shard's own error names the shard.
  write_raw(index_path, R"({"weight_map":{"a":"bad.safetensors"}})");
  write_raw(d / "bad.safetensors", "abc");
  auto reopened = SafetensorsIndex::open(d);
  ASSERT_TRUE(reopened.ok()) << reopened.error().message();
  auto bad = reopened->find("a");
  ASSERT_FALSE(bad.ok());
  expect_error(bad.error(), (d / "bad.safetensors").string(), "3 bytes",
               "at least 8 bytes (the header length)");
}
