// Writes a token stream as llm.c shards with uint32 ids: a 256 x int32 little-endian header
// (magic 20240801, version 7, token count) then the tokens, the format meshtrain's TokenData and
// llm.c read. A shard holds at most `shard_tokens` tokens and is written to "<name>.tmp", then
// renamed to tokens-NNNNNN.bin when full (or at finish()): a reader never sees half a shard, and
// a directory's *.bin sorted by name is the whole stream.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace meshwork::data {

inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;  // llm.c's version for uint32 (Llama-3) shards
// The header's count is an int32: a shard never holds more than this.
inline constexpr int64_t kMaxShardTokens = 2'000'000'000;

struct ShardInfo {
  std::string file;  // name inside the output directory
  int64_t tokens = 0;
};

class ShardWriter {
 public:
  ShardWriter(std::filesystem::path dir, int64_t shard_tokens);
  ~ShardWriter();  // an unfinished shard's temporary file is removed
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  Status write(std::span<const uint32_t> tokens);
  // Closes the last shard (if it has tokens) and returns every shard written.
  Result<std::vector<ShardInfo>> finish();

  static std::string shard_name(size_t index);  // "tokens-000000.bin"

 private:
  Status open_next();
  Status close_current();

  std::filesystem::path dir_;
  int64_t shard_tokens_;
  FILE* file_ = nullptr;
  std::filesystem::path tmp_path_;
  int64_t in_current_ = 0;
  std::vector<ShardInfo> done_;
};

}  // namespace meshwork::data
