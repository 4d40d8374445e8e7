// Crash safety: a process is SIGKILLed in the middle of a long ingest. Afterwards the database
// opens, passes PRAGMA integrity_check and holds every batch the process reported as committed;
// points and source offsets agree (a batch is all or nothing).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/store/store_writer.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::count;
using testing::open_store;
using testing::step_line;
using testing::TempDir;

struct Report {
  uint64_t offset;  // source offset after the committed batch
  int64_t steps;    // steps committed so far
};

constexpr int kLinesPerBatch = 2000;

std::string batch(int64_t first_step) {
  std::string text;
  for (int64_t s = first_step; s < first_step + kLinesPerBatch; ++s) text += step_line(0, s, 1.0);
  return text;
}

// Child: ingests batch after batch forever; after each commit writes a Report to `fd`.
[[noreturn]] void child(const std::filesystem::path& db, RunId run, int fd, bool via_writer) {
  if (via_writer) {
    int64_t steps = 0;
    auto writer = StoreWriter::start(
        db, StoreWriter::Options{.max_batch_bytes = 1, .max_delay = std::chrono::milliseconds(1)},
        [&](RunId, const std::string&, const Result<IngestCounts>& r) {
          if (!r.ok()) _exit(3);
          steps += kLinesPerBatch;
          Report rep{r->offset, steps};
          if (write(fd, &rep, sizeof rep) != sizeof rep) _exit(4);
        });
    if (!writer.ok()) _exit(2);
    uint64_t offset = 0;
    for (int64_t s = 0;; s += kLinesPerBatch) {
      std::string text = batch(s);
      const size_t n = text.size();
      (*writer)->submit(run, "m", offset, std::move(text));
      offset += n;
    }
  }
  auto store = RunStore::open(db);
  if (!store.ok()) _exit(2);
  uint64_t offset = 0;
  for (int64_t s = 0;; s += kLinesPerBatch) {
    auto r = (*store)->ingest_chunk(run, "m", offset, batch(s));
    if (!r.ok()) _exit(3);
    offset = r->offset;
    Report rep{offset, s + kLinesPerBatch};
    if (write(fd, &rep, sizeof rep) != sizeof rep) _exit(4);
  }
}

void kill_mid_ingest(bool via_writer) {
  TempDir dir;
  const auto db = dir / "runs.db";
  RunId run = 0;
  {
    auto store = open_store(db);
    run = *store->create_run("crash", {}, {});
  }
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    child(db, run, fds[1], via_writer);
  }
  close(fds[1]);
  // Let it commit a few batches, then kill it at an arbitrary moment of the next ones.
  Report last{0, 0};
  int reports = 0;
  while (reports < 5) {
    ASSERT_EQ(read(fds[0], &last, sizeof last), static_cast<ssize_t>(sizeof last));
    ++reports;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(37));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child ended on its own with status " << status;
  Report r;
  while (read(fds[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r)) {
    last = r;
    ++reports;
  }
  close(fds[0]);

  auto store = open_store(db);
  ASSERT_TRUE(store);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(store->handle(), "PRAGMA integrity_check", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "ok");
  sqlite3_finalize(st);
  // Every reported batch is there (a later one may be too: committed, then killed before the
  // report was written) ...
  const uint64_t offset = *store->source_offset(run, "m");
  const int64_t steps = count(*store, "SELECT count(*) FROM steps");
  EXPECT_GE(offset, last.offset);
  EXPECT_GE(steps, last.steps);
  // ... and nothing half: whole batches, and points, steps and offset tell the same story.
  EXPECT_EQ(steps % kLinesPerBatch, 0);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics"), steps * 15);
  EXPECT_EQ(count(*store, "SELECT sum(n) FROM rank_agg"), steps * 15);
  EXPECT_EQ(count(*store, "SELECT points FROM run_stats"), steps * 15);
  // Closed chart buckets are whole; the open one died with the process's memory (its points
  // are in `steps`, and queries read an open bucket raw): never more than was stored.
  EXPECT_LE(count(*store, "SELECT coalesce(sum(n), 0) FROM buckets WHERE level = 1"), steps * 15);
  uint64_t bytes = 0;
  for (int64_t st = 0; st < steps; ++st) bytes += step_line(0, st, 1.0).size();
  EXPECT_EQ(offset, bytes);
  // The stream resumes from the stored offset with nothing lost or doubled.
  auto more = store->ingest_chunk(run, "m", offset, batch(steps));
  ASSERT_TRUE(more.ok()) << more.error().message();
  EXPECT_EQ(more->duplicates, 0);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM steps"), steps + kLinesPerBatch);
  // The bucket that was open at the kill is recomputed from its step rows: once written, every
  // level counts every point once.
  ASSERT_TRUE(store->flush_open_buckets().ok());
  for (int level = 0; level <= 5; ++level)
    EXPECT_EQ(count(*store, "SELECT sum(n) FROM buckets WHERE level = " + std::to_string(level)),
              (steps + kLinesPerBatch) * 15) << "level " << level;
  std::cout << "killed after " << reports << " reported batches; " << steps
            << " steps stored, offset " << offset << "\n";
}

TEST(StoreCrashIntegration, SigkillDuringIngestChunkLosesNoCommittedBatch) { kill_mid_ingest(false); }
TEST(StoreCrashIntegration, SigkillDuringStoreWriterLosesNoCommittedBatch) { kill_mid_ingest(true); }

}  // namespace
}  // namespace meshwork::store
