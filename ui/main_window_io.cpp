// What the main window reads and writes: run configs (File → Open/Save), other tools' configs
// (File → Import, and the request behind File → Export), Hugging Face model files, and the
// window's own settings between sessions. Apart from main_window.cpp, which builds and wires the
// window, so that neither passes ~600 lines.
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <algorithm>

#include "ui/cluster_model.h"
#include "ui/error_text.h"
#include "ui/main_window.h"
#include "ui/mode_bar.h"
#include "ui/plan_page.h"
#include "ui/plan_state.h"
#include "ui/runtime_panel.h"

namespace meshwork::ui {

bool MainWindow::load_config(const QString& path) {
  auto config = load_run_config(path.toStdString());
  if (!config) {
    QMessageBox::warning(this, tr("Cannot open configuration"), error_text(config.error()));
    statusBar()->showMessage(error_line(config.error()), 8000);
    return false;
  }
  if (!config->nodes.empty()) cluster_->show_nodes(config->nodes, config->source);
  plan_->set_config(*config);
  config_path_ = path;
  setWindowTitle(tr("Meshwork — %1").arg(QFileInfo(path).fileName()));
  statusBar()->showMessage(tr("Opened %1").arg(path), 4000);
  return true;
}

bool MainWindow::save_config(const QString& path) {
  RunConfig c = plan_->config();
  c.nodes = cluster_->to_node_configs();
  c.source = cluster_->source();
  if (Status s = save_run_config(c, path.toStdString()); !s) {
    QMessageBox::warning(this, tr("Cannot save configuration"), error_text(s.error()));
    statusBar()->showMessage(error_line(s.error()), 8000);
    return false;
  }
  config_path_ = path;
  setWindowTitle(tr("Meshwork — %1").arg(QFileInfo(path).fileName()));
  statusBar()->showMessage(tr("Saved %1").arg(path), 4000);
  return true;
}

bool MainWindow::import_ecosystem_config(const QString& path) {
  auto imported = interop::import_config(path.toStdString());
  if (!imported) {
    QMessageBox::warning(this, tr("Cannot import the config"), error_text(imported.error()));
    statusBar()->showMessage(error_line(imported.error()), 8000);
    return false;
  }
  RunConfig c = plan_->config();
  imported->apply_to(c);
  plan_->set_config(c);
  QStringList lines;
  for (const std::string& n : imported->notes) lines << QString::fromStdString(n);
  if (!imported->unknown_keys.empty()) {
    QStringList keys;
    for (const std::string& k : imported->unknown_keys) keys << QString::fromStdString(k);
    lines << tr("Not used by Meshwork: %1").arg(keys.join(", "));
  }
  const QString kind = QString::fromStdString(std::string(interop::to_string(imported->format)));
  statusBar()->showMessage(tr("Imported %1 config %2").arg(kind, path), 6000);
  if (!lines.isEmpty())
    QMessageBox::information(this, tr("Imported %1 config").arg(kind), lines.join("\n\n"));
  return true;
}

Result<interop::ExportRequest> MainWindow::ecosystem_export_request() const {
  if (!plan_->mesh()) {
    for (const Diagnostic& d : plan_->diagnostics())
      if (d.level == Severity::error) return d.to_error();
    return Error{"mesh", plan_->config().mesh.to_string(), "a valid shape on the cluster"};
  }
  interop::ExportRequest r;
  r.config = plan_->config();
  r.config.mesh = plan_->mesh()->shape();
  r.num_machines = plan_->cluster().num_nodes;
  r.processes_per_machine = plan_->cluster().ranks_per_node;
  const std::vector<NodeConfig> nodes = cluster_->to_node_configs();
  if (!nodes.empty() && nodes.front().host != "local" && !cluster_->is_described()) r.main_address = nodes.front().host;
  return r;
}

void MainWindow::open_model_config() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Open a Hugging Face config.json"), {}, tr("JSON (*.json)"));
  if (!path.isEmpty()) plan_->set_model(path.toStdString());
}

// A Hugging Face model directory (config.json, usually with safetensors weights): core reads its
// config.json for the memory panel and the planner; meshtrain starts from its weights.
void MainWindow::open_model_directory() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a Hugging Face model directory"));
  if (!dir.isEmpty()) plan_->set_model(dir.toStdString());
}

void MainWindow::restore_settings() {
  QSettings s;
  restoreGeometry(s.value("window/geometry").toByteArray());
  restoreState(s.value("window/state").toByteArray());
  plan_page_->outer_splitter()->restoreState(s.value("plan/outer").toByteArray());
  plan_page_->right_splitter()->restoreState(s.value("plan/right").toByteArray());
  dark_->setChecked(s.value("theme/dark", false).toBool());
  // The last configuration (mesh, model, training, cluster) comes back as it was left.
  const QByteArray last = s.value("plan/last_config").toByteArray();
  if (!last.isEmpty()) {
    auto doc = nlohmann::json::parse(last.toStdString(), nullptr, false);
    if (!doc.is_discarded())
      if (auto c = run_config_from_json(doc)) {
        if (!c->nodes.empty()) cluster_->show_nodes(c->nodes, c->source);
        plan_->set_config(*c);
      }
  }
  // The runtime choice (Cluster mode): the fields first, then the mode. Each emits changed(),
  // which hands the choice to the launcher (connected above).
  runtime_panel_->set_bundle_file(s.value("runtime/bundle").toString());
  runtime_panel_->set_node_torch_dir(s.value("runtime/node_torch").toString());
  runtime_panel_->set_mode(static_cast<RuntimePanel::Mode>(std::clamp(s.value("runtime/mode", 0).toInt(), 0, 2)));
  mode_bar_->set_mode(static_cast<Mode>(std::clamp(s.value("window/mode", 1).toInt(), 0, 3)));
}

void MainWindow::save_settings() {
  QSettings s;
  s.setValue("window/geometry", saveGeometry());
  s.setValue("window/state", saveState());
  s.setValue("window/mode", static_cast<int>(mode_bar_->mode()));
  s.setValue("plan/outer", plan_page_->outer_splitter()->saveState());
  s.setValue("plan/right", plan_page_->right_splitter()->saveState());
  s.setValue("theme/dark", dark_->isChecked());
  s.setValue("runtime/mode", static_cast<int>(runtime_panel_->mode()));
  s.setValue("runtime/bundle", runtime_panel_->bundle_file());
  s.setValue("runtime/node_torch", runtime_panel_->node_torch_dir());
  RunConfig c = plan_->config();
  c.nodes = cluster_->to_node_configs();
  s.setValue("plan/last_config", QByteArray::fromStdString(to_json(c).dump()));
}

}  // namespace meshwork::ui
