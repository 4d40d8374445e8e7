// The run page's health row (under its title): the diagnosis' summary in a banner while the run
// is hung, mismatched or straggling, a "Show on the mesh…" button, and the Health window it opens
// (ui/health_panel.h, a top-level window of its own). The diagnosis comes from a HealthModel on
// its own timer: a hang is time passing with nothing arriving, which the Monitor's frames (keyed
// on what arrived) never see.
#pragma once

#include <QWidget>
#include <memory>

#include "core/store/run_store.h"
#include "ui/health_model.h"
#include "ui/health_panel.h"

class QLabel;
class QPushButton;

namespace meshwork::ui {

class StoreWorker;

class HealthBar : public QWidget {
  Q_OBJECT
 public:
  explicit HealthBar(StoreWorker* worker, QWidget* parent = nullptr);
  ~HealthBar() override;

  void set_run(store::RunId run);  // 0: none (the row hides)
  void show_health();              // opens the Health window and asks for a fresh report

  HealthModel* model() const { return model_; }
  QLabel* banner() const { return banner_; }
  HealthPanel* panel() const { return panel_.get(); }

 private:
  void show_report(const HealthPtr& report);
  void set_shown(bool bad);

  HealthModel* model_;
  QLabel* banner_;
  QPushButton* button_;
  std::unique_ptr<HealthPanel> panel_;
};

}  // namespace meshwork::ui
