// The safetensors writer against the `safetensors` library itself: the library loads what the
// writer wrote (every value checked), and the file the library writes from those tensors is
// byte-identical to ours (tests/trainer/hf/safetensors_reference.py). Plus the writer's own
// contract: order, sizes, and the reader reading it back.
#include "trainer/hf/safetensors_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainer/hf/safetensors.h"
#include "tests/scratch_dirs.h"

namespace fs = std::filesystem;
using namespace meshwork;
using namespace meshwork::trainer::hf;

namespace {

fs::path test_dir(const std::string& name) {
  const fs::path root = fs::path(::testing::TempDir()) / ("st-writer-" + std::to_string(getpid()));
  return ::meshwork::test::fresh_scratch_dir(root, root / name);
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

uint16_t to_bf16(float f) {  // the values used are exact in bf16
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
}
uint16_t to_f16(float f) {  // small exact values only: halves of 0..250 and small offsets
  if (f == 0) return 0;
  const uint32_t b = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (b >> 16) & 0x8000;
  const int exp = static_cast<int>((b >> 23) & 0xff) - 127 + 15;
  const uint32_t mant = (b >> 13) & 0x3ff;
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
}

// Element i of tensor k: (i % 251) * 0.5 - k (the Python side checks the same formula).
std::string values(const TensorSpec& t, int k) {
  std::string out;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = static_cast<double>(i % 251) * 0.5 - k;
    char b[8];
    size_t n = 0;
    switch (t.dtype) {
      case Dtype::F32: { float f = static_cast<float>(v); std::memcpy(b, &f, 4); n = 4; break; }
      case Dtype::BF16: { uint16_t h = to_bf16(static_cast<float>(v)); std::memcpy(b, &h, 2); n = 2; break; }
      case Dtype::F16: { uint16_t h = to_f16(static_cast<float>(v)); std::memcpy(b, &h, 2); n = 2; break; }
      case Dtype::I64: { int64_t x = static_cast<int64_t>(v); std::memcpy(b, &x, 8); n = 8; break; }
      default: ADD_FAILURE() << "dtype not in this test";
    }
    out.append(b, n);
  }
  return out;
}

struct Named {
  TensorSpec spec;
  int k;
};

const std::vector<Named>& tensors() {
  static const std::vector<Named> t = {
      {{"z.weight", Dtype::F32, {3, 4}}, 0}, {{"a.bias", Dtype::BF16, {7}}, 1},
      {{"m.steps", Dtype::I64, {2, 3}}, 2},  {{"b.half", Dtype::F16, {5}}, 3},
      {{"scalar", Dtype::F32, {}}, 4},
  };
  return t;
}

Status write_all(const fs::path& path) {
  std::vector<TensorSpec> specs;
  for (const auto& n : tensors()) specs.push_back(n.spec);
  auto w = SafetensorsWriter::create(path, specs);
  if (!w.ok()) return w.error();
  for (const TensorSpec& s : w->order()) {
    int k = 0;
    for (const auto& n : tensors())
      if (n.spec.name == s.name) k = n.k;
    const std::string bytes = values(s, k);
    if (Status st = w->write(s.name, std::as_bytes(std::span(bytes.data(), bytes.size()))); !st.ok()) return st;
  }
  return w->finish();
}

}  // namespace

TEST(SafetensorsWriter, OrdersLikeTheLibraryDtypeRankThenName) {
  std::vector<TensorSpec> specs;
  for (const auto& n : tensors()) specs.push_back(n.spec);
  std::vector<std::string> names;
  for (const auto& t : safetensors_order(specs)) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"m.steps", "scalar", "z.weight", "a.bias", "b.half"}));
}

TEST(SafetensorsWriter, HeaderIsPaddedToEightBytes) {
  const std::string h = safetensors_header({{"w", Dtype::F32, {1}}}, {});
  EXPECT_EQ(h.size() % 8, 0u);
  EXPECT_EQ(h.substr(8), "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}  ");
}

TEST(SafetensorsWriter, ReaderReadsItBack) {
  const fs::path p = test_dir("read") / "model.safetensors";
  ASSERT_TRUE(write_all(p).ok());
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const TensorInfo* z = f->find("z.weight");
  ASSERT_NE(z, nullptr);
  EXPECT_EQ(z->shape, (std::vector<int64_t>{3, 4}));
  std::vector<float> rows(12);
  ASSERT_TRUE(f->read_rows_f32(*z, 0, 3, rows.data()).ok());
  for (int i = 0; i < 12; ++i) EXPECT_EQ(rows[i], i * 0.5f);
}

TEST(SafetensorsWriter, RefusesOutOfOrderAndWrongSizes) {
  const fs::path p = test_dir("contract") / "x.safetensors";
  auto w = SafetensorsWriter::create(p, {{"b", Dtype::F32, {2}}, {"a", Dtype::F32, {1}}});
  ASSERT_TRUE(w.ok());
  const std::string four(4, '\0'), eight(8, '\0');
  Status wrong_name = w->write("b", std::as_bytes(std::span(eight.data(), 8)));
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_NE(wrong_name.error().message().find("tensor a next"), std::string::npos) << wrong_name.error().message();
  Status wrong_size = w->write("a", std::as_bytes(std::span(eight.data(), 8)));
  ASSERT_FALSE(wrong_size.ok());
  EXPECT_TRUE(w->write("a", std::as_bytes(std::span(four.data(), 4))).ok());
  Status early = w->finish();
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.error().message().find("tensor b not written"), std::string::npos);
}

#ifdef MESHWORK_PYTHON
TEST(SafetensorsWriter, LibraryLoadsItAndWritesTheSameBytes) {
  const fs::path d = test_dir("python");
  ASSERT_TRUE(write_all(d / "ours.safetensors").ok());
  const std::string cmd = std::string(MESHWORK_PYTHON) + " " + MESHWORK_SOURCE_DIR +
                          "/tests/trainer/hf/safetensors_reference.py " + (d / "ours.safetensors").string() +
                          " " + (d / "theirs.safetensors").string() + " > " + (d / "out.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(d / "out.txt");
  const std::string ours = slurp(d / "ours.safetensors"), theirs = slurp(d / "theirs.safetensors");
  EXPECT_EQ(ours.size(), theirs.size());
  EXPECT_TRUE(ours == theirs) << "header ours:   " << ours.substr(8, 200) << "\nheader theirs: " << theirs.substr(8, 200);
}
#endif
