#include "ui/runtime_panel.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>
#include <tuple>

#include "remote/bundle.h"
#include "ui/format.h"
#include "ui/launch_controller.h"
#include "ui/panel_widgets.h"
#include "ui/theme.h"

namespace meshwork::ui {

RuntimePanel::RuntimePanel(QWidget* parent) : QWidget(parent) {
  setObjectName("RuntimePanel");
  // One line (the Cluster page is already tall with the node cards and Slurm): the choice, then
  // the field that choice needs; the manifest's summary or the error on the line below.
  auto* v = new_column_layout(this, {9, 0, 9, 4}, 2);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("<b>Runtime</b>"), this));
  mode_ = new QComboBox(this);
  mode_->setObjectName("RuntimeMode");
  mode_->addItem(tr("This machine's LibTorch (meshtrain as built here)"));
  mode_->addItem(tr("Runtime bundle (.tar.zst) for bare nodes"));
  mode_->addItem(tr("The node's own torch (same wheel, another path)"));
  row->addWidget(mode_);
  std::tie(bundle_, browse_) = add_field_and_button(row, this, "RuntimeBundle",
                                                    tr("meshtrain-cpu-….tar.zst (scripts/build --target bundle-cpu)"),
                                                    tr("Choose…"), "RuntimeBrowse");
  node_torch_ = new QLineEdit(this);
  node_torch_->setObjectName("RuntimeNodeTorch");
  node_torch_->setPlaceholderText(tr("the nodes' site-packages, e.g. /opt/venv/lib/python3.11/site-packages"));
  row->addWidget(node_torch_, 1);
  row->addStretch(0);
  v->addLayout(row);
  status_ = add_wrapped_label(v, this, "RuntimeStatus");
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  env_note_ = add_wrapped_label(v, this, "RuntimeEnvNote");
  const QString env = LaunchController::env_bundle_path();
  env_note_->setText(tr("MESHWORK_BUNDLE=%1 is set: launches use that bundle, whatever is chosen here.").arg(env));
  env_note_->setVisible(!env.isEmpty());

  connect(mode_, &QComboBox::currentIndexChanged, this, [this] {
    update_fields();
    validate();
    Q_EMIT changed();
  });
  connect(browse_, &QPushButton::clicked, this, &RuntimePanel::browse);
  connect(bundle_, &QLineEdit::editingFinished, this, [this] {
    validate();
    Q_EMIT changed();
  });
  connect(node_torch_, &QLineEdit::editingFinished, this, [this] {
    validate();
    Q_EMIT changed();
  });
  update_fields();
  validate();
}

RuntimePanel::Mode RuntimePanel::mode() const { return static_cast<Mode>(std::max(0, mode_->currentIndex())); }

void RuntimePanel::set_mode(Mode mode) { mode_->setCurrentIndex(static_cast<int>(mode)); }

QString RuntimePanel::bundle_file() const { return bundle_->text().trimmed(); }

void RuntimePanel::set_bundle_file(const QString& path) {
  bundle_->setText(path);
  validate();
  Q_EMIT changed();
}

QString RuntimePanel::node_torch_dir() const { return node_torch_->text().trimmed(); }

void RuntimePanel::set_node_torch_dir(const QString& dir) {
  node_torch_->setText(dir);
  validate();
  Q_EMIT changed();
}

QString RuntimePanel::launch_bundle() const { return mode() == Mode::bundle ? bundle_file() : QString(); }
QString RuntimePanel::launch_node_torch() const { return mode() == Mode::node_torch ? node_torch_dir() : QString(); }

QString RuntimePanel::status_text() const { return status_->text(); }

void RuntimePanel::browse() {
  const QString start = bundle_file().isEmpty() ? QString() : QFileInfo(bundle_file()).absolutePath();
  const QString path = QFileDialog::getOpenFileName(this, tr("Choose a runtime bundle"), start,
                                                    tr("Runtime bundles (*.tar.zst *.json);;All files (*)"));
  if (path.isEmpty()) return;
  if (mode() != Mode::bundle) mode_->setCurrentIndex(static_cast<int>(Mode::bundle));
  set_bundle_file(path);
}

void RuntimePanel::update_fields() {
  bundle_->setVisible(mode() == Mode::bundle);
  browse_->setVisible(mode() == Mode::bundle);
  node_torch_->setVisible(mode() == Mode::node_torch);
}

void RuntimePanel::show_status(const QString& text, bool error) {
  error_ = error ? text : QString();
  status_->setText(text);
  status_->setStyleSheet(error ? QStringLiteral("color: %1").arg(error_color().name()) : QString());
  // The default needs no line of its own (the Cluster page keeps its height for the node cards).
  status_->setVisible(mode() != Mode::local_torch || error);
  mode_->setToolTip(mode() == Mode::local_torch ? text : QString());
}

QString RuntimePanel::validate() {
  switch (mode()) {
    case Mode::local_torch:
      show_status(tr("The nodes need this machine's torch at the same path (or use a bundle)."), false);
      break;
    case Mode::bundle: {
      if (bundle_file().isEmpty()) {
        show_status(tr("Bundle: choose a meshtrain-….tar.zst built by scripts/build --target bundle-cpu"), true);
        break;
      }
      // The CLI's manifest reading (remote/bundle.h), so the workbench refuses what `launch` would.
      auto m = remote::load_bundle(bundle_file().toStdString());
      if (!m) {
        show_status(tr("Not a runtime bundle: %1").arg(QString::fromStdString(m.error().message())), true);
        break;
      }
      QString text = tr("%1 bundle, %2, torch %3").arg(QString::fromStdString(m->flavour),
                                                       format_bytes(static_cast<double>(m->archive_size)),
                                                       QString::fromStdString(m->torch_version));
      if (!m->cuda_requirement.empty()) text += tr(", needs CUDA %1").arg(QString::fromStdString(m->cuda_requirement));
      show_status(text, false);
      break;
    }
    case Mode::node_torch:
      if (!node_torch_dir().startsWith('/'))
        show_status(tr("Node's torch: give the absolute site-packages directory of torch on the nodes"), true);
      else
        show_status(tr("meshtrain will use the torch under %1 on every node.").arg(node_torch_dir()), false);
      break;
  }
  return error_;
}

}  // namespace meshwork::ui
