// The run store: every run, its configuration, its ranks, events and every metric point of every
// rank in one SQLite database (WAL mode). See docs/store.md.
//
// One RunStore is one SQLite connection: use it from one thread at a time. Readers (the GUI, the
// CLI) open their own RunStore; in WAL mode they never block the writer and the writer never
// blocks them. Streaming ingest goes through StoreWriter (store_writer.h), which owns a RunStore
// on its own thread and commits batches.
//
// Exactly-once streaming: every metrics file is a "source" of a run (e.g.
// "node0/metrics-rank3.jsonl") with a stored byte offset. ingest_chunk() stores the complete lines
// of a chunk and advances that source's offset in ONE transaction, so after a lost link or a
// restart the follower resumes from source_offset() and no line is lost or stored twice.
// Points are also unique on (run, rank, step, key): re-ingesting lines never duplicates them
// (the first stored value wins).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mesh.h"

struct sqlite3;

namespace meshwork::store {

using RunId = int64_t;

// Run status words, as stored in runs.status.
inline constexpr std::string_view kStatusCreated = "created";  // no record seen yet
inline constexpr std::string_view kStatusRunning = "running";  // a start record was seen
inline constexpr std::string_view kStatusOk = "ok";            // every rank ended ok
inline constexpr std::string_view kStatusFailed = "failed";    // a rank ended failed
inline constexpr std::string_view kStatusStopped = "stopped";  // stopped by the user

// One row of `runs list`.
struct RunSummary {
  RunId id = 0;
  std::string name;
  double created = 0;        // unix seconds
  std::string status;        // kStatus*
  std::string exit_reason;   // why it failed / stopped; empty when ok
  std::optional<MeshShape> shape;  // the config's "mesh" object (core/mesh_json.h); unset if unknown
  std::string model;         // preset name, or "inline" for an inline HF config
  int world = 0;             // number of ranks (from the config or the start records)
  int64_t steps = 0;         // highest step stored (any rank)
  int64_t points = 0;        // metric points stored
  std::optional<double> final_loss;    // loss at the last step, lowest rank that has it
  std::optional<double> tokens_per_s;  // mean tokens/s of rank 0 over its last <=10 steps
  std::string origin;        // where `runs import` read it from; empty for launched runs
};

struct RunInfo {
  RunSummary summary;
  nlohmann::json config = nlohmann::json::object();   // the RunConfig JSON (core/run_config.h)
  nlohmann::json cluster = nlohmann::json::object();  // the cluster as launched (nodes, probes)
};

struct RankInfo {
  int rank = 0;
  int node = 0;
  std::string host;
  int64_t pid = 0;
  std::string status;  // empty while running, else the end record's status
  std::string reason;
};

struct Event {
  int64_t id = 0;
  RunId run = 0;
  double time = 0;     // unix seconds
  std::string level;   // "info" | "warning" | "error"
  std::string text;    // e.g. "rank 3 failed: exit 137\n<stderr tail>"
};

// Per-source bookkeeping; malformed and unknown lines are counted here and reported.
struct SourceInfo {
  std::string name;
  uint64_t offset = 0;     // bytes of the source consumed (always at a line boundary)
  int64_t lines = 0;       // complete lines seen
  int64_t malformed = 0;   // not JSON / not an object / missing required fields
  int64_t unknown = 0;     // valid JSON but an unknown "type" or "v"
};

// What one ingest call did.
struct IngestCounts {
  int64_t lines = 0;       // complete lines consumed
  int64_t points = 0;      // new metric points stored
  int64_t duplicates = 0;  // points already stored (re-ingest): not stored again
  int64_t malformed = 0;
  int64_t unknown = 0;
  uint64_t offset = 0;     // the source's offset after the call
  IngestCounts& operator+=(const IngestCounts& o);
};

// Over the ranks at one step (RunStore::step_extremes).
struct StepExtremes {
  int64_t step = 0;
  int64_t ranks = 0;          // ranks with a (non-NaN) value at this step
  double mean = 0;
  double min = 0, max = 0;
  int min_rank = 0, max_rank = 0;  // on ties the lowest rank
};

// Chart queries ------------------------------------------------------------------------------
enum class XAxis { step, tokens, time };        // tokens: cumulative "tokens" of the rank
enum class Aggregate { none, mean, min, max, sum };  // over ranks, per step

std::string_view to_string(XAxis x);
std::string_view to_string(Aggregate a);
Result<XAxis> parse_x_axis(std::string_view text);
Result<Aggregate> parse_aggregate(std::string_view text);

struct SeriesQuery {
  std::vector<RunId> runs;
  std::string key = "loss";        // a step_series key (core/metrics.h)
  int rank = 0;                    // used when aggregate == none
  // With an aggregate: the ranks to aggregate over; empty = every rank, read from the
  // cross-rank aggregates kept at ingest (O(steps), whatever the rank count). A subset is
  // aggregated from each rank's series at query time.
  std::vector<int> ranks;
  Aggregate aggregate = Aggregate::none;
  XAxis x = XAxis::step;
  std::optional<double> x_min;     // inclusive range on the chosen x axis; unset = whole run
  std::optional<double> x_max;
  int pixels = 800;                // width of the chart in pixel columns (>= 1)
};

struct Point {
  double x = 0;
  double y = 0;
};

struct Series {
  RunId run = 0;
  std::vector<Point> points;  // sorted by x; <= 2 per pixel column + first + last (decimate.h)
  int64_t source_points = 0;  // raw points in range the result stands for
  int lod_level = 0;          // 0: decimated from raw points; k >= 1: from 8^k-step buckets
};

// A step of a run another tool trained (TensorBoard event files, Hugging Face Trainer's
// trainer_state.json: core/interop/foreign_import.h): the values it logged at that step under
// Meshwork's keys where they mean the same (stored in the step series, the rest absent) or
// under the tool's own names (stored as extra series).
struct ForeignStep {
  int64_t step = 0;
  double time = 0;  // Unix seconds; 0 when the tool did not say
  std::vector<std::pair<std::string, double>> values;
};

class RunStore {
 public:
  struct Options {
    bool read_only = false;
    int busy_timeout_ms = 5000;
  };
  // Opens (creating it and its parent directories unless read_only) and migrates the schema.
  static Result<std::unique_ptr<RunStore>> open(const std::filesystem::path& path,
                                                Options options);
  static Result<std::unique_ptr<RunStore>> open(const std::filesystem::path& path) {
    return open(path, Options{});
  }
  ~RunStore();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int schema_version() const;

  // Runs ---------------------------------------------------------------------------------------
  // config: the RunConfig JSON (may be {}); cluster: nodes as launched (may be {}).
  Result<RunId> create_run(std::string_view name, const nlohmann::json& config,
                           const nlohmann::json& cluster, std::string_view origin = {});
  Status set_status(RunId run, std::string_view status, std::string_view reason = {});
  Status rename_run(RunId run, std::string_view name);
  Status delete_run(RunId run);  // the run and everything stored with it
  Result<std::vector<RunSummary>> list_runs();
  // A number that changes whenever another connection commits to the file (SQLite's
  // data_version): what a reader polls to learn that something changed. -1 on a database error.
  int64_t data_version();
  Result<RunInfo> get_run(RunId run);
  // "RUN" as a user typed it: a numeric id, or an exact name (error when ambiguous).
  Result<RunId> resolve_run(std::string_view id_or_name);
  Result<std::optional<RunId>> find_run_by_origin(std::string_view origin);
  Result<std::vector<RankInfo>> ranks(RunId run);

  Status add_event(RunId run, std::string_view level, std::string_view text, double time = 0);
  Result<std::vector<Event>> events(RunId run);

  // Ingest -------------------------------------------------------------------------------------
  // Stores the complete lines of `bytes` (text of `source` starting at byte `start_offset`) and
  // advances the source's offset, in one transaction. A trailing partial line is not consumed:
  // the returned offset says where the next chunk starts. When start_offset is below the stored
  // offset the already-consumed prefix is skipped; above it is an Error (a gap: resend from
  // source_offset()). Malformed / unknown lines are counted (and the first few logged as
  // warning events with source and offset), never fatal.
  Result<IngestCounts> ingest_chunk(RunId run, std::string_view source, uint64_t start_offset,
                                    std::string_view bytes);
  Result<uint64_t> source_offset(RunId run, std::string_view source);
  // Stores another tool's steps as rank 0's and sets `source`'s offset to `offset` (the byte
  // after the last record they came from), in one transaction: a re-import resumes there and
  // stores nothing twice.
  Result<IngestCounts> ingest_foreign(RunId run, std::string_view source, uint64_t offset,
                                      const std::vector<ForeignStep>& steps);
  Result<std::vector<SourceInfo>> sources(RunId run);
  // Reads `path` from its stored offset to its end (source name = `source`, default the path),
  // committing every ~chunk_bytes; a final line without '\n' is ingested too (an import).
  Result<IngestCounts> ingest_file(RunId run, const std::filesystem::path& path,
                                   std::string_view source = {},
                                   size_t chunk_bytes = 8u << 20);
  // Several files of one run (a run directory's per-rank files) imported together: chunks are
  // read round-robin, ~chunk_bytes per transaction in all, so a transaction holds the same steps
  // of every rank and the cross-rank aggregates merge them into one row per step (file after
  // file, every point of a per-rank file would be its own aggregate upsert). Each file's offset
  // advances with its lines (exactly once, resumable). Counts per file, in `files` order.
  struct ImportFile {
    std::filesystem::path path;
    std::string source;  // the source name; empty: the path
  };
  Result<std::vector<IngestCounts>> ingest_files(RunId run, const std::vector<ImportFile>& files,
                                                 size_t chunk_bytes = 8u << 20);

  // Queries ------------------------------------------------------------------------------------
  Result<std::vector<std::string>> keys(RunId run);  // metric keys stored for the run
  // Decimated series, one per run in q.runs (same order): keeps each pixel column's min, max and
  // last point plus the exact first and last point of the range, so spikes never vanish.
  Result<std::vector<Series>> query_series(const SeriesQuery& q);
  // Every point of the run, unsampled, as CSV: run,rank,step,time,tokens,key,value.
  Status export_csv(RunId run, const std::filesystem::path& out);
  Status export_csv(RunId run, std::ostream& out);

  // Recomputes the derived tables (summary, chart buckets, cross-rank aggregates, totals) of a
  // run from its points.
  Status rebuild_derived(RunId run);
  // Writes the open chart buckets (open_buckets.h) of `run` (every run when unset) in their own
  // transaction. Ingest does this when a rank ends and an import ends; StoreWriter when it stops.
  // Queries never need it (they read an open bucket's points raw).
  Status flush_open_buckets(std::optional<RunId> run = std::nullopt);

  // Per step, the spread of `key` over the ranks (cross-rank aggregates kept at ingest): the
  // fastest and slowest rank of a step time or of an axis's collectives. Steps in
  // [first_step, last_step] that have the key, in step order.
  Result<std::vector<StepExtremes>> step_extremes(RunId run, std::string_view key,
                                                  int64_t first_step, int64_t last_step);

  // Several chunks in ONE transaction (what StoreWriter commits per batch). A chunk's own error
  // (a gap, an unknown run) fails that chunk only; a database error fails them all.
  struct ChunkRef {
    RunId run = 0;
    std::string_view source;
    uint64_t start_offset = 0;
    std::string_view bytes;
  };
  Result<std::vector<Result<IngestCounts>>> ingest_chunks(const std::vector<ChunkRef>& chunks);

  // The connection itself, for the store's own modules (core/store/) and for tests and benchmarks
  // (PRAGMA integrity_check ...). Everything else goes through the members above or the facades
  // that take a RunStore (calibration_store.h, trials.h, run_observations.h).
  sqlite3* handle() { return db_; }

 private:
  RunStore() = default;
  Result<IngestCounts> ingest_one(RunId run, std::string_view source, uint64_t start_offset,
                                  std::string_view bytes, bool at_eof);
  Status rebuild_derived_in_tx(RunId run);
  sqlite3* db_ = nullptr;
  std::filesystem::path path_;
  std::unique_ptr<class Ingester> ingester_;
};

}  // namespace meshwork::store
