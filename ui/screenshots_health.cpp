// Screenshots of the Health view from a real run: four CPU ranks (dp_shard 2 x tp 2) launched on
// this machine from the Launch action. A rank made slow in its compute only (stopped for a moment
// whenever its flight record shows it in forward or backward outside any collective) makes the
// straggler heat map; the same rank stopped for good makes the hang drawn on the mesh.
#include <signal.h>

#include <QApplication>
#include <QFileInfo>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>

#include "core/flight_record.h"
#include "core/store/run_store.h"
#include "ui/health_panel.h"
#include "ui/launch_controller.h"
#include "ui/main_window.h"
#include "ui/metric_chart.h"
#include "ui/monitor_page.h"
#include "ui/runs_page.h"
#include "ui/screenshot_support.h"
#include "ui/screenshots.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

namespace {

// The rank's pid and run directory, from the store's rank rows and launch record.
bool find_rank(const QString& db, qint64 run, int rank, pid_t& pid, std::string& run_dir) {
  auto store = store::RunStore::open(db.toStdString());
  if (!store) return false;
  auto ranks = (*store)->ranks(run);
  auto info = (*store)->get_run(run);
  if (!ranks || !info) return false;
  for (const store::RankInfo& r : *ranks)
    if (r.rank == rank && r.pid > 0) pid = static_cast<pid_t>(r.pid);
  const auto& nodes = info->cluster.value("launch", nlohmann::json::object()).value("nodes", nlohmann::json::array());
  if (!nodes.empty()) run_dir = nodes[0].value("run_dir", "");
  return pid > 0 && !run_dir.empty();
}

// Slows `pid`'s compute, not its waits: while its record shows forward or backward outside a
// collective, it is stopped for 60 ms at a time.
class ComputeThrottle {
 public:
  ComputeThrottle(pid_t pid, std::string record) : pid_(pid), record_(std::move(record)) {
    thread_ = std::thread([this] {
      while (!done_) {
        auto s = read_flight_file(record_);
        if (s.ok() && !s->current &&
            (s->phase == FlightPhase::forward || s->phase == FlightPhase::backward)) {
          ::kill(pid_, SIGSTOP);
          std::this_thread::sleep_for(std::chrono::milliseconds(60));
          ::kill(pid_, SIGCONT);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
      }
    });
  }
  ~ComputeThrottle() {
    done_ = true;
    thread_.join();
    ::kill(pid_, SIGCONT);
  }

 private:
  pid_t pid_;
  std::string record_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

}  // namespace

int render_health_screenshots(const QString& dir) {
  if (!QFileInfo(LaunchController::trainer_path()).isExecutable()) {
    std::cout << "meshwork: screenshots: no meshtrain at " << LaunchController::trainer_path().toStdString()
              << ": hang-mesh.png and straggler-heatmap.png skipped\n";
    return 0;
  }
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  const auto window = open_window(*app, Theme::light);
  MainWindow& w = *window;
  plan_tiny_on_this_machine(
      w,
      [](RunConfig& c) {
        c.name = "tiny-hang";
        c.mesh = MeshShape{1, 2, 1, 2};
        c.training.steps = 5000;
        c.training.global_batch = 4;
        c.training.micro_batch = 1;
      },
      4);
  pump_events(800);
  qint64 run = 0;
  QString failure;
  QObject::connect(w.launcher(), &LaunchController::launched, &w, [&](qint64 id) { run = id; });
  QObject::connect(w.launcher(), &LaunchController::launch_failed, &w,
                   [&](const QString& m, const QStringList&) { failure = m; });
  w.launch_from_plan();
  wait_for([&] { return run != 0 || !failure.isEmpty(); }, 180000);
  if (run == 0) {
    std::cerr << "meshwork: screenshots: launch failed: " << failure.toStdString() << "\n";
    return 1;
  }
  MonitorPage* m = w.runs_page()->monitor();
  bool ok = wait_for([&] { return m->loss_chart()->point_count(0) >= 15; }, 300000);
  pid_t pid = 0;
  std::string run_dir;
  ok = ok && find_rank(w.store_worker()->db_path(), run, 3, pid, run_dir);
  if (ok) {
    const int before = m->loss_chart()->point_count(0);
    {
      ComputeThrottle slow(pid, run_dir + "/" + flight_file(3));
      wait_for([&] { return m->loss_chart()->point_count(0) >= before + 30; }, 300000);
    }
    m->health_model()->refresh();
    m->show_health();
    HealthPanel* panel = m->health_panel();
    wait_for([&] { return panel->heat_map()->heat().steps > 0; }, 20000);
    panel->heat_map()->set_value(StepHeatMap::Value::step);
    ok &= save_grab(panel, dir + "/straggler-heatmap.png", 1500);

    // Stopped for good: with T at 5 s the diagnosis names it within seconds.
    ::kill(pid, SIGSTOP);
    m->health_model()->set_hang_after(5.0);
    const bool hung = wait_for(
        [&] {
          const HealthPtr& r = m->health_model()->report();
          return r && r->diagnosis.state == HealthState::hang && !r->diagnosis.culprits.empty();
        },
        120000);
    if (!hung) std::cerr << "meshwork: screenshots: the stopped rank was never diagnosed\n";
    ok &= hung;
    if (hung) {
      ok &= save_grab(panel, dir + "/hang-mesh.png", 1500);
      ok &= save_grab(&w, dir + "/hang-banner.png", 500);
    }
    ::kill(pid, SIGCONT);
  }
  w.launcher()->stop(run);
  wait_for([&] { return !w.launcher()->following(run); }, 60000);
  return ok ? 0 : 1;
}

}  // namespace meshwork::ui
