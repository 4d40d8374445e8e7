// `meshwork data prepare`: text (.txt, .jsonl) to llm.c uint32 token shards plus manifest.json,
// tokenized by the reference libraries (tokenizer_worker.h) before a launch, so nodes never need
// Python. The rules for documents, BOS and EOS are in resources/python/meshwork_tokenize.py and
// docs/trainer.md ("Preparing data").
//
// Reuse: a directory whose manifest has the same tokenizer (file and tokenizer_config.json
// SHA-256), the same inputs in the same order (size and SHA-256; paths may move), the same
// options, and all its shards intact is returned as it is (`reused`), nothing re-tokenized.
// Otherwise the manifest is removed first, old shards are replaced, and the new manifest is
// written last: an interrupted preparation is never mistaken for a finished one.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/data/manifest.h"
#include "core/error.h"

namespace meshwork::data {

struct PrepareRequest {
  std::filesystem::path tokenizer;  // tokenizer.json, a SentencePiece .model, or a directory with one
  std::vector<std::filesystem::path> inputs;  // .txt and .jsonl files, in stream order
  std::filesystem::path out;
  PrepareSettings settings;
  int64_t shard_tokens = 100'000'000;
  int threads = 0;          // encoder threads; 0 = every core
  std::string python;       // "" = default_python()
  std::filesystem::path worker_script;  // "" = default_worker_script()
  bool force = false;       // redo even when the manifest matches
  // Set (e.g. from a SIGTERM handler) to stop: the worker is killed, the unfinished shard removed,
  // and prepare() returns Error{"data prepare", "", "cancelled"}; no manifest is written.
  const std::atomic<bool>* cancel = nullptr;
};

struct PrepareProgress {
  std::string phase;        // "hashing" | "tokenizing"
  int64_t bytes_done = 0;   // of the phase, over all inputs
  int64_t bytes_total = 0;
  int64_t documents = 0;
  int64_t tokens = 0;
  double seconds = 0;       // since the phase began
};

struct PrepareOutcome {
  Manifest manifest;
  bool reused = false;
};

// The tokenizer file a --tokenizer path names and its kind: a directory's tokenizer.json (first)
// or tokenizer.model; a *.json file; a *.model file. Errors name "--tokenizer".
struct TokenizerFiles {
  std::filesystem::path file;
  std::string kind;                  // "tokenizer.json" | "sentencepiece"
  std::filesystem::path config;      // tokenizer_config.json beside it, or empty
};
Result<TokenizerFiles> resolve_tokenizer(const std::filesystem::path& path);

Result<PrepareOutcome> prepare(const PrepareRequest& request,
                               const std::function<void(const PrepareProgress&)>& on_progress = {});

}  // namespace meshwork::data
