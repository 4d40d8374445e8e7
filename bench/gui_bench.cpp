// bench/gui.sh: the workbench's charts against a big store.
//
//  1. Store: R runs x P steps of one rank (each step = 15 series, so P points per series), as
//     meshtrain's JSON lines through RunStore::ingest_chunk. Built once and kept (--db).
//  2. Compare: open the Compare page on all R runs (loss, x = step): time from set_runs() to
//     the page painted (the worker's queries + drawing + a synchronous repaint). Cold (first
//     open in this process) and warm (best of 5, a different metric each time).
//  3. Live: a writer thread streams `rate` steps/s (= rate points/s per series) into run 1
//     through StoreWriter (as the follower does) while its live page polls; per drawn frame, the
//     time to draw (replace() on every chart) + a synchronous repaint of the page, and the
//     worker's query time. Frames/s shows the coalescing (<= 25/s).
// Prints a table and writes JSON (--out).
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>
#include <QThread>
#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "core/store/run_store.h"
#include "core/store/store_writer.h"
#include "ui/compare_page.h"
#include "ui/metric_chart.h"
#include "ui/monitor_model.h"
#include "ui/monitor_page.h"
#include "ui/runs_model.h"
#include "ui/store_worker.h"
#include "ui/theme.h"

using namespace meshwork;
namespace fs = std::filesystem;

namespace {
std::string step_line(int64_t step, double t, double loss) {
  char buf[640];
  std::snprintf(buf, sizeof buf,
                R"({"v":1,"type":"step","step":%lld,"rank":0,"time":%.3f,"loss":%.5f,"lr":0.0003,"grad_norm":%.4f,)"
                R"("tokens":4096,"tokens_per_s":%.1f,"tflops":0.01,"mfu":%.4f,"mem_bytes":%lld,"mem_peak_bytes":%lld,)"
                R"("comm_s":{"dp_replicate":%.4f,"dp_shard":%.4f,"cp":0,"tp":0},"compute_s":%.4f,"step_s":%.4f})"
                "\n",
                static_cast<long long>(step), t, loss, 1.0 + 0.3 * std::sin(step * 0.01), 40000 + 500 * std::sin(step * 0.003),
                0.4 + 0.01 * std::sin(step * 0.002), 1000000000LL + (step % 1000) * 1000, 1500000000LL + (step % 777) * 1000,
                0.002 + 0.0005 * std::sin(step * 0.05), 0.004, 0.09, 0.1);
  return buf;
}
double loss_at(int run, int64_t s) { return 2.0 + 8.0 / (1.0 + s * 1e-4 * (1 + run * 0.15)) + ((s * 2654435761u) % 1000) * 1e-4; }

std::string start_line(int run) {
  const int rep = run % 2 ? 2 : 1, shard = run % 2 ? 4 : 8;
  return R"({"v":1,"type":"start","rank":0,"time":1000,"host":"bench","pid":1,"node":0,"world":8,"mesh":{"dp_replicate":)" +
         std::to_string(rep) + R"(,"dp_shard":)" + std::to_string(shard) +
         R"(,"cp":1,"tp":1},"config":{"v":1,"model":"tiny","mesh":{"dp_replicate":)" + std::to_string(rep) +
         R"(,"dp_shard":)" + std::to_string(shard) + R"(,"cp":1,"tp":1},"training":{"lr":)" +
         std::to_string(0.0003 * (1 + run)) + R"(,"steps":1000000}}})" + "\n";
}

int build_store(const fs::path& db, int runs, int64_t steps) {
  auto st = store::RunStore::open(db);
  if (!st) {
    std::cerr << st.error().message() << "\n";
    return 1;
  }
  auto& s = **st;
  auto existing = s.list_runs();
  if (existing && static_cast<int>(existing->size()) >= runs) {
    bool full = true;
    for (const auto& r : *existing) full &= r.steps + 1 >= steps;
    if (full) return 0;
  }
  std::cout << "building " << db << ": " << runs << " runs x " << steps << " steps (x15 series)...\n" << std::flush;
  QElapsedTimer t;
  t.start();
  for (int r = 0; r < runs; ++r) {
    auto id = s.create_run("bench-" + std::to_string(r + 1), nlohmann::json::object(), nlohmann::json::object());
    if (!id) return 1;
    std::string chunk = start_line(r);
    uint64_t offset = 0;
    for (int64_t k = 0; k < steps; ++k) {
      chunk += step_line(k, 1000 + k * 0.1, loss_at(r, k));
      if (chunk.size() > (8u << 20) || k + 1 == steps) {
        auto c = s.ingest_chunk(*id, "bench", offset, chunk);
        if (!c) {
          std::cerr << c.error().message() << "\n";
          return 1;
        }
        offset += chunk.size();
        chunk.clear();
      }
    }
    std::cout << "  run " << *id << " done after " << t.elapsed() / 1000.0 << " s\n" << std::flush;
  }
  return 0;
}

struct Stats {
  double mean = 0, p50 = 0, p95 = 0, max = 0;
  size_t n = 0;
};
Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = v.size();
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  s.p50 = v[v.size() / 2];
  s.p95 = v[std::min(v.size() - 1, v.size() * 95 / 100)];
  s.max = v.back();
  return s;
}
// The machine's load (1, 5, 15 min): benchmarks on a shared machine say how busy it was.
QJsonArray loadavg() {
  QFile f("/proc/loadavg");
  QJsonArray a;
  if (!f.open(QIODevice::ReadOnly)) return a;
  const QList<QByteArray> w = f.readAll().split(' ');
  for (int i = 0; i < 3 && i < w.size(); ++i) a.append(w[i].toDouble());
  return a;
}
QJsonObject to_json(const Stats& s) {
  return {{"mean_ms", s.mean}, {"p50_ms", s.p50}, {"p95_ms", s.p95}, {"max_ms", s.max}, {"n", static_cast<qint64>(s.n)}};
}
}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  const QJsonArray load_before = loadavg();
  QString db = QDir::homePath() + "/.cache/meshwork/bench/gui.db", out = "bench/results/gui.json";
  int runs = 8, rate = 2000, seconds = 10;
  int64_t steps = 1000000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--db") db = argv[i + 1];
    if (a == "--out") out = argv[i + 1];
    if (a == "--runs") runs = std::atoi(argv[i + 1]);
    if (a == "--steps") steps = std::atoll(argv[i + 1]);
    if (a == "--rate") rate = std::atoi(argv[i + 1]);
    if (a == "--seconds") seconds = std::atoi(argv[i + 1]);
  }
  fs::create_directories(fs::path(db.toStdString()).parent_path());
  if (int rc = build_store(db.toStdString(), runs, steps)) return rc;
  ui::apply_theme(app, ui::Theme::light);

  ui::StoreWorker worker(db);
  ui::RunsModel runs_model(&worker);
  runs_model.refresh();
  (void)QTest::qWaitFor([&] { return runs_model.loads() > 0; }, 60000);
  std::vector<store::RunId> ids;
  for (const auto& r : runs_model.runs())
    if (static_cast<int>(ids.size()) < runs) ids.push_back(r.id);
  std::sort(ids.begin(), ids.end());

  // --- Compare: open on every run.
  ui::ComparePage compare(&worker, &runs_model);
  compare.resize(1500, 950);
  compare.show();
  QTest::qWait(200);
  auto open_once = [&](const QString& metric) {
    QElapsedTimer t;
    t.start();
    const int64_t before = compare.model()->frames();
    compare.set_metric(metric);
    compare.set_runs(ids);
    (void)QTest::qWaitFor([&] { return compare.model()->frames() > before && compare.series_count() == static_cast<int>(ids.size()); }, 120000);
    compare.repaint();  // the page as the user sees it, painted synchronously
    return std::make_pair(static_cast<double>(t.nsecsElapsed()) / 1e6, compare.model()->frame()->load_ms);
  };
  const auto cold = open_once("loss");
  std::vector<double> warm, warm_query;
  for (const char* m : {"grad_norm", "loss", "tokens_per_s", "mem_bytes", "step_s"}) {
    auto r = open_once(m);
    warm.push_back(r.first);
    warm_query.push_back(r.second);
  }
  compare.hide();

  // --- Live: stream `rate` steps/s into run 1 while its page draws.
  auto st = store::RunStore::open(db.toStdString());
  if (!st) return 1;
  const store::RunId live = ids.front();
  auto offset = (*st)->source_offset(live, "bench");
  auto info = (*st)->get_run(live);
  if (!offset || !info) return 1;
  int64_t next_step = info->summary.steps + 1;
  st->reset();
  auto writer = store::StoreWriter::start(db.toStdString());
  if (!writer) return 1;
  ui::MonitorPage page(&worker);
  page.resize(1500, 950);
  page.show();
  page.show_run(live);
  (void)QTest::qWaitFor([&] { return page.model()->frame() != nullptr; }, 60000);
  std::vector<double> draw_ms, paint_ms, total_ms, query_ms;
  bool measuring = false;
  QObject::connect(page.model(), &ui::MonitorModel::frame_ready, &page, [&](auto f) {
    if (!measuring) return;
    QElapsedTimer t;
    t.start();
    page.repaint();
    const double p = static_cast<double>(t.nsecsElapsed()) / 1e6;
    draw_ms.push_back(page.last_draw_ms());
    paint_ms.push_back(p);
    total_ms.push_back(page.last_draw_ms() + p);
    query_ms.push_back(f->query_ms);
  });
  std::atomic<bool> stop{false};
  std::atomic<int64_t> streamed{0};
  uint64_t off = *offset;
  std::thread producer([&] {
    // 25 ms batches of rate/40 steps: the follower's cadence is 250 ms; this is finer, so the
    // page sees a steady trickle.
    const int per_batch = std::max(1, rate / 40);
    auto next = std::chrono::steady_clock::now();
    while (!stop) {
      std::string chunk;
      for (int i = 0; i < per_batch; ++i, ++next_step) chunk += step_line(next_step, 1000 + next_step * 0.1, loss_at(0, next_step));
      const size_t n = chunk.size();
      (*writer)->submit(live, "bench", off, std::move(chunk));
      off += n;
      streamed += per_batch;
      next += std::chrono::milliseconds(25);
      std::this_thread::sleep_until(next);
    }
  });
  measuring = true;
  QElapsedTimer wall;
  wall.start();
  const int64_t frames0 = page.model()->frames_applied();
  QTest::qWait(seconds * 1000);
  measuring = false;
  const double elapsed = static_cast<double>(wall.elapsed()) / 1000.0;
  const double fps = static_cast<double>(page.model()->frames_applied() - frames0) / elapsed;
  stop = true;
  producer.join();
  (*writer)->flush();
  const double achieved_rate = static_cast<double>(streamed.load()) / elapsed;

  const Stats warm_s = stats(warm), wq = stats(warm_query);
  const Stats d = stats(draw_ms), p = stats(paint_ms), tot = stats(total_ms), q = stats(query_ms);
  std::printf("\n%-44s %10s %10s %10s %10s\n", "gui bench (offscreen)", "mean ms", "p50 ms", "p95 ms", "max ms");
  std::printf("%-44s %10.1f %10s %10s %10s\n", "compare open, cold (8 runs)", cold.first, "", "", "");
  std::printf("%-44s %10.1f %10.1f %10.1f %10.1f\n", "compare open, warm (best of 5 = p50 col)", warm_s.mean, *std::min_element(warm.begin(), warm.end()), warm_s.p95, warm_s.max);
  std::printf("%-44s %10.1f %10.1f %10.1f %10.1f\n", "  of which store queries (worker)", wq.mean, wq.p50, wq.p95, wq.max);
  std::printf("%-44s %10.2f %10.2f %10.2f %10.2f\n", "live redraw: draw (replace on 7 charts)", d.mean, d.p50, d.p95, d.max);
  std::printf("%-44s %10.2f %10.2f %10.2f %10.2f\n", "live redraw: synchronous repaint", p.mean, p.p50, p.p95, p.max);
  std::printf("%-44s %10.2f %10.2f %10.2f %10.2f\n", "live redraw: total per frame", tot.mean, tot.p50, tot.p95, tot.max);
  std::printf("%-44s %10.2f %10.2f %10.2f %10.2f\n", "live frame query (worker thread)", q.mean, q.p50, q.p95, q.max);
  std::printf("frames/s %.1f (cap 25), streamed %.0f steps/s (asked %d) into a run of %lld steps, %d runs x %lld steps in the store\n",
              fps, achieved_rate, rate, static_cast<long long>(next_step), runs, static_cast<long long>(steps));
  std::printf("targets: open <= 1000 ms: %s (cold %.0f ms); redraw <= 16 ms: %s (p95 total %.1f ms)\n",
              cold.first <= 1000 ? "yes" : "NO", cold.first, tot.p95 <= 16 ? "yes" : "NO", tot.p95);

  QJsonObject o{{"bench", "gui"}, {"cores", static_cast<int>(std::thread::hardware_concurrency())},
                {"load_average_before", load_before}, {"load_average_after", loadavg()},
                {"runs", runs}, {"steps_per_run", static_cast<qint64>(steps)}, {"series_per_step", 15},
                {"platform", QGuiApplication::platformName()},
                {"compare_open_cold_ms", cold.first}, {"compare_open_cold_query_ms", cold.second},
                {"compare_open_warm", to_json(warm_s)}, {"compare_open_warm_best_ms", *std::min_element(warm.begin(), warm.end())},
                {"compare_queries_warm", to_json(wq)},
                {"live_draw", to_json(d)}, {"live_repaint", to_json(p)}, {"live_total", to_json(tot)}, {"live_query", to_json(q)},
                {"live_frames_per_s", fps}, {"live_streamed_steps_per_s", achieved_rate}, {"live_rate_asked", rate}};
  QFile f(out);
  if (f.open(QIODevice::WriteOnly)) f.write(QJsonDocument(o).toJson());
  std::cout << "wrote " << out.toStdString() << "\n";
  return 0;
}
