// A run's Health view: where it hangs or slows, drawn on the mesh. The diagnosis' summary on top
// (ui/health_model.h), the mesh with every rank coloured by what it does (computing, waiting in
// `<axis> <op> #<seq>`, the culprit outlined), the culprits with host, pid, process state and
// phase, and one action that fetches a culprit's native stack and log tail from its node
// (remote/rank_inspect.h, on a thread of its own). Below, the rank x step heat map of step time
// and of the time spent waiting in collectives: a slow rank is a bright row.
#pragma once

#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QWidget>
#include <functional>
#include <memory>

#include "remote/ssh_session.h"
#include "ui/health_model.h"

namespace meshwork::ui {

class MeshView;

// The rank x step heat map: one row per rank (or block of ranks), one column per step; the
// brighter, the longer. Painted from one QImage, so 512 rows x 64 steps cost one blit.
class StepHeatMap : public QWidget {
  Q_OBJECT
 public:
  enum class Value { step, wait };
  explicit StepHeatMap(QWidget* parent = nullptr);
  void set_heat(const store::StepHeat& heat);
  void set_value(Value v);
  Value value() const { return value_; }
  const store::StepHeat& heat() const { return heat_; }
  // The row whose values stand out most (the slowest on average over the steps shown); -1: none.
  int brightest_row() const;
  QSize sizeHint() const override { return {520, 180}; }
  QSize minimumSizeHint() const override { return {200, 90}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;

 private:
  const std::vector<double>& values() const { return value_ == Value::step ? heat_.step_s : heat_.wait_s; }
  QRectF plot_rect() const;
  store::StepHeat heat_;
  Value value_ = Value::step;
};

class HealthPanel : public QWidget {
  Q_OBJECT
 public:
  explicit HealthPanel(QWidget* parent = nullptr);
  void show_report(const HealthPtr& report);
  void set_db(const QString& db) { db_ = db; }
  void set_ssh_options(std::function<remote::SshOptions()> ssh) { ssh_ = std::move(ssh); }

  // For tests and screenshots.
  MeshView* mesh_view() const { return mesh_; }
  QLabel* summary() const { return summary_; }
  QTableWidget* culprits() const { return culprits_; }
  QPushButton* fetch_button() const { return fetch_; }
  QPlainTextEdit* stack_text() const { return stack_; }
  StepHeatMap* heat_map() const { return heat_; }
  // Fetches the selected culprit's stack (the first when none is selected).
  void fetch_stack();

 Q_SIGNALS:
  void stack_fetched(int rank, bool ok);

 private:
  HealthPtr report_;
  QString db_;
  std::function<remote::SshOptions()> ssh_;
  QLabel* summary_;
  MeshView* mesh_;
  QTableWidget* culprits_;
  QPushButton* fetch_;
  QPlainTextEdit* stack_;
  StepHeatMap* heat_;
  QLabel* heat_caption_;
  int world_shown_ = -1;
  MeshShape shape_shown_;
};

}  // namespace meshwork::ui
