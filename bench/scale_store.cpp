// The run store at 1,024 nodes x 8 GPUs (issue 26, bench/scale_store.sh builds and runs it).
// Prints goal vs measured vs the numbers from before this change, side by side, and
// writes scale-store.json.
//
//   scale_store_bench OUT_DIR [ingest_steps] [compare_steps] [import_ranks import_steps]
//
// 1. Ingest: 8,192 ranks, one chunk per rank per step (what the follower submits), through
//    StoreWriter (its default batching), step after step; meanwhile a reader thread on its own
//    connection runs get_run and the monitor frame (mean over ranks of step_s, 800 columns) in
//    a loop: p50 / p95 of each during ingest.
// 2. Monitor frame and Compare cold at 8 runs x 8,192 ranks x 10,000 steps. That store would hold
//    655M step rows (~100 GB), so it is generated as what the views read: each run's cross-rank
//    aggregates (15 keys x 10,000 steps: n = 8,192, synthetic sums / min / max / ranks) and its
//    totals, written straight into rank_agg / run_stats, plus rank 0's raw step rows (the
//    per-rank charts of rank 0). Compare runs ui/compare_model's load_compare_frame (series +
//    per-axis communication bars) on a fresh connection, no cache: "cold" for Meshwork; the OS
//    file cache is warm (dropping it would disturb the other users of this machine).
// 3. `runs import` of one shared file (every rank's lines) vs the same lines as per-rank files,
//    through RunStore::ingest_file / ingest_files (a run directory's files together) as the CLI does.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "bench/measure.h"
#include "core/metrics.h"
#include "core/store/run_store.h"
#include "core/store/schema.h"
#include "core/store/step_line.h"
#include "core/store/store_writer.h"
#include "core/store/compare_frame.h"
#include "core/store/run_frame.h"

namespace fs = std::filesystem;
using namespace meshwork;
using namespace meshwork::store;

namespace {

constexpr int kRanks = 8192;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

nlohmann::json config_1024x8() {
  return {{"v", 1}, {"name", "llama-1024x8"}, {"model", "llama-3.1-405b"},
          {"mesh", {{"dp_replicate", 8}, {"dp_shard", 128}, {"cp", 1}, {"tp", 8}}}};
}

StepRecord make_step(int rank, int64_t step, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0.0, 0.02);
  StepRecord r;
  r.step = step;
  r.rank = rank;
  r.time = 1.7e9 + 1.0 * static_cast<double>(step) + 1e-5 * rank;
  r.loss = 4.0 * std::exp(-static_cast<double>(step) / 3000.0) + 2.0 + noise(rng);
  r.lr = 3e-4;
  r.grad_norm = 1.0 + noise(rng);
  r.tokens = 8192;
  r.tokens_per_s = 8192 + 100 * noise(rng);
  r.tflops = 400 + noise(rng);
  r.mfu = 0.41 + noise(rng) / 10;
  r.mem_bytes = 60e9 + step;
  r.mem_peak_bytes = 70e9;
  r.comm_s = AxisArray<double>::of(0.05 + noise(rng) / 10, 0.12 + noise(rng) / 10, 0.0, 0.08 + noise(rng) / 10);
  r.compute_s = 0.7 + noise(rng) / 10;
  r.step_s = 1.0 + noise(rng) / 10;
  return r;
}

struct IngestResult {
  int64_t lines = 0;
  double wall_s = 0, cpu_s = 0, stop_s = 0;
  std::vector<double> get_run_ms, frame_ms, page_ms;
};

// 1. 8,192 ranks fed one chunk per rank per step through StoreWriter, readers alongside.
IngestResult ingest(const fs::path& db, int steps) {
  IngestResult out;
  RunId run = 0;
  {
    auto s = RunStore::open(db);
    if (!s) {
      std::cerr << s.error().message() << "\n";
      std::exit(1);
    }
    run = *(*s)->create_run("ingest-8192", config_1024x8(), {});
  }
  // Lines made up front: the bench measures the store, not the JSON writer.
  std::mt19937_64 rng(7);
  std::vector<std::vector<std::string>> lines(static_cast<size_t>(steps), std::vector<std::string>(kRanks));
  for (int s = 0; s < steps; ++s)
    for (int r = 0; r < kRanks; ++r) {
      std::string l = to_json_line(make_step(r, s, rng)) + "\n";
      if (s == 0) {
        StartRecord st;
        st.rank = r;
        st.world = kRanks;
        st.node = r / 8;
        st.host = "node" + std::to_string(r / 8);
        st.time = 1.7e9;
        l = to_json_line(st) + "\n" + l;
      }
      lines[s][r] = std::move(l);
    }
  std::vector<std::string> source(kRanks);
  for (int r = 0; r < kRanks; ++r)
    source[r] = "node" + std::to_string(r / 8) + "/metrics-rank" + std::to_string(r) + ".jsonl";

  std::atomic<bool> done{false};
  std::thread reader([&] {
    auto s = RunStore::open(db, RunStore::Options{true, 5000});
    if (!s) return;
    SeriesQuery q;
    q.runs = {run};
    q.key = "step_s";
    q.aggregate = Aggregate::mean;
    q.pixels = 800;
    while (!done) {
      const double t0 = bench::steady_seconds();
      auto info = (*s)->get_run(run);
      const double t1 = bench::steady_seconds();
      auto series = (*s)->query_series(q);
      const double t2 = bench::steady_seconds();
      auto page = store::load_run_frame(s->get(), run, -1, std::nullopt, 800, 0);  // every chart
      const double t3 = bench::steady_seconds();
      if (!info || !series || !page) continue;
      out.get_run_ms.push_back(1e3 * (t1 - t0));
      out.frame_ms.push_back(1e3 * (t2 - t1));
      out.page_ms.push_back(1e3 * (t3 - t2));
      std::this_thread::sleep_for(std::chrono::milliseconds(40));  // the monitor's 25 frames/s
    }
  });
  const double t0 = bench::steady_seconds(), c0 = bench::process_cpu_seconds();
  {
    auto writer = StoreWriter::start(db);
    if (!writer) std::exit(1);
    std::vector<uint64_t> offset(kRanks, 0);
    for (int s = 0; s < steps; ++s)
      for (int r = 0; r < kRanks; ++r) {
        const std::string& l = lines[s][r];
        (*writer)->submit(run, source[r], offset[r], l);
        offset[r] += l.size();
        ++out.lines;
      }
    (*writer)->flush();
    out.wall_s = bench::steady_seconds() - t0;
    out.cpu_s = bench::process_cpu_seconds() - c0;
    // The writer stops: every rank's open chart buckets are written (once per follow, not per
    // line; the same work as 8,192 end records): timed apart.
    const double s0 = bench::steady_seconds();
    writer->reset();
    out.stop_s = bench::steady_seconds() - s0;
  }
  done = true;
  reader.join();
  return out;
}

// 2. The Compare store: 8 runs, each 15 keys x `steps` aggregate rows (8,192 ranks each) and rank
// 0's raw rows. Returns the run ids.
std::vector<RunId> generate_compare_store(const fs::path& db, int runs, int steps) {
  auto opened = RunStore::open(db);
  if (!opened) std::exit(1);
  RunStore& s = **opened;
  std::vector<RunId> ids;
  for (int i = 0; i < runs; ++i) {
    nlohmann::json cfg = config_1024x8();
    cfg["training"] = {{"lr", 3e-4 * (1 + i)}, {"steps", steps}};
    ids.push_back(*s.create_run("compare-" + std::to_string(i), cfg, {}));
  }
  // Rank 0's raw steps, through the real ingest path (chunked like an import).
  std::mt19937_64 rng(11);
  for (RunId id : ids) {
    std::string text;
    for (int st = 0; st < steps; ++st) text += to_json_line(make_step(0, st, rng)) + "\n";
    if (!s.ingest_chunk(id, "node0/metrics-rank0.jsonl", 0, text)) std::exit(1);
  }
  // The cross-rank rows of 8,192 ranks, written directly (what ingest would have merged).
  sqlite3* db_h = s.handle();
  sqlite3_exec(db_h, "BEGIN; DELETE FROM rank_agg; DELETE FROM run_stats;", nullptr, nullptr, nullptr);
  sqlite3_stmt* ins = nullptr;
  sqlite3_prepare_v2(db_h, "INSERT INTO rank_agg(run, key, step, n, sum, lo, lo_rank, hi, hi_rank, x_rank,"
                           " time, tokens, x_v) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,0,?10,?11,?12)", -1, &ins, nullptr);
  std::vector<int64_t> key_ids;
  for (const std::string& k : step_series_keys()) {
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db_h, "SELECT id FROM keys WHERE name = ?1", -1, &q, nullptr);
    sqlite3_bind_text(q, 1, k.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_step(q);
    key_ids.push_back(sqlite3_column_int64(q, 0));
    sqlite3_finalize(q);
  }
  std::uniform_int_distribution<int> any_rank(0, kRanks - 1);
  for (RunId id : ids) {
    for (size_t k = 0; k < key_ids.size(); ++k)
      for (int st = 0; st < steps; ++st) {
        const StepRecord rec = make_step(0, st, rng);
        const double v = step_values(rec)[k];
        sqlite3_bind_int64(ins, 1, id);
        sqlite3_bind_int64(ins, 2, key_ids[k]);
        sqlite3_bind_int64(ins, 3, st);
        sqlite3_bind_int64(ins, 4, kRanks);
        sqlite3_bind_double(ins, 5, v * kRanks);
        sqlite3_bind_double(ins, 6, v * 0.9);
        sqlite3_bind_int64(ins, 7, any_rank(rng));
        sqlite3_bind_double(ins, 8, v * 1.1);
        sqlite3_bind_int64(ins, 9, any_rank(rng));
        sqlite3_bind_double(ins, 10, rec.time);
        sqlite3_bind_double(ins, 11, 8192.0 * (st + 1));
        sqlite3_bind_double(ins, 12, v);
        sqlite3_step(ins);
        sqlite3_reset(ins);
      }
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db_h, "INSERT INTO run_stats(run, points, last_step, ranks_ok) VALUES (?1, ?2, ?3, 0)", -1, &st, nullptr);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, int64_t{kRanks} * steps * 15);
    sqlite3_bind_int64(st, 3, steps - 1);
    sqlite3_step(st);
    sqlite3_finalize(st);
    sqlite3_stmt* world = nullptr;
    sqlite3_prepare_v2(db_h, "UPDATE runs SET world = ?2, status = 'ok' WHERE id = ?1", -1, &world, nullptr);
    sqlite3_bind_int64(world, 1, id);
    sqlite3_bind_int64(world, 2, kRanks);
    sqlite3_step(world);
    sqlite3_finalize(world);
  }
  sqlite3_finalize(ins);
  sqlite3_exec(db_h, "COMMIT;", nullptr, nullptr, nullptr);
  return ids;
}

struct ImportResult {
  int64_t lines = 0;
  double shared_s = 0, per_rank_s = 0;
};

// 3. One shared file vs per-rank files, same lines, fresh runs, best of `rounds`.
ImportResult import_ratio(const fs::path& dir, int ranks, int steps, int rounds) {
  ImportResult out;
  std::mt19937_64 rng(3);
  fs::create_directories(dir / "per-rank");
  std::vector<std::ofstream> per;
  for (int r = 0; r < ranks; ++r) per.emplace_back(dir / "per-rank" / ("metrics-rank" + std::to_string(r) + ".jsonl"));
  {
    std::ofstream shared(dir / "shared.jsonl");
    for (int s = 0; s < steps; ++s)
      for (int r = 0; r < ranks; ++r) {
        const std::string l = to_json_line(make_step(r, s, rng)) + "\n";
        shared << l;
        per[static_cast<size_t>(r)] << l;
        ++out.lines;
      }
  }
  per.clear();
  out.shared_s = out.per_rank_s = 1e300;
  for (int round = 0; round < rounds; ++round) {
    for (int shared = 0; shared < 2; ++shared) {
      const fs::path db = dir / "import.db";
      for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
      auto s = RunStore::open(db);
      if (!s) std::exit(1);
      RunId run = *(*s)->create_run("import", {}, {});
      const double t0 = bench::steady_seconds();
      if (shared) {
        if (!(*s)->ingest_file(run, dir / "shared.jsonl")) std::exit(1);
      } else {
        std::vector<RunStore::ImportFile> files;  // a run directory: `runs import` takes them together
        for (int r = 0; r < ranks; ++r)
          files.push_back({dir / "per-rank" / ("metrics-rank" + std::to_string(r) + ".jsonl"), ""});
        if (!(*s)->ingest_files(run, files)) std::exit(1);
      }
      const double t = bench::steady_seconds() - t0;
      (shared ? out.shared_s : out.per_rank_s) = std::min(shared ? out.shared_s : out.per_rank_s, t);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: scale_store_bench OUT_DIR [ingest_steps] [compare_steps] [import_ranks import_steps]\n";
    return 2;
  }
  const fs::path dir = argv[1];
  const int ingest_steps = argc > 2 ? std::atoi(argv[2]) : 12;
  const int compare_steps = argc > 3 ? std::atoi(argv[3]) : 10000;
  const int import_ranks = argc > 5 ? std::atoi(argv[4]) : 128;
  const int import_steps = argc > 5 ? std::atoi(argv[5]) : 250;
  fs::create_directories(dir);
  const std::vector<double> load_before = bench::load_average();

  std::cerr << "ingest: 8192 ranks x " << ingest_steps << " steps ...\n";
  const IngestResult in = ingest(dir / "ingest.db", ingest_steps);

  std::cerr << "compare store: 8 runs x 8192 ranks x " << compare_steps << " steps ...\n";
  const double g0 = bench::steady_seconds();
  const std::vector<RunId> runs = generate_compare_store(dir / "compare.db", 8, compare_steps);
  const double gen_s = bench::steady_seconds() - g0;
  // Monitor frame: the mean over 8,192 ranks of a key, 800 columns, on a fresh connection; and
  // the whole monitor job (load_monitor_frame: every chart of the page) for the record.
  std::vector<double> frame_ms, page_ms, compare_ms;
  store::CompareFrame last_compare;
  for (int round = 0; round < 5; ++round) {
    auto s = RunStore::open(dir / "compare.db", RunStore::Options{true, 5000});
    if (!s) return 1;
    store::CompareQuery cq;
    cq.runs = runs;
    cq.key = "loss";
    cq.pixels = 1000;
    double t0 = bench::steady_seconds();
    auto cf = store::load_compare_frame(s->get(), cq, nullptr);  // cold: new connection, no cache
    compare_ms.push_back(1e3 * (bench::steady_seconds() - t0));
    if (cf->error) {
      std::cerr << cf->error->message() << "\n";
      return 1;
    }
    last_compare = *cf;
    SeriesQuery q;
    q.runs = {runs[0]};
    q.key = "step_s";
    q.aggregate = Aggregate::mean;
    q.pixels = 800;
    t0 = bench::steady_seconds();
    auto series = (*s)->query_series(q);
    frame_ms.push_back(1e3 * (bench::steady_seconds() - t0));
    if (!series || (*series)[0].points.empty()) return 1;
    t0 = bench::steady_seconds();
    auto page = store::load_run_frame(s->get(), runs[0], -1, std::nullopt, 800, 0);
    page_ms.push_back(1e3 * (bench::steady_seconds() - t0));
  }

  std::cerr << "import: " << import_ranks << " ranks x " << import_steps << " steps, shared vs per-rank ...\n";
  const ImportResult im = import_ratio(dir / "import", import_ranks, import_steps, 3);
  const std::vector<double> load_after = bench::load_average();

  const double lines_per_s = static_cast<double>(in.lines) / in.wall_s;
  const double lines_per_cpu_s = static_cast<double>(in.lines) / in.cpu_s;
  const double get_run_p95 = percentile(in.get_run_ms, 0.95), live_frame_p95 = percentile(in.frame_ms, 0.95);
  const double frame_best = *std::min_element(frame_ms.begin(), frame_ms.end());
  const double frame_median = percentile(frame_ms, 0.5);
  const double compare_median = percentile(compare_ms, 0.5);
  const double ratio = im.per_rank_s / im.shared_s;  // shared lines/s over per-rank lines/s

  std::printf("\nRun store at 8,192 ranks (issue 26). Load average %.1f before, %.1f after (2 cores, shared).\n",
              load_before[0], load_after[0]);
  std::printf("%-52s %14s %16s %16s\n", "what", "goal", "measured", "before (issue)");
  auto row = [](const char* what, const std::string& goal, const std::string& got, const std::string& before) {
    std::printf("%-52s %14s %16s %16s\n", what, goal.c_str(), got.c_str(), before.c_str());
  };
  char b[64];
  auto fmt = [&](const char* f, double v) {
    std::snprintf(b, sizeof b, f, v);
    return std::string(b);
  };
  row("ingest, step lines/s (wall)", ">= 25,000", fmt("%.0f", lines_per_s), "3,000");
  row("ingest, step lines per CPU second", "", fmt("%.0f", lines_per_cpu_s), "");
  row("writer stop: open buckets of 8,192 ranks written", "", fmt("%.1f s", in.stop_s), "");
  row("get_run during ingest, p95", "<= 50 ms", fmt("%.1f ms", get_run_p95), "~150 ms");
  row("monitor frame during ingest, p95", "<= 50 ms", fmt("%.1f ms", live_frame_p95), "");
  row("monitor page job (every chart) during ingest, p95", "", fmt("%.1f ms", percentile(in.page_ms, 0.95)), "");
  row("monitor frame, mean of a key, 10k steps (median)", "<= 50 ms", fmt("%.1f ms", frame_median), "5,900 ms");
  row("monitor page job (every chart), 10k steps", "", fmt("%.1f ms", percentile(page_ms, 0.5)), "");
  row("Compare 8 runs x 8,192 ranks x 10k steps, cold", "<= 1,000 ms", fmt("%.0f ms", compare_median), "28,000 ms");
  row("  of which comm bars", "", fmt("%.0f ms", last_compare.comm_ms), "22,000 ms");
  row("import shared file / per-rank files (lines/s)", ">= ~1", fmt("%.2f", ratio), "0.078 (1/12.8)");
  std::printf("(ingest: %lld lines in %.2f s wall, %.2f s CPU; %zu live reads; compare store generated in %.1f s;\n"
              " import: %lld lines, shared %.2f s = %.0f lines/s, per-rank %.2f s = %.0f lines/s; frame best %.1f ms)\n",
              static_cast<long long>(in.lines), in.wall_s, in.cpu_s, in.frame_ms.size(), gen_s,
              static_cast<long long>(im.lines), im.shared_s, static_cast<double>(im.lines) / im.shared_s,
              im.per_rank_s, static_cast<double>(im.lines) / im.per_rank_s, frame_best);

  nlohmann::json j = {
      {"bench", "scale_store"},
      {"ranks", kRanks},
      {"load_before", load_before},
      {"load_after", load_after},
      {"ingest", {{"steps", ingest_steps}, {"lines", in.lines}, {"wall_s", in.wall_s}, {"cpu_s", in.cpu_s},
                  {"lines_per_s", lines_per_s}, {"lines_per_cpu_s", lines_per_cpu_s}, {"writer_stop_s", in.stop_s}, {"goal_lines_per_s", 25000},
                  {"before_lines_per_s", 3000},
                  {"get_run_ms_p50", percentile(in.get_run_ms, 0.5)}, {"get_run_ms_p95", get_run_p95},
                  {"frame_ms_p50", percentile(in.frame_ms, 0.5)}, {"frame_ms_p95", live_frame_p95},
                  {"page_job_ms_p95", percentile(in.page_ms, 0.95)},
                  {"live_reads", in.frame_ms.size()}, {"goal_live_ms_p95", 50}, {"before_get_run_ms", 150}}},
      {"monitor_frame", {{"steps", compare_steps}, {"median_ms", frame_median}, {"best_ms", frame_best},
                         {"page_job_median_ms", percentile(page_ms, 0.5)}, {"goal_ms", 50}, {"before_ms", 5900}}},
      {"compare", {{"runs", runs.size()}, {"steps", compare_steps}, {"median_ms", compare_median},
                   {"series_ms", last_compare.series_ms}, {"comm_ms", last_compare.comm_ms},
                   {"runs_ms", last_compare.runs_ms}, {"goal_ms", 1000}, {"before_ms", 28000},
                   {"generated_s", gen_s},
                   {"note", "aggregates of 8,192 ranks written directly (synthetic values), rank 0 raw; "
                            "cold = new connection, no CompareCache, OS file cache warm"}}},
      {"import", {{"ranks", import_ranks}, {"steps", import_steps}, {"lines", im.lines},
                  {"shared_s", im.shared_s}, {"per_rank_s", im.per_rank_s}, {"ratio", ratio},
                  {"goal_ratio", 1.0}, {"before_ratio", 1.0 / 12.8}}},
  };
  std::ofstream(dir / "scale-store.json") << j.dump(2) << "\n";
  return 0;
}
