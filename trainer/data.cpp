#include "trainer/data.h"
#include "core/resource_dir.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace meshwork::trainer {
namespace {

constexpr int32_t kMagic16 = 20240520;
constexpr int32_t kMagic32 = 20240801;
constexpr size_t kHeaderBytes = 256 * sizeof(int32_t);

Error data_error(const std::filesystem::path& p, const std::string& what) {
  return Error{"--data", p.string(), what};
}

}  // namespace

TokenData::~TokenData() {
  for (auto& s : shards_)
    if (s.base) munmap(const_cast<uint8_t*>(s.base), s.bytes);
}

Result<std::unique_ptr<TokenData>> TokenData::open(const std::filesystem::path& path,
                                                   int64_t vocab_size) {
  std::error_code ec;
  std::unique_ptr<TokenData> data(new TokenData());
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      if (e.path().extension() == ".bin") data->files_.push_back(e.path());
    std::sort(data->files_.begin(), data->files_.end());
    if (data->files_.empty()) return data_error(path, "a directory with llm.c .bin shards (none found)");
  } else if (std::filesystem::is_regular_file(path, ec)) {
    data->files_.push_back(path);
  } else {
    return data_error(path, "an llm.c .bin shard or a directory of them (no such file)");
  }
  for (const auto& f : data->files_) {
    int fd = ::open(f.c_str(), O_RDONLY);
    if (fd < 0) return data_error(f, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    fstat(fd, &st);
    const size_t bytes = static_cast<size_t>(st.st_size);
    if (bytes < kHeaderBytes) {
      ::close(fd);
      return data_error(f, "an llm.c shard (file shorter than the 1024-byte header)");
    }
    void* m = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) return data_error(f, "cannot map the file");
    Shard s;
    s.base = static_cast<const uint8_t*>(m);
    s.bytes = bytes;
    data->shards_.push_back(s);  // owned from here on (unmapped by the destructor)
    int32_t header[256];
    std::memcpy(header, s.base, kHeaderBytes);
    if (header[0] != kMagic16 && header[0] != kMagic32)
      return data_error(f, "an llm.c shard (magic 20240520 or 20240801, found " +
                               std::to_string(header[0]) + ")");
    Shard& sh = data->shards_.back();
    sh.width = header[0] == kMagic16 ? 2 : 4;
    sh.count = header[2];
    sh.first = data->total_;
    if (sh.count < 0 || kHeaderBytes + static_cast<size_t>(sh.count) * sh.width != bytes)
      return data_error(f, "header says " + std::to_string(header[2]) + " tokens of " +
                               std::to_string(sh.width) + " bytes but the file has " +
                               std::to_string(bytes - kHeaderBytes) + " data bytes");
    data->total_ += sh.count;
  }
  // Every token must be a valid embedding row.
  for (const auto& sh : data->shards_) {
    for (int64_t i = 0; i < sh.count; ++i) {
      int64_t t = data->token(sh.first + i);
      if (t >= vocab_size)
        return data_error(data->files_[&sh - data->shards_.data()],
                          "tokens below the model's vocab_size " + std::to_string(vocab_size) +
                              " (token " + std::to_string(t) + " at " + std::to_string(i) + ")");
    }
  }
  if (data->total_ < 2) return data_error(path, "at least 2 tokens");
  return data;
}

int64_t TokenData::token(int64_t i) const {
  // Shards are few: a linear scan from the back is cheap next to a training step.
  for (auto it = shards_.rbegin(); it != shards_.rend(); ++it) {
    if (i >= it->first) {
      const uint8_t* p = it->base + kHeaderBytes + (i - it->first) * it->width;
      if (it->width == 2) {
        uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
      }
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
  }
  return 0;
}

void TokenData::sequence(int64_t index, int64_t seq_len, int64_t* out) const {
  const int64_t n = num_sequences(seq_len);
  const int64_t start = (index % n) * seq_len;
  for (int64_t j = 0; j <= seq_len; ++j) out[j] = token(start + j);
}

std::vector<int64_t> TokenData::batch_indices(int64_t step, int64_t global_batch, int64_t dp_rank,
                                              int64_t dp_size, int64_t micro, int64_t micro_batch) {
  const int64_t per_rank = global_batch / dp_size;
  const int64_t first = step * global_batch + dp_rank * per_rank + micro * micro_batch;
  std::vector<int64_t> out(micro_batch);
  for (int64_t i = 0; i < micro_batch; ++i) out[i] = first + i;
  return out;
}

std::filesystem::path default_data_path() {
  return resource_dir() / "data" / "kjv.bin";
}

}  // namespace meshwork::trainer
