#include "core/store/store_writer.h"

namespace meshwork::store {

Result<std::unique_ptr<StoreWriter>> StoreWriter::start(const std::filesystem::path& db,
                                                        Options options, ChunkDone on_done) {
  Result<std::unique_ptr<RunStore>> store = RunStore::open(db);
  if (!store) return store.error();
  return std::unique_ptr<StoreWriter>(
      new StoreWriter(std::move(*store), options, std::move(on_done)));
}

StoreWriter::StoreWriter(std::unique_ptr<RunStore> store, Options options, ChunkDone on_done)
    : store_(std::move(store)), options_(options), on_done_(std::move(on_done)) {
  thread_ = std::thread([this] { loop(); });
}

StoreWriter::~StoreWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // Everything queued is committed: write the open chart buckets (open_buckets.h) on the way out.
  (void)store_->flush_open_buckets();
}

void StoreWriter::submit(RunId run, std::string source, uint64_t start_offset, std::string bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  // Back-pressure: a producer faster than the disk waits instead of growing memory unboundedly.
  progress_.wait(lock, [&] { return queued_bytes_ < options_.max_queued_bytes || stopping_; });
  queued_bytes_ += bytes.size();
  queue_.push_back(Chunk{run, std::move(source), start_offset, std::move(bytes)});
  ++submitted_;
  if (queued_bytes_ >= options_.max_batch_bytes) wake_.notify_one();
  else if (queue_.size() == 1) wake_.notify_one();  // starts the max_delay clock
}

void StoreWriter::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t target = submitted_;
  flush_requested_ = true;
  wake_.notify_one();
  progress_.wait(lock, [&] { return committed_ >= target; });
}

StoreWriter::Stats StoreWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void StoreWriter::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty() && stopping_) return;
    // Wait for a full batch, the delay, a flush() or shutdown, whichever comes first.
    const auto deadline = std::chrono::steady_clock::now() + options_.max_delay;
    wake_.wait_until(lock, deadline, [&] {
      return stopping_ || flush_requested_ || queued_bytes_ >= options_.max_batch_bytes;
    });
    std::deque<Chunk> batch;
    size_t bytes = 0;
    while (!queue_.empty() && (batch.empty() || bytes < options_.max_batch_bytes)) {
      bytes += queue_.front().bytes.size();
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    queued_bytes_ -= bytes;
    if (queue_.empty()) flush_requested_ = false;  // a flush() covers what is still queued
    lock.unlock();
    progress_.notify_all();  // room for blocked producers

    std::vector<RunStore::ChunkRef> refs;
    refs.reserve(batch.size());
    for (const Chunk& c : batch) refs.push_back({c.run, c.source, c.start_offset, c.bytes});
    Result<std::vector<Result<IngestCounts>>> results = store_->ingest_chunks(refs);
    Stats delta;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Result<IngestCounts> r = results ? (*results)[i] : Result<IngestCounts>(results.error());
      if (r) delta.totals += *r; else ++delta.errors;
      if (on_done_) on_done_(batch[i].run, batch[i].source, r);
    }
    if (results) delta.batches = 1;

    lock.lock();
    stats_.totals.lines += delta.totals.lines;
    stats_.totals.points += delta.totals.points;
    stats_.totals.duplicates += delta.totals.duplicates;
    stats_.totals.malformed += delta.totals.malformed;
    stats_.totals.unknown += delta.totals.unknown;
    stats_.batches += delta.batches;
    stats_.errors += delta.errors;
    committed_ += batch.size();
    progress_.notify_all();
  }
}

}  // namespace meshwork::store
