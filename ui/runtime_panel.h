// The Cluster mode's "Runtime" section: what the nodes run meshtrain with.
//
//   - this machine's LibTorch (the default): the meshtrain this workbench was built with, deployed
//     with its run path as it is (the nodes need the same torch at the same path);
//   - a runtime bundle (docs/remote.md "Runtime bundle"): a meshtrain-<flavour>-<sha12>.tar.zst
//     built by `scripts/build --target bundle-cpu` (or bundle-cuda), deployed once per node or
//     shared filesystem; chosen with a file dialog and checked with remote::load_bundle (the CLI's
//     own manifest reading), whose words are shown under the field when it is not a bundle;
//   - the node's own torch: the absolute site-packages directory of the same torch wheel on the
//     nodes (`meshwork launch --node-torch`).
//
// A view: MainWindow hands the choice to the LaunchController (set_runtime) and keeps it in
// QSettings. $MESHWORK_BUNDLE, when set, still wins; the panel says so.
#pragma once

#include <QString>
#include <QWidget>

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace meshwork::ui {

class RuntimePanel : public QWidget {
  Q_OBJECT
 public:
  enum class Mode { local_torch = 0, bundle = 1, node_torch = 2 };

  explicit RuntimePanel(QWidget* parent = nullptr);

  Mode mode() const;
  void set_mode(Mode mode);
  QString bundle_file() const;          // the field, whatever the mode
  void set_bundle_file(const QString& path);
  QString node_torch_dir() const;       // the field, whatever the mode
  void set_node_torch_dir(const QString& dir);

  // What the launch uses: the bundle (mode bundle) and the node's torch (mode node_torch), else "".
  QString launch_bundle() const;
  QString launch_node_torch() const;

  // Checks the choice again (the bundle file may have changed since) and shows the result under
  // the fields. Empty when the choice can be launched; else the message shown.
  QString validate();
  QString error_text() const { return error_; }
  QString status_text() const;

  Q_SLOT void browse();  // the file dialog for a bundle

 Q_SIGNALS:
  void changed();  // the mode or a field changed (validated)

 private:
  void update_fields();
  void show_status(const QString& text, bool error);

  QComboBox* mode_;
  QLineEdit* bundle_;
  QPushButton* browse_;
  QLineEdit* node_torch_;
  QLabel* status_;
  QLabel* env_note_;
  QString error_;
};

}  // namespace meshwork::ui
