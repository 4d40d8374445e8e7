// StoreWriter: batched commits from many producers while readers query the same file.
#include <atomic>
#include <thread>

#include "core/store/store_writer.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::count;
using testing::open_store;
using testing::step_line;
using testing::TempDir;

TEST(StoreWriterIntegration, BatchesProducersWhileReadersNeverBlock) {
  TempDir dir;
  const auto db = dir / "runs.db";
  RunId run = 0;
  {
    auto store = open_store(db);
    run = *store->create_run("live", {}, {});
  }
  std::atomic<int64_t> reported{0};
  auto writer = StoreWriter::start(
      db, StoreWriter::Options{.max_batch_bytes = 256 << 10, .max_delay = std::chrono::milliseconds(20)},
      [&](RunId, const std::string&, const Result<IngestCounts>& r) {
        if (r.ok()) reported += r->points;
      });
  ASSERT_TRUE(writer.ok()) << writer.error().message();

  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::string reader_error;
  std::thread reader([&] {
    auto store = RunStore::open(db, RunStore::Options{.read_only = true, .busy_timeout_ms = 0});
    if (!store.ok()) {
      reader_error = store.error().message();
      return;
    }
    SeriesQuery q;
    q.runs = {run};
    q.aggregate = Aggregate::mean;
    while (!done) {
      auto s = (*store)->query_series(q);
      auto l = (*store)->list_runs();
      if (!s.ok() && s.error().field != "key") reader_error = s.error().message();
      if (!l.ok()) reader_error = l.error().message();
      ++reads;
    }
  });

  constexpr int kRanks = 4, kChunks = 100, kLinesPerChunk = 20;
  std::vector<std::thread> producers;
  for (int r = 0; r < kRanks; ++r)
    producers.emplace_back([&, r] {
      uint64_t offset = 0;
      for (int c = 0; c < kChunks; ++c) {
        std::string text;
        for (int l = 0; l < kLinesPerChunk; ++l) text += step_line(r, c * kLinesPerChunk + l, 1.0);
        const size_t n = text.size();
        (*writer)->submit(run, "rank" + std::to_string(r), offset, std::move(text));
        offset += n;
      }
    });
  for (auto& t : producers) t.join();
  (*writer)->flush();
  done = true;
  reader.join();
  EXPECT_EQ(reader_error, "");
  EXPECT_GT(reads.load(), 0);

  const int64_t expected = int64_t{kRanks} * kChunks * kLinesPerChunk * 15;
  const auto stats = (*writer)->stats();
  EXPECT_EQ(stats.totals.points, expected);
  EXPECT_EQ(stats.errors, 0);
  EXPECT_EQ(reported.load(), expected);
  EXPECT_LT(stats.batches, kRanks * kChunks);  // chunks were grouped into fewer transactions
  // A chunk with a gap fails alone; the others of its batch commit.
  (*writer)->submit(run, "rank0", 999999999, step_line(0, 100000, 1.0));
  (*writer)->submit(run, "late", 0, step_line(9, 0, 1.0));
  (*writer)->flush();
  EXPECT_EQ((*writer)->stats().errors, 1);
  writer->reset();
  auto store = open_store(db);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics"), expected + 15);
}

}  // namespace
}  // namespace meshwork::store
