// Every run in the store as a table (Runs mode): name, date, shape, model, status, final loss,
// tokens/s, steps. Loaded on the store worker; rename, delete and CSV export go through it too.
#pragma once

#include <QAbstractTableModel>
#include <QTimer>
#include <functional>
#include <memory>
#include <vector>

#include "core/store/run_frame.h"
#include "core/store/run_store.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

// Steps a run completed (1-based: the store keeps the highest 0-based step); 0 before the first.
// Runs, the monitor and the web view all count this way ("step 100 / 100").
inline int64_t completed_steps(const store::RunSummary& s) { return s.steps > 0 || s.points > 0 ? s.steps + 1 : 0; }

class RunsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  // The id first: two runs of one name otherwise differ only by their date.
  enum Column { kId, kName, kDate, kShape, kModel, kStatus, kLoss, kTokens, kSteps, kColumns };
  static constexpr int kIdRole = Qt::UserRole + 1;    // the run id of a row
  static constexpr int kSortRole = Qt::UserRole + 2;  // numbers sort as numbers

  RunsModel(StoreWorker* worker, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation o, int role) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;
  bool setData(const QModelIndex& index, const QVariant& value, int role) override;  // rename

  void refresh();
  const std::vector<store::RunSummary>& runs() const { return runs_; }
  const store::RunSummary* find(store::RunId id) const;
  int row_of(store::RunId id) const;
  int64_t loads() const { return loads_; }  // completed refreshes (tests)

  // Store actions; `done` gets an error text (empty on success) on the GUI thread.
  using Done = std::function<void(QString error)>;
  void rename(store::RunId id, const QString& name, Done done = {});
  void remove(const std::vector<store::RunId>& ids, Done done = {});
  void export_csv(store::RunId id, const QString& path, Done done = {});
  // `runs import`: a recorded metrics file becomes a run (source = the file), then the list
  // refreshes; `done` gets the new run's id (0 on error) and the error. `path` may be a run
  // directory (every metrics, event and trainer_state file below it, as `runs import DIR`);
  // followed, files that appear in it later are read too.
  void import_file(const QString& path, const QString& name, bool follow,
                   std::function<void(qint64, QString)> done);
  // Keeps ingesting what is appended to `path` into run `id` (every 250 ms, complete lines or
  // records only, from the byte offset the store kept): watching a run started by hand with
  // `meshtrain --metrics PATH`, or another tool's event file or run directory.
  void follow_file(store::RunId id, const QString& path);
  void unfollow_files();
  bool following_files() const { return !followed_.empty(); }

 Q_SIGNALS:
  void loaded();

 private:
  void store_op(std::function<Status(store::RunStore*)> op, Done done, bool changes_runs);
  StoreWorker* worker_;
  std::vector<store::RunSummary> runs_;
  OneInFlight list_job_;
  int64_t loads_ = 0;
  QTimer poll_;  // while a run is live, its steps and loss move
  double last_load_ms_ = 0;
  QTimer tail_;
  bool tail_in_flight_ = false;
  std::vector<std::pair<store::RunId, std::string>> followed_;
};

// Run throughput from a summary: its tokens/s is rank 0's per data-parallel replica
// (docs/metrics.md), so the run's is that times the replicas (the shape's dp group size).
using store::run_tokens_per_s;

}  // namespace meshwork::ui
