// manifest.json of a prepared data directory: what was tokenized, with what, into which shards.
// It is written last (temporary file + rename), so a directory with a manifest is complete; the
// reuse rule (prepare.h) compares a new request's fingerprint with the manifest's.
//
// {"v": 1, "format": "llm.c uint32 shards (magic 20240801)",
//  "tokenizer": {"path", "kind": "tokenizer.json" | "sentencepiece", "sha256", "config_sha256",
//                "vocab_size", "bos": {"token", "id"} | null, "eos": {"token", "id"}},
//  "options": {"text_field", "split", "eos"},
//  "sources": [{"path", "bytes", "sha256", "documents", "tokens"}],
//  "documents", "tokens", "shards": [{"file", "tokens"}], "created", "seconds"}
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/data/shard_writer.h"
#include "core/error.h"

namespace meshwork::data {

inline constexpr const char* kManifestName = "manifest.json";

struct SpecialToken {
  std::string token;
  int64_t id = 0;
};

struct TokenizerInfo {
  std::string path;         // the tokenizer file (tokenizer.json or a SentencePiece .model)
  std::string kind;         // "tokenizer.json" | "sentencepiece"
  std::string sha256;
  std::string config_sha256;  // of tokenizer_config.json beside it; "" when there is none
  int64_t vocab_size = 0;
  std::optional<SpecialToken> bos;  // the BOS each document starts with, if any
  SpecialToken eos;
};

struct PrepareSettings {  // the options that change the ids
  std::string text_field = "text";
  std::string split = "paragraph";  // .txt documents: "paragraph" | "file"
  std::string eos;                  // --eos override; "" = the tokenizer's
};

struct SourceInfo {
  std::string path;
  int64_t bytes = 0;
  std::string sha256;
  int64_t documents = 0;
  int64_t tokens = 0;
};

struct Manifest {
  TokenizerInfo tokenizer;
  PrepareSettings options;
  std::vector<SourceInfo> sources;
  int64_t documents = 0;
  int64_t tokens = 0;
  std::vector<ShardInfo> shards;
  std::string created;  // UTC, ISO 8601
  double seconds = 0;
};

std::string manifest_json(const Manifest& m);
// Reads <dir>/manifest.json. Errors name "--data" (the field a prepared directory is given in).
Result<Manifest> read_manifest(const std::filesystem::path& dir);
// Writes <dir>/manifest.json atomically (manifest.json.tmp, then rename).
Status write_manifest(const std::filesystem::path& dir, const Manifest& m);

// One line for people: "25.1M tokens, 12,034 documents, tokenizer.json (vocab 128,256)".
std::string manifest_summary(const Manifest& m);

}  // namespace meshwork::data
