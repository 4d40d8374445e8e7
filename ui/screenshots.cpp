#include "ui/screenshots.h"

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QSettings>
#include <QSplitter>
#include <QTemporaryDir>
#include <QThread>
#include <iostream>

#include "ui/cluster_model.h"
#include "ui/cluster_panel.h"
#include "ui/main_window.h"
#include "ui/mesh_view.h"
#include "ui/node_card.h"
#include "ui/node_prober.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

NodeInfo dgx(const QString& host, const QString& name, int index) {
  NodeInfo n;
  n.host = host;
  n.hostname = name;
  n.state = NodeInfo::State::online;
  n.cpu_cores = 224;
  n.memory_bytes = 2015 * kGiB;
  for (int i = 0; i < 8; ++i) n.gpus.push_back({"NVIDIA H100 80GB HBM3", 79.65 * kGiB});
  n.links = "NVLink (NV18) between all GPUs";
  n.fast_links = true;
  for (int p = 0; p < 4; ++p) n.ib_ports << QStringLiteral("mlx5_%1/1 IB 400 Gb/s").arg(p + index * 0);
  n.slots = 8;
  return n;
}

// Lets queued results (estimates, planner, probes) arrive and the widgets repaint.
void settle(int ms = 400) {
  QElapsedTimer t;
  t.start();
  while (t.elapsed() < ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 50);
    QThread::msleep(10);
  }
}

bool save(QWidget* w, const QString& path) {
  settle();
  const bool ok = w->grab().save(path);
  std::cout << (ok ? "wrote " : "FAILED ") << path.toStdString() << "\n";
  return ok;
}

void set_demo_cluster(MainWindow& w, int nodes) {
  w.cluster()->clear();
  for (int i = 0; i < nodes; ++i)
    w.cluster()->add_node(dgx(QStringLiteral("gpu%1").arg(i, 2, 10, QChar('0')),
                              QStringLiteral("dgx-h100-%1").arg(i, 2, 10, QChar('0')), i));
}
}  // namespace

int render_screenshots(const QString& dir) {
  QDir().mkpath(dir);
  // Never read or write the user's settings: a fresh, throw-away settings file.
  QTemporaryDir settings_dir;
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, settings_dir.path());
  // Nor the user's run store.
  QTemporaryDir store_dir;
  qputenv("MESHWORK_DB", QDir(store_dir.path()).filePath("runs.db").toLocal8Bit());
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  bool ok = true;
  const QSize size(1500, 920);

  {  // Plan, light: 4 x 8 H100, Llama 3.1 70B, FSDP x TP inside each node; rank 13 selected.
    apply_theme(*app, Theme::light);
    MainWindow w(false);
    w.resize(size);
    w.show();
    set_demo_cluster(w, 4);
    RunConfig c = w.plan()->config();
    c.name = "llama70b-4x8";
    c.model = "llama-3.1-70b";
    c.mesh = MeshShape{1, 8, 1, 4};
    c.training.seq_len = 8192;
    c.training.micro_batch = 1;
    c.training.global_batch = 64;
    c.training.precision = Precision::bf16;
    c.training.activation_checkpointing = ActivationCheckpointing::full;
    c.training.device = DeviceKind::cuda;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    w.plan_page()->view()->set_group_kind(GroupKind::tp);
    w.plan_page()->view()->set_selected_rank(13);
    settle(1500);
    ok &= save(&w, dir + "/plan.png");

    // The same cluster's node cards.
    w.cluster()->add_node([] {
      NodeInfo n;
      n.host = "pcie-box";
      n.hostname = "a100-pcie-07";
      n.state = NodeInfo::State::online;
      n.cpu_cores = 64;
      n.memory_bytes = 512 * kGiB;
      for (int i = 0; i < 4; ++i) n.gpus.push_back({"NVIDIA A100-PCIE-40GB", 40 * kGiB});
      n.links = "PCIe only (weakest path SYS)";
      n.fast_links = false;
      n.ib_ports << "mlx5_0/1 RoCE 100 Gb/s";
      n.slots = 4;
      return n;
    }());
    NodeInfo bad;
    bad.host = "alice@gpu-old:2222";
    bad.state = NodeInfo::State::failed;
    bad.error = "alice@gpu-old:2222: connect: Connection refused: check the host, the port and that sshd runs there";
    w.cluster()->add_node(bad);
    NodeInfo key;
    key.host = "node17";
    key.state = NodeInfo::State::awaiting_key;
    key.fingerprint = "SHA256:4YyW1lBqZ1a7vF6oN3uQ0pTt1mH8s2cJbXr9kEoLw5A";
    key.error = "Unknown host key " + key.fingerprint;
    w.cluster()->add_node(key);
    // This machine, probed for real (no SSH), first in the list as in the app.
    NodeInfo local;
    local.host = "local";
    w.cluster()->add_node(local);
    w.cluster_panel()->probe("local");
    QElapsedTimer t;
    t.start();
    while (w.cluster()->node(w.cluster()->find("local")).state == NodeInfo::State::probing && t.elapsed() < 15000)
      settle(100);
    w.set_mode(Mode::cluster);
    Q_EMIT w.cluster_panel()->card("pcie-box")->clicked("pcie-box");
    ok &= save(&w, dir + "/cluster.png");
  }
  {  // Plan, dark: tp = 16 spans two nodes (marked), memory does not fit at 8k without checkpointing.
    apply_theme(*app, Theme::dark);
    MainWindow w(false);
    w.resize(size);
    w.show();
    set_demo_cluster(w, 4);
    RunConfig c = w.plan()->config();
    c.model = "llama-3.1-70b";
    c.mesh = MeshShape{1, 2, 1, 16};
    c.training.seq_len = 8192;
    c.training.global_batch = 32;
    c.training.precision = Precision::bf16;
    c.training.device = DeviceKind::cuda;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    w.plan_page()->view()->set_group_kind(GroupKind::tp);
    w.plan_page()->view()->set_selected_rank(20);
    settle(1500);
    ok &= save(&w, dir + "/plan-dark.png");
  }
  {  // An invalid shape: tp = 3 does not divide the heads; launching is disabled.
    apply_theme(*app, Theme::light);
    MainWindow w(false);
    w.resize(size);
    w.show();
    set_demo_cluster(w, 3);
    RunConfig c = w.plan()->config();
    c.model = "llama-3.1-8b";
    c.mesh = MeshShape{1, -1, 1, 3};
    c.training.seq_len = 4096;
    c.training.global_batch = 24;
    c.training.device = DeviceKind::cuda;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    settle(1200);
    ok &= save(&w, dir + "/plan-invalid.png");
  }
  {  // Scale: 64 nodes x 8 GPUs, dp_replicate groups coloured.
    apply_theme(*app, Theme::light);
    MainWindow w(false);
    w.resize(size);
    w.show();
    set_demo_cluster(w, 64);
    RunConfig c = w.plan()->config();
    c.model = "llama-3.1-405b";
    c.mesh = MeshShape{8, 8, 1, 8};
    c.training.seq_len = 8192;
    c.training.global_batch = 512;
    c.training.precision = Precision::bf16;
    c.training.activation_checkpointing = ActivationCheckpointing::full;
    c.training.device = DeviceKind::cuda;
    w.plan()->set_config(c);
    w.set_mode(Mode::plan);
    w.plan_page()->view()->set_group_kind(GroupKind::dp_replicate);
    w.plan_page()->view()->set_selected_rank(77);
    settle(2500);
    ok &= save(&w, dir + "/mesh-64x8.png");
  }
  ok &= render_run_screenshots(dir, QString::fromLocal8Bit(qgetenv("MESHWORK_SCREENSHOT_RUNS"))) == 0;
  if (!ok) std::cerr << "meshwork: screenshots: some images could not be written to " << dir.toStdString() << "\n";
  return ok ? 0 : 1;
}

}  // namespace meshwork::ui
