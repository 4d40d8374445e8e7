// bench/web.sh's program: the web view (docs/web.md) on a big store, measured where a user sees
// it -- in a real headless Chromium (tests/web/chromium.h) -- plus the API under many clients.
//
//  1. Store: R finished runs "bench-1".."bench-R" of P points each (one rank's step = 15 points),
//     stored the way a launch stores them (tests/web/web_fixture.h). Built once under --store DIR
//     and reused: the file is keyed by schema version and size, built as *.partial, renamed, and
//     only then is the marker written, so an interrupted build never looks complete.
//  2. Compare ready: /compare?runs=<all R> opened --loads times (the first is cold: a fresh server
//     and page cache); the page's own window.meshwork.readyAt is ms since navigation start, i.e.
//     HTML + scripts + the API query + drawing. Then the same API query again for its load_ms
//     (the store's time), and a zoom re-query (x_min/x_max over the middle 10%).
//  3. Live latency: a live run "bench-live" on /run?id=ID; one step appended at a time, ~300 ms
//     apart; latency = the page's drawnAt (Date.now() when it drew) - the epoch ms right after the
//     ingest committed. The run is deleted afterwards so the cached store stays R runs.
//  4. Throughput: bench/web_load.py (--clients over loopback, bounded in time and count) on a mix
//     of the decimated API; the server is in this process, so the event loop spins meanwhile.
// Prints a table (metric, value, target, pass) and writes --json. Exit 0: every target met; 1: a
// target missed; 2: something could not be measured (no made-up rows).
#include <QCoreApplication>
#include <QDateTime>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QThread>
#include <QTimer>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/store/schema.h"
#include "core/store/step_line.h"
#include "tests/web/chromium.h"
#include "tests/web/web_fixture.h"
#include "web/server.h"

using namespace meshwork;
namespace fs = std::filesystem;
using web::testing::RunSpec;

namespace {
constexpr double kReadyTargetMs = 1000, kLiveP95TargetMs = 1000;
const char* kLiveName = "bench-live";
// Global so that fail() can end it: std::exit() skips main's locals, and the destructor is what
// kills Chromium's process group.
std::unique_ptr<meshwork::testing::HeadlessChromium> browser;

[[noreturn]] void fail(const std::string& phase, const QString& why) {
  std::cerr << "web_bench: FAILED: " << phase << ": " << why.toStdString() << "\n";
  browser.reset();
  std::exit(2);
}
// Nearest rank, as web_load.py computes its percentiles.
double pct(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::max(0.0, std::ceil(p / 100.0 * static_cast<double>(v.size())) - 1))];
}
// Waits while the event loop turns: the server lives in this process and must keep answering.
void spin(int ms) {
  QEventLoop loop;
  QTimer::singleShot(ms, &loop, &QEventLoop::quit);
  loop.exec();
}
QJsonArray loadavg() {  // a shared machine: say how busy it was
  QFile f("/proc/loadavg");
  QJsonArray a;
  if (f.open(QIODevice::ReadOnly))
    for (const QByteArray& w : f.readAll().split(' ').mid(0, 3)) a.append(w.toDouble());
  return a;
}
QJsonArray to_array(const std::vector<double>& v) {
  QJsonArray a;
  for (double x : v) a.append(x);
  return a;
}
MeshShape one_rank_per(int ranks) {
  MeshShape m;
  m.set(Axis::dp_shard, ranks);
  return m;
}

// Builds the store unless a complete one is there (its marker); returns an error text or "".
std::string build_store(const fs::path& db, const fs::path& marker, int runs, int64_t steps, int ranks) {
  if (fs::exists(db) && fs::exists(marker)) return {};
  const fs::path tmp = db.string() + ".partial";
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    fs::remove(tmp.string() + suffix, ec);
    fs::remove(db.string() + suffix, ec);
  }
  std::cout << "building " << db.string() << ": " << runs << " runs x " << ranks << " rank(s) x " << steps
            << " steps x " << store::kStepSeries << " series...\n" << std::flush;
  QElapsedTimer t;
  t.start();
  {
    auto st = store::RunStore::open(tmp);
    if (!st) return st.error().message();
    for (int r = 0; r < runs; ++r) {
      // Runs differ in curve and lr, so compare has lines apart and a config diff to show.
      RunSpec spec{"bench-" + std::to_string(r + 1), one_rank_per(ranks), 2, 1e-3 * (1 + r), 1.0 + 0.05 * r};
      const store::RunId id = web::testing::create_run(**st, spec);
      std::vector<uint64_t> offsets;
      if (id == 0) return "create_run failed";
      for (int64_t first = 0; first < steps; first += 5000)  // 5,000 steps per ingest_chunk: fast
        if (!web::testing::add_steps(**st, id, spec, first, std::min(steps, first + 5000) - 1, offsets))
          return "add_steps failed for run " + std::to_string(id);
      if (!web::testing::end_run(**st, id, spec, "ok", "", offsets)) return "end_run failed";
      std::cout << "  run " << id << " done after " << t.elapsed() / 1000.0 << " s\n" << std::flush;
    }
  }  // closed: the WAL is checkpointed into the file before the rename
  fs::rename(tmp, db, ec);
  if (ec) return "rename " + tmp.string() + ": " + ec.message();
  QFile m(QString::fromStdString(marker.string()));
  if (!m.open(QIODevice::WriteOnly) || m.write("complete\n") < 0) return "cannot write " + marker.string();
  std::cout << "store built in " << t.elapsed() / 1000.0 << " s\n";
  return {};
}
}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  const QJsonArray load_before = loadavg();
  QString dir = "/tmp/meshwork-web-bench", out = "bench/results/web.json", load_script = "bench/web_load.py";
  int runs = 8, ranks = 1, loads = 5, live_samples = 40, clients = 50, seconds = 10, max_requests = 20000;
  int64_t points = 1000000;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) fail("arguments", QString::fromStdString(a) + ": needs a value");
    const QString v = argv[i + 1];
    if (a == "--store") dir = v;
    else if (a == "--json") out = v;
    else if (a == "--load-script") load_script = v;
    else if (a == "--runs") runs = v.toInt();
    else if (a == "--points") points = v.toLongLong();
    else if (a == "--ranks") ranks = v.toInt();
    else if (a == "--loads") loads = v.toInt();
    else if (a == "--live-samples") live_samples = v.toInt();
    else if (a == "--clients") clients = v.toInt();
    else if (a == "--seconds") seconds = v.toInt();
    else if (a == "--max-requests") max_requests = v.toInt();
    else fail("arguments", QString::fromStdString(a) + ": allowed: --store --json --load-script --runs --points "
                                                       "--ranks --loads --live-samples --clients --seconds --max-requests");
  }
  if (runs < 2 || runs > 10 || ranks < 1 || points < 1000 || loads < 1 || live_samples < 1 || clients < 1 ||
      seconds < 1 || max_requests < 1)
    fail("arguments", "allowed: runs 2..10 (compare's bounds), ranks >= 1, points >= 1000, the rest >= 1");

  // 1. The store (reused when complete).
  const int64_t steps = (points + static_cast<int64_t>(store::kStepSeries) * ranks - 1) /
                        (static_cast<int64_t>(store::kStepSeries) * ranks);
  fs::create_directories(dir.toStdString());
  const fs::path db = fs::path(dir.toStdString()) /
                      ("web-v" + std::to_string(store::kSchemaVersion) + "-" + std::to_string(runs) + "x" +
                       std::to_string(points) + "x" + std::to_string(ranks) + "r.db");
  const fs::path marker = db.string() + ".complete";
  if (std::string e = build_store(db, marker, runs, steps, ranks); !e.empty()) fail("building the store", QString::fromStdString(e));
  auto writer_r = store::RunStore::open(db);
  if (!writer_r) fail("opening the store", QString::fromStdString(writer_r.error().message()));
  store::RunStore& writer = **writer_r;
  auto listed = writer.list_runs();
  if (!listed) fail("listing runs", QString::fromStdString(listed.error().message()));
  std::vector<store::RunSummary> bench;
  for (const store::RunSummary& s : *listed) {
    if (s.name == kLiveName) (void)writer.delete_run(s.id);  // left by an interrupted bench
    else if (s.name.rfind("bench-", 0) == 0) bench.push_back(s);
  }
  if (static_cast<int>(bench.size()) != runs) fail("the store", "expected " + QString::number(runs) + " bench runs in " +
                                                       QString::fromStdString(db.string()) + "; delete it to rebuild");
  QStringList ids;
  int64_t total_points = 0, min_points = INT64_MAX;
  for (const auto& s : bench) {
    ids << QString::number(s.id);
    total_points += s.points;
    min_points = std::min(min_points, s.points);
  }
  const QString runs_param = ids.join(',');
  std::cout << "store: " << runs << " runs, " << total_points << " points (" << min_points << " per run at least), "
            << bench[0].steps + 1 << " steps x " << ranks << " rank(s) each\n" << std::flush;

  // The server in this process, on loopback and a free port; the browser beside it.
  web::WebServer::Options o;
  o.db = db;
  o.listen = *web::parse_listen("127.0.0.1:0");
  o.token_file = fs::path(dir.toStdString()) / "web-token";  // unused on loopback
  auto server_r = web::WebServer::start(o);
  if (!server_r) fail("starting the server", QString::fromStdString(server_r.error().message()));
  const QString base = (*server_r)->base_url();
  QString error;
  browser = meshwork::testing::HeadlessChromium::start(&error);
  if (!browser) fail("starting Chromium", error);
  auto js = [&](const QString& expr, int timeout_ms = 10000) {
    auto v = browser->evaluate(expr, &error, timeout_ms);
    if (!v) fail("evaluating " + expr.left(60).toStdString(), error);
    return *v;
  };
  auto wait = [&](const std::string& phase, const QString& expr, int timeout_ms) {
    if (!browser->wait_for(expr, timeout_ms, &error)) fail(phase, error);
  };
  // The browser's version: the user agent says only "HeadlessChrome/156.0.0.0", the binary says it all.
  QProcess ver;
  ver.start("sh", {"-c", "\"${MESHWORK_CHROMIUM:-chromium}\" --version 2>/dev/null"});
  ver.waitForFinished(10000);
  const QString chromium = QString(ver.readAllStandardOutput()).trimmed();
  if (chromium.isEmpty()) std::cerr << "web_bench: chromium --version said nothing\n";

  // 2. Compare page ready, cold then warm.
  const double zoom_lo = std::floor(bench[0].steps * 0.45), zoom_hi = std::ceil(bench[0].steps * 0.55);
  std::vector<double> ready_ms, api_ms, load_ms, zoom_ms, zoom_load_ms;
  QJsonArray compare_loads;
  int drawn_points = 0, zoom_points = 0, pixels = 0;
  for (int i = 0; i < loads; ++i) {
    if (!browser->navigate(base + "/compare?runs=" + runs_param, &error, 60000)) fail("opening compare", error);
    wait("compare ready", "window.meshwork && (window.meshwork.ready || window.meshwork.error)", 60000);
    if (!js("window.meshwork.error").isNull()) fail("compare", js("window.meshwork.error").toString());
    // readyAt; the page's own API fetch (Resource Timing); then the same query again for the
    // store's load_ms, and a zoom re-query at full resolution: both as fetch() from the page.
    const QJsonArray r = js(QStringLiteral(
        "(async () => { const m = window.meshwork;"
        " const e = performance.getEntriesByType('resource').filter(x => x.name.includes('/api/compare'))[0];"
        " const q = '/api/compare?runs=%1&key=loss&x=step&pixels=' + m.pixels;"
        " let t = performance.now(); const d = await (await fetch(q, {cache: 'no-store'})).json();"
        " const again = performance.now() - t;"
        " t = performance.now(); const z = await (await fetch(q + '&x_min=%2&x_max=%3', {cache: 'no-store'})).json();"
        " const zoom = performance.now() - t; let zp = 0; for (const s of z.series) zp += s.points.length;"
        " return [m.readyAt, m.points, m.pixels, e ? e.responseEnd - e.startTime : -1, d.load_ms, again, zoom, z.load_ms, zp]; })()")
        .arg(runs_param).arg(zoom_lo).arg(zoom_hi), 60000).toArray();
    ready_ms.push_back(r[0].toDouble());
    drawn_points = r[1].toInt();
    pixels = r[2].toInt();
    api_ms.push_back(r[3].toDouble());
    load_ms.push_back(r[4].toDouble());
    zoom_ms.push_back(r[6].toDouble());
    zoom_load_ms.push_back(r[7].toDouble());
    zoom_points = r[8].toInt();
    compare_loads.append(QJsonObject{{"ready_ms", r[0]}, {"points", r[1]}, {"api_fetch_ms", r[3]},
                                     {"refetch_load_ms", r[4]}, {"refetch_ms", r[5]}, {"zoom_ms", r[6]},
                                     {"zoom_load_ms", r[7]}});
    std::printf("  compare load %d: ready %.0f ms (its API fetch %.0f ms), %d points drawn\n", i + 1, r[0].toDouble(),
                r[3].toDouble(), r[1].toInt());
  }
  if (drawn_points <= 0) fail("compare", "the page drew no points");
  const double ready_max = *std::max_element(ready_ms.begin(), ready_ms.end());

  // 3. Live latency: commit one step, see when the page drew it.
  RunSpec live{kLiveName, one_rank_per(ranks)};
  const store::RunId live_id = web::testing::create_run(writer, live);
  std::vector<uint64_t> offsets;
  int64_t next = 20;
  if (live_id == 0 || !web::testing::add_steps(writer, live_id, live, 0, next - 1, offsets)) fail("live run", "create");
  if (!browser->navigate(base + "/run?id=" + QString::number(live_id), &error, 30000)) fail("opening the run", error);
  wait("run page ready", "window.meshwork && (window.meshwork.ready || window.meshwork.error)", 30000);
  // The WebSocket is up (the page shows it) before the first append, or that one would wait for it.
  wait("live socket", "document.getElementById('live').className.includes('live-on')", 20000);
  std::vector<double> latency;
  for (int k = 0; k < live_samples; ++k, ++next) {
    // ~300 ms apart (a follower's pace; the page is idle in between), staggered so the commits
    // land at every phase of the server's 200 ms poll instead of a few fixed ones.
    spin(300 + (k * 53) % 200);
    const int before = js("window.meshwork.lossPoints").toInt();
    if (!web::testing::add_steps(writer, live_id, live, next, next, offsets)) fail("live run", "append");
    const double t0 = static_cast<double>(QDateTime::currentMSecsSinceEpoch());
    wait("live update", QStringLiteral("window.meshwork.lossPoints > %1").arg(before), 10000);
    latency.push_back(js("window.meshwork.drawnAt").toDouble() - t0);
  }
  const double live_p50 = pct(latency, 50), live_p95 = pct(latency, 95);
  std::printf("  live: %zu updates, p50 %.0f ms, p95 %.0f ms\n", latency.size(), live_p50, live_p95);
  if (!browser->navigate("about:blank", &error)) fail("leaving the run page", error);  // idle during the load

  // 4. Throughput of the decimated API under --clients clients.
  const QString a = ids[0], b = ids[ids.size() / 2];
  // web_load.py splits --paths on commas: the run list goes as %2C (the server decodes it).
  const QStringList paths = {"/api/compare?runs=" + ids.join("%2C") + "&key=loss&x=step&pixels=800",
                             "/api/runs/" + a + "/frame?pixels=800", "/api/runs/" + a + "/series?key=loss&pixels=800",
                             "/api/runs/" + b + "/frame?pixels=800", "/api/runs/" + b + "/series?key=loss&pixels=800"};
  const QString load_json = QString::fromStdString((fs::path(dir.toStdString()) / "web-load.json").string());
  QFile::remove(load_json);
  QProcess load;
  load.setProcessChannelMode(QProcess::ForwardedChannels);
  QEventLoop loop;
  QObject::connect(&load, &QProcess::finished, &loop, &QEventLoop::quit);
  QObject::connect(&load, &QProcess::errorOccurred, &loop, &QEventLoop::quit);
  std::cout << "  load: " << clients << " clients, " << seconds << " s or " << max_requests << " requests\n" << std::flush;
  load.start("python3", {load_script, "--url", base, "--paths", paths.join(','), "--clients", QString::number(clients),
                         "--seconds", QString::number(seconds), "--max-requests", QString::number(max_requests),
                         "--json", load_json});
  QTimer::singleShot((seconds + 60) * 1000, &loop, &QEventLoop::quit);  // bounded even if it hangs
  loop.exec();
  if (load.state() != QProcess::NotRunning) {
    load.kill();
    load.waitForFinished(5000);
    fail("web_load.py", "did not finish in time");
  }
  QFile lf(load_json);
  if (!lf.open(QIODevice::ReadOnly)) fail("web_load.py", "exit " + QString::number(load.exitCode()) + ", no JSON");
  const QJsonObject tp = QJsonDocument::fromJson(lf.readAll()).object();
  if (tp["requests"].toInt() <= 0) fail("web_load.py", "no requests measured");

  (void)web::testing::end_run(writer, live_id, live, "ok", "", offsets);
  if (Status s = writer.delete_run(live_id); !s) std::cerr << "web_bench: could not delete the live run\n";
  browser.reset();

  // The table and the JSON.
  const bool ready_ok = ready_max <= kReadyTargetMs, live_ok = live_p95 <= kLiveP95TargetMs,
             load_ok = tp["errors"].toInt() == 0;
  std::printf("\n%-42s %14s %10s %5s\n", "metric", "value", "target", "pass");
  auto row = [](const char* m, const QString& v, const char* target, const char* pass) {
    std::printf("%-42s %14s %10s %5s\n", m, v.toUtf8().constData(), target, pass);
  };
  auto ms = [](double v) { return QString::number(v, 'f', 0) + " ms"; };
  row("store: runs x points per run", QString("%1 x %2").arg(runs).arg(min_points), "8 x 1M", min_points >= 1000000 ? "yes" : "-");
  row("compare ready, cold (first load)", ms(ready_ms[0]), "", "");
  row("compare ready, median of all loads", ms(pct(ready_ms, 50)), "", "");
  row("compare ready, max of all loads", ms(ready_max), "<= 1000", ready_ok ? "yes" : "NO");
  row("compare points drawn", QString::number(drawn_points), "", "");
  row("compare API load_ms, median (store)", ms(pct(load_ms, 50)), "", "");
  row("zoom re-query (10% of x), median", ms(pct(zoom_ms, 50)), "", "");
  row("live update latency p50", ms(live_p50), "", "");
  row("live update latency p95", ms(live_p95), "<= 1000", live_ok ? "yes" : "NO");
  row("live update latency max", ms(pct(latency, 100)), "", "");
  row("API throughput (requests/s)", QString::number(tp["requests_per_s"].toDouble(), 'f', 1), "", "");
  row("API latency p50 / p95", QString::number(tp["p50_ms"].toDouble(), 'f', 0) + " / " + ms(tp["p95_ms"].toDouble()),
      "", "");
  row("API requests / errors", QString("%1 / %2").arg(tp["requests"].toInt()).arg(tp["errors"].toInt()), "0 errors",
      load_ok ? "yes" : "NO");

  QProcess cpu;  // the machine: nproc, CPU model, Chromium
  cpu.start("sh", {"-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"});
  cpu.waitForFinished(5000);
  const QJsonObject result{
      {"bench", "web"},
      {"machine", QJsonObject{{"nproc", QThread::idealThreadCount()}, {"cpu", QString(cpu.readAll()).trimmed()},
                              {"chromium", chromium}, {"loadavg_before", load_before}, {"loadavg_after", loadavg()},
                              {"note", "client, server and browser share the machine's cores"}}},
      {"targets", QJsonObject{{"compare_ready_ms_max", kReadyTargetMs}, {"live_latency_p95_ms", kLiveP95TargetMs},
                              {"api_errors", 0}}},
      {"store", QJsonObject{{"runs", runs}, {"ranks", ranks}, {"steps_per_run", static_cast<qint64>(steps)},
                            {"points_per_run_min", static_cast<qint64>(min_points)},
                            {"points_total", static_cast<qint64>(total_points)}, {"db", QString::fromStdString(db.string())}}},
      {"compare", QJsonObject{{"runs", runs}, {"pixels", pixels}, {"points_drawn", drawn_points},
                              {"ready_ms_cold", ready_ms[0]}, {"ready_ms_median", pct(ready_ms, 50)},
                              {"ready_ms_max", ready_max}, {"ready_ms", to_array(ready_ms)},
                              {"api_fetch_ms", to_array(api_ms)}, {"load_ms_median", pct(load_ms, 50)},
                              {"zoom", QJsonObject{{"x_min", zoom_lo}, {"x_max", zoom_hi}, {"points", zoom_points},
                                                   {"ms_median", pct(zoom_ms, 50)},
                                                   {"load_ms_median", pct(zoom_load_ms, 50)}}},
                              {"loads", compare_loads}}},
      {"live", QJsonObject{{"samples", static_cast<int>(latency.size())}, {"interval_ms", "300-499"},
                           {"p50_ms", live_p50}, {"p95_ms", live_p95}, {"max_ms", pct(latency, 100)},
                           {"latency_ms", to_array(latency)}}},
      {"throughput", tp},
      {"pass", QJsonObject{{"compare_ready", ready_ok}, {"live_latency", live_ok}, {"api_errors", load_ok}}},
      {"all_pass", ready_ok && live_ok && load_ok}};
  QFile f(out);
  if (!f.open(QIODevice::WriteOnly) || f.write(QJsonDocument(result).toJson()) < 0) fail("writing", out);
  std::cout << "wrote " << out.toStdString() << "\n";
  return ready_ok && live_ok && load_ok ? 0 : 1;
}
