#include "core/data/shard_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace meshwork::data {

namespace {

Error io_error(const std::filesystem::path& p, const std::string& what) {
  return Error{"--out", p.string(), what + " (" + std::strerror(errno) + ")"}.as(ErrorKind::io);
}

}  // namespace

ShardWriter::ShardWriter(std::filesystem::path dir, int64_t shard_tokens)
    : dir_(std::move(dir)), shard_tokens_(std::clamp<int64_t>(shard_tokens, 1, kMaxShardTokens)) {}

ShardWriter::~ShardWriter() {
  if (file_) {
    std::fclose(file_);
    std::error_code ec;
    std::filesystem::remove(tmp_path_, ec);
  }
}

std::string ShardWriter::shard_name(size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "tokens-%06zu.bin", index);
  return name;
}

Status ShardWriter::open_next() {
  tmp_path_ = dir_ / (shard_name(done_.size()) + ".tmp");
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!file_) return io_error(tmp_path_, "cannot be written");
  int32_t header[256] = {};
  header[0] = kShardMagicU32;
  header[1] = kShardVersionU32;
  if (std::fwrite(header, sizeof header, 1, file_) != 1) return io_error(tmp_path_, "cannot be written");
  in_current_ = 0;
  return Status::Ok();
}

Status ShardWriter::close_current() {
  // The count goes into the header once known; then flush, sync and rename.
  int32_t count = static_cast<int32_t>(in_current_);
  if (std::fseek(file_, 2 * sizeof(int32_t), SEEK_SET) != 0 || std::fwrite(&count, sizeof count, 1, file_) != 1 ||
      std::fflush(file_) != 0 || ::fsync(fileno(file_)) != 0)
    return io_error(tmp_path_, "cannot be written");
  std::fclose(file_);
  file_ = nullptr;
  const std::string name = shard_name(done_.size());
  std::error_code ec;
  std::filesystem::rename(tmp_path_, dir_ / name, ec);
  if (ec) return Error{"--out", (dir_ / name).string(), "cannot be written (" + ec.message() + ")"}.as(ErrorKind::io);
  done_.push_back({name, in_current_});
  return Status::Ok();
}

Status ShardWriter::write(std::span<const uint32_t> tokens) {
  while (!tokens.empty()) {
    if (!file_)
      if (auto s = open_next(); !s) return s;
    const size_t n = static_cast<size_t>(std::min<int64_t>(shard_tokens_ - in_current_, tokens.size()));
    // Shards are little-endian like llm.c's; so is every machine meshwork runs on (x86-64, aarch64).
    if (std::fwrite(tokens.data(), sizeof(uint32_t), n, file_) != n) return io_error(tmp_path_, "cannot be written");
    in_current_ += static_cast<int64_t>(n);
    tokens = tokens.subspan(n);
    if (in_current_ == shard_tokens_)
      if (auto s = close_current(); !s) return s;
  }
  return Status::Ok();
}

Result<std::vector<ShardInfo>> ShardWriter::finish() {
  if (file_ && in_current_ > 0) {
    if (auto s = close_current(); !s) return s.error();
  }
  return done_;
}

}  // namespace meshwork::data
