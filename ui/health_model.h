// The data behind a run's Health view: the diagnosis (core/hang_diagnosis.h) from what the store
// holds, each rank's state for the mesh, and the rank x step heat map of step and wait times.
//
// A hang shows as time passing with nothing arriving, so the run's version (what the Monitor's
// frames key on) does not move: the model asks again on its own timer (every 2 s while the run
// is live), one job in flight at a time on the store worker. Finished runs are asked once.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hang_diagnosis.h"
#include "core/store/rank_states.h"
#include "core/store/run_store.h"
#include "ui/rank_health.h"

namespace meshwork::ui {

class StoreWorker;

struct HealthReport {
  store::RunId run = 0;
  std::optional<Error> error;
  std::string status;                 // the run's status word
  bool live = false;                  // running (diagnosed), else ended (nothing to diagnose)
  std::optional<double> follower_age_s;  // since a follower last wrote; unset: never
  Diagnosis diagnosis;
  MeshShape shape;
  int ranks_per_node = 1;
  QStringList node_names;             // per node, its host (empty where unknown)
  std::vector<RankHealth> states;     // per rank
  std::vector<QString> notes;         // per rank: "waiting in dp_shard all_gather #1234", ...
  store::StepHeat heat;
  double query_ms = 0;
};
using HealthPtr = std::shared_ptr<const HealthReport>;

// The report as the worker job makes it (store thread only).
HealthPtr load_health(store::RunStore* store, store::RunId run, double now, std::optional<double> hang_after_s);
// Each rank's state and words from a diagnosis over `world` ranks.
void rank_states_from(const Diagnosis& d, int world, std::vector<RankHealth>& states, std::vector<QString>& notes);

class HealthModel : public QObject {
  Q_OBJECT
 public:
  explicit HealthModel(StoreWorker* worker, QObject* parent = nullptr);

  void set_run(store::RunId run);  // 0: none
  store::RunId run() const { return run_; }
  void set_hang_after(std::optional<double> seconds);  // T; unset: the default rule
  void set_interval_ms(int ms);
  void refresh();                  // ask now (coalesced with one in flight)
  const HealthPtr& report() const { return report_; }
  int64_t reports_loaded() const { return loaded_; }

 Q_SIGNALS:
  void report_ready(std::shared_ptr<const meshwork::ui::HealthReport> report);

 private:
  StoreWorker* worker_;
  QTimer timer_;
  store::RunId run_ = 0;
  std::optional<double> hang_after_;
  bool in_flight_ = false;
  quint64 generation_ = 0;
  HealthPtr report_;
  int64_t loaded_ = 0;
};

}  // namespace meshwork::ui

Q_DECLARE_METATYPE(std::shared_ptr<const meshwork::ui::HealthReport>)
