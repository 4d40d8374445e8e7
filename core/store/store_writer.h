// StoreWriter: the single writer of a run store, on its own thread. Followers (remote streaming,
// local file tails) submit chunks from any thread; the writer batches them into one transaction
// per flush (when `max_batch_bytes` are queued or `max_delay` has passed since the first queued
// chunk), so ingest costs one commit per batch, not per line. Each chunk's source offset advances
// in the same transaction as its points (exactly-once, see run_store.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/store/run_store.h"

namespace meshwork::store {

class StoreWriter {
 public:
  struct Options {
    size_t max_batch_bytes = 4u << 20;
    std::chrono::milliseconds max_delay{200};
    size_t max_queued_bytes = 64u << 20;  // submit() blocks above this (back-pressure)
  };
  // Called on the writer thread after each chunk's transaction (or with an Error). Keep it short.
  using ChunkDone = std::function<void(RunId run, const std::string& source,
                                       const Result<IngestCounts>& result)>;

  static Result<std::unique_ptr<StoreWriter>> start(const std::filesystem::path& db,
                                                    Options options, ChunkDone on_done = {});
  static Result<std::unique_ptr<StoreWriter>> start(const std::filesystem::path& db) {
    return start(db, Options{});
  }
  ~StoreWriter();  // flushes what is queued, then stops the thread

  // Queues `bytes` of `source` starting at `start_offset` (see RunStore::ingest_chunk).
  void submit(RunId run, std::string source, uint64_t start_offset, std::string bytes);
  // Blocks until everything submitted before this call is committed.
  void flush();

  struct Stats {
    IngestCounts totals;
    int64_t batches = 0;  // committed transactions
    int64_t errors = 0;
  };
  Stats stats() const;

 private:
  struct Chunk {
    RunId run;
    std::string source;
    uint64_t start_offset;
    std::string bytes;
  };
  StoreWriter(std::unique_ptr<RunStore> store, Options options, ChunkDone on_done);
  void loop();

  std::unique_ptr<RunStore> store_;
  Options options_;
  ChunkDone on_done_;
  mutable std::mutex mu_;
  std::condition_variable wake_;      // the writer waits for work
  std::condition_variable progress_;  // flush()/submit() wait for commits
  std::deque<Chunk> queue_;
  size_t queued_bytes_ = 0;
  uint64_t submitted_ = 0;            // chunks submitted
  uint64_t committed_ = 0;            // chunks committed (or failed)
  bool flush_requested_ = false;
  bool stopping_ = false;
  Stats stats_;
  std::thread thread_;
};

}  // namespace meshwork::store
