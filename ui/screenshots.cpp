#include "ui/screenshots.h"

#include <QApplication>
#include <QDir>
#include <QSettings>
#include <QSplitter>
#include <QTemporaryDir>
#include <iostream>

#include "ui/cluster_model.h"
#include "ui/cluster_panel.h"
#include "ui/described_cluster_panel.h"
#include "ui/ecosystem_export_dialog.h"
#include "ui/main_window.h"
#include "ui/mesh_view.h"
#include "ui/node_card.h"
#include "ui/node_prober.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/screenshot_support.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int kSettleMs = 400;  // after the last change, before a grab

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

void set_demo_cluster(MainWindow& w, int nodes) {
  w.cluster()->clear();
  std::vector<NodeInfo> list;
  for (int i = 0; i < nodes; ++i)
    list.push_back(dgx(QStringLiteral("gpu%1").arg(i, 2, 10, QChar('0')),
                       QStringLiteral("dgx-h100-%1").arg(i, 2, 10, QChar('0')), i));
  w.cluster()->add_nodes(list);
}
// The demo runs: `model` on `mesh` over the DGX nodes, in bf16.
void demo_run(RunConfig& c, const char* model, const MeshShape& mesh, int64_t seq_len, int64_t global_batch,
              ActivationCheckpointing checkpointing) {
  c.model = model;
  c.mesh = mesh;
  c.training.seq_len = seq_len;
  c.training.global_batch = global_batch;
  c.training.precision = Precision::bf16;
  c.training.activation_checkpointing = checkpointing;
  c.training.device = DeviceKind::cuda;
}

// The node cards: the plan's demo cluster plus a PCIe box, a node that refused the connection, one
// awaiting its host key, and this machine probed for real (no SSH).
bool render_cluster(MainWindow& w, const QString& path) {
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
  NodeInfo local;
  local.host = "local";
  w.cluster()->add_node(local);
  w.cluster_panel()->probe("local");
  wait_for([&] { return w.cluster()->node(w.cluster()->find("local")).state != NodeInfo::State::probing; }, 15000);
  w.set_mode(Mode::cluster);
  Q_EMIT w.cluster_panel()->card("pcie-box")->clicked("pcie-box");
  return save_grab(&w, path, kSettleMs);
}
}  // namespace

int render_screenshots(const QString& dir, const QString& only) {
  QDir().mkpath(dir);
  // Never read or write the user's settings: a fresh, throw-away settings file.
  QTemporaryDir settings_dir;
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, settings_dir.path());
  // Nor the user's run store.
  QTemporaryDir store_dir;
  qputenv("MESHWORK_DB", QDir(store_dir.path()).filePath("runs.db").toLocal8Bit());
  if (only == QLatin1String("health")) return render_health_screenshots(dir);
  if (only == QLatin1String("experts")) return render_expert_load_screenshot(dir);
  if (only == QLatin1String("runs")) return render_run_screenshots(dir, QString::fromLocal8Bit(qgetenv("MESHWORK_SCREENSHOT_RUNS")));
  if (only == QLatin1String("elastic")) return render_elastic_screenshot(dir);
  auto* app = qobject_cast<QApplication*>(QCoreApplication::instance());
  bool ok = true;

  {  // Plan, light: 4 x 8 H100, Llama 3.1 70B, FSDP x TP inside each node; rank 13 selected.
    auto w = open_window(*app, Theme::light);
    set_demo_cluster(*w, 4);
    show_plan(*w, [](RunConfig& c) {
      demo_run(c, "llama-3.1-70b", MeshShape{1, 8, 1, 4}, 8192, 64, ActivationCheckpointing::full);
      c.name = "llama70b-4x8";
      c.training.micro_batch = 1;
    }, GroupKind::tp, 13, 1500);
    ok &= save_grab(w.get(), dir + "/plan.png", kSettleMs);
    ok &= render_cluster(*w, dir + "/cluster.png");
  }
  {  // Plan, dark: tp = 16 spans two nodes (marked), memory does not fit at 8k without checkpointing.
    auto w = open_window(*app, Theme::dark);
    set_demo_cluster(*w, 4);
    show_plan(*w, [](RunConfig& c) {
      demo_run(c, "llama-3.1-70b", MeshShape{1, 2, 1, 16}, 8192, 32, ActivationCheckpointing::none);
    }, GroupKind::tp, 20, 1500);
    ok &= save_grab(w.get(), dir + "/plan-dark.png", kSettleMs);
  }
  {  // An invalid shape: tp = 3 does not divide the heads; launching is disabled.
    auto w = open_window(*app, Theme::light);
    set_demo_cluster(*w, 3);
    show_plan(*w, [](RunConfig& c) {
      demo_run(c, "llama-3.1-8b", MeshShape{1, -1, 1, 3}, 4096, 24, ActivationCheckpointing::none);
    }, std::nullopt, -1, 1200);
    ok &= save_grab(w.get(), dir + "/plan-invalid.png", kSettleMs);
  }
  {  // A shape Accelerate refuses but meshtrain runs: tp inside each node, pure replication across
     // nodes. Marked under the editor's mesh and in the planner's rows, not hidden.
    auto w = open_window(*app, Theme::light);
    set_demo_cluster(*w, 4);
    show_plan(*w, [](RunConfig& c) {
      demo_run(c, "llama-3.1-8b", MeshShape{4, 1, 1, 8}, 8192, 64, ActivationCheckpointing::full);
    }, GroupKind::dp_replicate, 9, 1500);
    ok &= save_grab(w.get(), dir + "/plan-accelerate.png", kSettleMs);
  }
  {  // File -> Export for Accelerate: 2 nodes x 8 H100, Llama 3.1 8B as HSDP x TP (2 x 4 x 1 x 2):
     // the config as it will be written and each node's `accelerate launch` line.
    auto w = open_window(*app, Theme::light);
    set_demo_cluster(*w, 2);
    show_plan(*w, [](RunConfig& c) {
      demo_run(c, "llama-3.1-8b", MeshShape{2, 4, 1, 2}, 8192, 64, ActivationCheckpointing::full);
      c.training.micro_batch = 1;
    }, std::nullopt, -1, 1200);
    auto request = w->ecosystem_export_request();
    if (request.ok()) {
      EcosystemExportDialog dialog(*request, w.get());
      dialog.set_format(interop::ConfigFormat::accelerate);
      dialog.resize(760, 640);
      dialog.show();
      ok &= save_grab(&dialog, dir + "/export-accelerate.png", kSettleMs);
    } else {
      std::cerr << "meshwork: screenshots: export: " << request.error().message() << "\n";
      ok = false;
    }
  }
  {  // Scale: 64 nodes x 8 GPUs, dp_replicate groups coloured.
    auto w = open_window(*app, Theme::light);
    set_demo_cluster(*w, 64);
    show_plan(*w, [](RunConfig& c) {
      demo_run(c, "llama-3.1-405b", MeshShape{8, 8, 1, 8}, 8192, 512, ActivationCheckpointing::full);
    }, GroupKind::dp_replicate, 77, 2500);
    ok &= save_grab(w.get(), dir + "/mesh-64x8.png", kSettleMs);
  }
  {  // Scale: 1,024 nodes x 8 GPUs (8,192 ranks). At the workbench's size a rank would be a few
     // pixels: a tile per node, a stripe per rank; then zoomed in on rank 4100 to single ranks.
    auto w = open_window(*app, Theme::light);
    set_demo_cluster(*w, 1024);
    show_plan(*w, [](RunConfig& c) {
      demo_run(c, "llama-3.1-405b", MeshShape{8, -1, 1, 8}, 8192, 1024, ActivationCheckpointing::full);
    }, GroupKind::dp_shard, 4100, 2500);
    ok &= save_grab(w.get(), dir + "/mesh-1024x8.png", kSettleMs);
    MeshView* view = w->plan_page()->view();
    view->set_zoom(view->max_zoom() * 0.6, view->cell_rect(4100).center());
    view->pan_by(QPointF(view->width() / 2.0, view->height() / 2.0 - 30) - view->cell_rect(4100).center());
    ok &= save_grab(w.get(), dir + "/mesh-1024x8-zoom.png", kSettleMs);
  }
  {  // Pipeline stages: Llama 3.1 70B on 8 x 8 H100 at 8k tokens, the planner's first pipelined
     // shape (pp 4 x dp_replicate 2 x cp 8, 1F1B): a stage per two nodes, bars and arrows in
     // pipeline order, the planner ranking the pp = 4 shapes, the memory panel's worst stage.
    auto w = open_window(*app, Theme::light);
    set_demo_cluster(*w, 8);
    show_plan(*w, [](RunConfig& c) {
      demo_run(c, "llama-3.1-70b", MeshShape{2, 1, 8, 1, 4}, 8192, 256, ActivationCheckpointing::full);
      c.name = "llama70b-pp4";
      c.training.micro_batch = 1;
      c.training.pp_schedule = PipelineSchedule::one_f_one_b;
    }, GroupKind::cp, 21, 2500);
    ok &= save_grab(w.get(), dir + "/plan-pipeline.png", kSettleMs);
  }
  {  // A hypothetical cluster: 64 nodes x 8 H100 80 GB described by hardware (nothing reached),
     // the Cluster mode with its section, then the plan of Llama 3.1 70B on it, ranked.
    auto w = open_window(*app, Theme::light);
    auto* described = w->findChild<DescribedClusterPanel*>();
    if (described) {
      described->set_name(QStringLiteral("pod"));
      described->set_nodes(64);
      described->set_gpus_per_node(8);
      described->set_kind(QStringLiteral("h100-80gb"));
      described->plan_for_it();
      w->set_mode(Mode::cluster);
      w->resize(1500, 1200);  // the cards, the Slurm section and the described cluster's form
      ok &= save_grab(w.get(), dir + "/cluster-hypothetical.png", kSettleMs);
      show_plan(*w, [](RunConfig& c) {
        demo_run(c, "llama-3.1-70b", MeshShape{1, -1, 1, 8}, 4096, 512, ActivationCheckpointing::full);
        c.name = "llama70b-pod";
        c.training.micro_batch = 1;
      }, std::nullopt, -1, 2500);
      ok &= save_grab(w.get(), dir + "/plan-hypothetical.png", kSettleMs);
    } else {
      ok = false;
    }
  }
  ok &= render_run_screenshots(dir, QString::fromLocal8Bit(qgetenv("MESHWORK_SCREENSHOT_RUNS"))) == 0;
  ok &= render_calibration_screenshot(dir) == 0;
  ok &= render_health_screenshots(dir) == 0;
  ok &= render_expert_load_screenshot(dir) == 0;
  if (!ok) std::cerr << "meshwork: screenshots: some images could not be written to " << dir.toStdString() << "\n";
  return ok ? 0 : 1;
}

}  // namespace meshwork::ui
