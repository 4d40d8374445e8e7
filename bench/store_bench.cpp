// Run store benchmark (bench/store.sh builds and runs it): ingest rate of meshtrain's metrics JSON
// lines against the sqlite3 shell importing the same points as CSV, in the same run, and the time
// of a decimated chart query over 8 runs totalling 1M points. Prints a table, writes JSON.
//
//   store_bench OUT_DIR [ranks steps] [query_steps_per_run]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "core/metrics.h"
#include "core/store/run_store.h"
#include "core/store/store_writer.h"

namespace fs = std::filesystem;
using namespace meshwork;
using namespace meshwork::store;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

StepRecord make_step(int rank, int64_t step, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0.0, 0.02);
  StepRecord r;
  r.step = step;
  r.rank = rank;
  r.time = 1.7e9 + 0.25 * static_cast<double>(step) + 0.001 * rank;
  r.loss = 4.0 * std::exp(-static_cast<double>(step) / 3000.0) + 2.0 + noise(rng);
  r.lr = 3e-4;
  r.grad_norm = 1.0 + noise(rng);
  r.tokens = 8192;
  r.tokens_per_s = 32768 + 1000 * noise(rng);
  r.tflops = 12.5 + noise(rng);
  r.mfu = 0.41 + noise(rng) / 10;
  r.mem_bytes = 1234567890 + step;
  r.mem_peak_bytes = 2234567890;
  r.comm_s = {0.01 + noise(rng) / 10, 0.02, 0.0, 0.03};
  r.compute_s = 0.18 + noise(rng) / 10;
  r.step_s = 0.25 + noise(rng) / 10;
  return r;
}

double run_sqlite3_import(const fs::path& db, const fs::path& csv, const std::string& schema) {
  fs::remove(db);
  fs::remove(fs::path(db.string() + "-wal"));
  const std::string setup = "sqlite3 '" + db.string() + "' 'PRAGMA journal_mode=WAL;' '" + schema +
                            "' > /dev/null";
  if (std::system(setup.c_str()) != 0) return -1;
  const std::string cmd = "sqlite3 -cmd 'PRAGMA synchronous=NORMAL' -cmd 'PRAGMA cache_size=-65536'"
                          " '" + db.string() + "' '.mode csv' '.import " + csv.string() +
                          " metrics'";
  const double t0 = now();
  if (std::system(cmd.c_str()) != 0) return -1;
  return now() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: store_bench OUT_DIR [ranks steps] [query_steps_per_run]\n";
    return 2;
  }
  const fs::path dir = argv[1];
  const int ranks = argc > 3 ? std::atoi(argv[2]) : 8;
  const int64_t steps = argc > 3 ? std::atoll(argv[3]) : 8400;
  const int64_t q_steps = argc > 4 ? std::atoll(argv[4]) : 125000;
  fs::create_directories(dir);
  std::mt19937_64 rng(42);

  // 1. The same points as JSON lines (one file per rank, as meshtrain writes) and as CSV.
  std::vector<fs::path> files;
  {
    std::ofstream csv(dir / "points.csv");
    for (int r = 0; r < ranks; ++r) {
      files.push_back(dir / ("metrics-rank" + std::to_string(r) + ".jsonl"));
      std::ofstream out(files.back());
      for (int64_t s = 0; s < steps; ++s) {
        const StepRecord rec = make_step(r, s, rng);
        out << to_json_line(rec) << '\n';
        char buf[64];
        for (const auto& [key, value] : step_series(rec)) {
          std::snprintf(buf, sizeof buf, "%.17g", value);
          csv << 1 << ',' << r << ',' << s << ',' << buf << ',' << key << ',' << buf << '\n';
        }
      }
    }
  }
  const int64_t points = static_cast<int64_t>(ranks) * steps *
                         static_cast<int64_t>(step_series_keys().size());

  // 2. Meshwork ingest: `runs import` path (ingest_file, 8 MiB transactions).
  const fs::path db = dir / "runs.db";
  for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(fs::path(db.string() + sfx));
  double t_import = 0;
  {
    auto store = RunStore::open(db);
    if (!store) { std::cerr << store.error().message() << "\n"; return 1; }
    auto run = (*store)->create_run("bench", nlohmann::json::object(), nlohmann::json::object());
    const double t0 = now();
    int64_t stored = 0;
    for (const fs::path& f : files) {
      auto c = (*store)->ingest_file(*run, f);
      if (!c) { std::cerr << c.error().message() << "\n"; return 1; }
      stored += c->points;
    }
    t_import = now() - t0;
    if (stored != points) { std::cerr << "stored " << stored << " of " << points << "\n"; return 1; }
  }
  // 3. Streaming: StoreWriter fed 64 KiB chunks (what the remote follower does).
  double t_stream = 0;
  {
    for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(fs::path(db.string() + "2" + sfx));
    const fs::path db2 = db.string() + "2";
    RunId run = 0;
    {
      auto store = RunStore::open(db2);
      run = *(*store)->create_run("stream", nlohmann::json::object(), nlohmann::json::object());
    }
    auto writer = StoreWriter::start(db2);
    if (!writer) { std::cerr << writer.error().message() << "\n"; return 1; }
    std::vector<std::string> contents;
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      contents.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const double t0 = now();
    for (size_t i = 0; i < files.size(); ++i) {
      const std::string& text = contents[i];
      size_t off = 0;
      while (off < text.size()) {
        size_t end = std::min(text.size(), off + (64u << 10));
        end = text.rfind('\n', end - 1) + 1;  // whole lines, as a follower sends
        (*writer)->submit(run, files[i].filename().string(), off, text.substr(off, end - off));
        off = end;
      }
    }
    (*writer)->flush();
    t_stream = now() - t0;
    if ((*writer)->stats().totals.points != points) { std::cerr << "stream lost points\n"; return 1; }
  }

  // 4. The sqlite3 shell importing the same points as CSV, into the same keyed layout (unique on
  // run, key, rank, step; WITHOUT ROWID) and into a plain table without any key.
  const double t_sqlite_keyed = run_sqlite3_import(
      dir / "sqlite3.db", dir / "points.csv",
      "CREATE TABLE metrics(run INTEGER, rank INTEGER, step INTEGER, time REAL, key TEXT, "
      "value REAL, PRIMARY KEY(run, key, rank, step)) WITHOUT ROWID;");
  const double t_sqlite_plain = run_sqlite3_import(
      dir / "sqlite3.db", dir / "points.csv",
      "CREATE TABLE metrics(run INTEGER, rank INTEGER, step INTEGER, time REAL, key TEXT, "
      "value REAL);");

  // 5. Query: 8 runs x q_steps steps of one rank: 8 * q_steps points of "loss" (1M by default),
  // one spike planted in run 3.
  const fs::path qdb = dir / "query.db";
  for (const char* sfx : {"", "-wal", "-shm"}) fs::remove(fs::path(qdb.string() + sfx));
  std::vector<RunId> runs;
  const int64_t spike_step = q_steps / 3 + 7;
  double t_qingest = 0;
  {
    auto store = RunStore::open(qdb);
    const double t0 = now();
    for (int i = 0; i < 8; ++i) {
      RunId run = *(*store)->create_run("q" + std::to_string(i), nlohmann::json::object(),
                                        nlohmann::json::object());
      runs.push_back(run);
      std::string chunk;
      uint64_t off = 0;
      for (int64_t s = 0; s < q_steps; ++s) {
        StepRecord rec = make_step(0, s, rng);
        if (i == 3 && s == spike_step) rec.loss = 1000.0;
        chunk += to_json_line(rec);
        chunk += '\n';
        if (chunk.size() > (8u << 20) || s + 1 == q_steps) {
          auto c = (*store)->ingest_chunk(run, "metrics-rank0.jsonl", off, chunk);
          if (!c) { std::cerr << c.error().message() << "\n"; return 1; }
          off = c->offset;
          chunk.clear();
        }
      }
    }
    t_qingest = now() - t0;
  }
  auto reader = RunStore::open(qdb, RunStore::Options{.read_only = true});
  if (!reader) { std::cerr << reader.error().message() << "\n"; return 1; }
  auto time_query = [&](SeriesQuery q, int reps, size_t* npoints, bool* spike, int* level) {
    double best = 1e9;
    for (int i = 0; i < reps; ++i) {
      const double t0 = now();
      auto res = (*reader)->query_series(q);
      const double dt = now() - t0;
      if (!res) { std::cerr << res.error().message() << "\n"; std::exit(1); }
      best = std::min(best, dt);
      *npoints = 0;
      *spike = false;
      for (const Series& s : *res) {
        *npoints = std::max(*npoints, s.points.size());
        for (const Point& p : s.points) *spike = *spike || p.y == 1000.0;
        *level = s.lod_level;
      }
    }
    return best;
  };
  SeriesQuery q;
  q.runs = runs;
  q.key = "loss";
  q.pixels = 800;
  size_t np_full = 0, np_time = 0, np_zoom = 0;
  bool sp_full = false, sp_time = false, sp_zoom = false;
  int lv_full = 0, lv_time = 0, lv_zoom = 0;
  // Cold first (the first query after opening), then the best of 10.
  size_t np_cold = 0; bool sp_cold = false; int lv_cold = 0;
  const double t_cold = time_query(q, 1, &np_cold, &sp_cold, &lv_cold);
  const double t_full = time_query(q, 10, &np_full, &sp_full, &lv_full);
  SeriesQuery qt = q;
  qt.x = XAxis::time;
  const double t_time = time_query(qt, 10, &np_time, &sp_time, &lv_time);
  SeriesQuery qz = q;
  qz.x_min = static_cast<double>(spike_step - 2000);
  qz.x_max = static_cast<double>(spike_step + 2000);
  const double t_zoom = time_query(qz, 10, &np_zoom, &sp_zoom, &lv_zoom);

  const double rate = points / t_import, rate_stream = points / t_stream;
  const double rate_keyed = t_sqlite_keyed > 0 ? points / t_sqlite_keyed : 0;
  const double rate_plain = t_sqlite_plain > 0 ? points / t_sqlite_plain : 0;
  nlohmann::json j = {
      {"points", points},
      {"ranks", ranks},
      {"steps", steps},
      {"ingest_import_s", t_import},
      {"ingest_import_points_per_s", rate},
      {"ingest_stream_s", t_stream},
      {"ingest_stream_points_per_s", rate_stream},
      {"sqlite3_import_keyed_s", t_sqlite_keyed},
      {"sqlite3_import_keyed_points_per_s", rate_keyed},
      {"sqlite3_import_plain_s", t_sqlite_plain},
      {"sqlite3_import_plain_points_per_s", rate_plain},
      {"ratio_import_vs_sqlite3_keyed", rate_keyed > 0 ? rate / rate_keyed : 0},
      {"ratio_stream_vs_sqlite3_keyed", rate_keyed > 0 ? rate_stream / rate_keyed : 0},
      {"ratio_import_vs_sqlite3_plain", rate_plain > 0 ? rate / rate_plain : 0},
      {"query_points", 8 * q_steps},
      {"query_runs", 8},
      {"query_pixels", 800},
      {"query_setup_ingest_s", t_qingest},
      {"query_cold_ms", t_cold * 1e3},
      {"query_step_ms", t_full * 1e3},
      {"query_time_axis_ms", t_time * 1e3},
      {"query_zoom_4k_steps_ms", t_zoom * 1e3},
      {"query_max_points_per_series", np_full},
      {"query_bucket_level", lv_full},
      {"query_spike_kept", sp_full && sp_time && sp_zoom && sp_cold},
      {"targets", {{"ingest_points_per_s", 500000}, {"ratio_vs_sqlite3", 0.8}, {"query_ms", 20}}},
  };
  std::ofstream(dir / "store.json") << j.dump(2) << "\n";
  std::printf("%-48s %14s\n", "measure", "value");
  std::printf("%-48s %14lld\n", "points ingested (JSON lines, 15 keys/line)", (long long)points);
  std::printf("%-48s %14.0f\n", "meshwork import points/s (ingest_file)", rate);
  std::printf("%-48s %14.0f\n", "meshwork stream points/s (StoreWriter)", rate_stream);
  std::printf("%-48s %14.0f\n", "sqlite3 .import CSV points/s (same key)", rate_keyed);
  std::printf("%-48s %14.0f\n", "sqlite3 .import CSV points/s (plain table)", rate_plain);
  std::printf("%-48s %14.2f\n", "ratio import / sqlite3 (same key)", rate / rate_keyed);
  std::printf("%-48s %14.2f\n", "ratio stream / sqlite3 (same key)", rate_stream / rate_keyed);
  std::printf("%-48s %14.2f\n", "ratio import / sqlite3 (plain table)", rate / rate_plain);
  std::printf("%-48s %14.2f\n", "query 8 runs x 125k pts, 800 px, cold (ms)", t_cold * 1e3);
  std::printf("%-48s %14.2f\n", "query x=step, best of 10 (ms)", t_full * 1e3);
  std::printf("%-48s %14.2f\n", "query x=time, best of 10 (ms)", t_time * 1e3);
  std::printf("%-48s %14.2f\n", "query zoom 4k steps, best of 10 (ms)", t_zoom * 1e3);
  std::printf("%-48s %14zu\n", "points returned per series (max)", np_full);
  std::printf("%-48s %14s\n", "spike kept in every query", (sp_full && sp_time && sp_zoom && sp_cold) ? "yes" : "NO");
  return 0;
}
