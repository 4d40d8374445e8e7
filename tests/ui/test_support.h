// Helpers for the workbench tests: throw-away settings, and a window on a cluster built in code.
#pragma once

#include <QDir>
#include <QFile>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "ui/cluster_model.h"
#include "ui/main_window.h"

namespace meshwork::ui::test {

// Settings go to a fresh directory so tests never see (or change) the user's layout.
// The tests/cluster fixture's node names (ctest sets it up: fixture cluster_up); empty without it.
inline QStringList cluster_nodes() {
  QFile f(QStringLiteral(MESHWORK_TEST_CLUSTER_DIR "/nodes"));
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
}

inline void isolate_settings(const QTemporaryDir& dir) {
  QStandardPaths::setTestModeEnabled(true);
  QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, dir.path());
  QSettings().clear();
}

// This machine as the only node, with `slots` ranks (CPU, no SSH): the launch tests' cluster.
inline void set_local_cluster(MainWindow& w, int slots) {
  w.cluster()->clear();
  NodeInfo n;
  n.host = "local";
  n.hostname = "local";
  n.state = NodeInfo::State::online;
  n.cpu_cores = 2;
  n.memory_bytes = 8.0 * (1 << 30);
  n.slots = slots;
  w.cluster()->add_node(n);
}

inline NodeInfo gpu_node(const QString& host, int gpus, double gib, bool nvlink = true) {
  NodeInfo n;
  n.host = host;
  n.hostname = host;
  n.state = NodeInfo::State::online;
  n.cpu_cores = 64;
  n.memory_bytes = 512.0 * (1 << 30);
  for (int i = 0; i < gpus; ++i) n.gpus.push_back({"NVIDIA H100 80GB HBM3", gib * (1 << 30)});
  n.links = nvlink ? "NVLink (NV18) between all GPUs" : "PCIe only (weakest path SYS)";
  n.fast_links = nvlink;
  n.slots = gpus;
  return n;
}

inline void set_gpu_cluster(MainWindow& w, int nodes, int gpus, double gib = 80) {
  w.cluster()->clear();
  std::vector<NodeInfo> list;
  for (int i = 0; i < nodes; ++i) list.push_back(gpu_node(QStringLiteral("gpu%1").arg(i), gpus, gib));
  w.cluster()->add_nodes(list);
}

}  // namespace meshwork::ui::test
