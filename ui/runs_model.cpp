#include "ui/runs_model.h"

#include "core/interop/foreign_import.h"

#include <QBrush>
#include <QDateTime>
#include <QElapsedTimer>
#include <QFileInfo>
#include <algorithm>
#include <fstream>

#include "ui/error_text.h"
#include "ui/format.h"
#include "ui/monitor_model.h"
#include "ui/store_worker.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
bool live(const store::RunSummary& s) { return s.status == store::kStatusRunning || s.status == store::kStatusCreated; }
}  // namespace

// A run directory (a TensorBoard log folder, a Trainer output_dir, meshtrain's metrics folder),
// as `meshwork runs import DIR` reads it: the same origin and source names, so either one
// resumes the other's import; a directory imported before is read on, not stored twice.
static std::pair<qint64, QString> import_directory(store::RunStore& s, const std::string& dir, const std::string& name,
                                            bool follow) {
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::weakly_canonical(std::filesystem::absolute(dir), ec);
  const auto files = interop::run_files_below(abs);
  if (files.empty())
    return {0, error_text(Error{"directory", abs.string(),
                                "a run directory with metrics .jsonl files, TensorBoard event files "
                                "(events.out.tfevents.*) or a trainer_state.json"})};
  auto existing = s.find_run_by_origin(abs.string());
  if (!existing) return {0, error_text(existing.error())};
  store::RunId id = 0;
  if (*existing) {
    id = **existing;
  } else {
    nlohmann::json config = nlohmann::json::object();
    for (const auto& [path, source] : files)
      if (auto f = interop::foreign_format(path); f != interop::ForeignFormat::none)
        config["source_format"] = interop::to_string(f);
    auto created = s.create_run(name, config, nlohmann::json::object(), abs.string());
    if (!created) return {0, error_text(created.error())};
    id = *created;
  }
  std::vector<std::string> warnings;
  auto r = interop::import_run_directory(s, id, abs, warnings);
  if (!r) {
    if (!*existing) (void)s.delete_run(id);
    return {0, error_text(r.error())};
  }
  for (const std::string& w : warnings) (void)s.add_event(id, "warning", w);
  // Another tool's run has no end record: unless followed, once read it is finished.
  auto info = s.get_run(id);
  if (info && !follow && info->config.contains("source_format") && info->summary.status == store::kStatusCreated)
    (void)s.set_status(id, store::kStatusOk);
  return {id, {}};
}

RunsModel::RunsModel(StoreWorker* worker, QObject* parent) : QAbstractTableModel(parent), worker_(worker) {
  poll_.setSingleShot(true);  // restarted after each load (see refresh())
  connect(&poll_, &QTimer::timeout, this, &RunsModel::refresh);
  connect(worker_, &StoreWorker::runs_changed, this, &RunsModel::refresh);
  tail_.setInterval(250);
  connect(&tail_, &QTimer::timeout, this, [this] {
    if (tail_in_flight_ || followed_.empty()) return;
    tail_in_flight_ = true;
    worker_->post<int64_t>(
        this,
        [files = followed_](store::RunStore* s) -> int64_t {
          if (!s) return 0;
          int64_t points = 0;
          for (const auto& [id, path] : files) {
            std::error_code ec;
            if (std::filesystem::is_directory(path, ec)) {
              // A run directory still being written: every file in it read on, new ones (a
              // restarted tracker's event file, a new trainer_state.json) from their start.
              std::vector<std::string> warnings;
              if (auto r = interop::import_run_directory(*s, id, path, warnings)) points += r->points;
              continue;
            }
            if (interop::foreign_format(path) != interop::ForeignFormat::none) {
              // Another tool's run still writing: its event file read on from the stored offset.
              std::string warning;
              if (auto r = interop::import_foreign_file(*s, id, path, path, warning)) points += r->points;
              continue;
            }
            auto offset = s->source_offset(id, path);
            if (!offset) continue;
            std::ifstream in(path, std::ios::binary);
            if (!in) continue;
            in.seekg(static_cast<std::streamoff>(*offset));
            std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            if (bytes.empty()) continue;
            // ingest_chunk keeps a trailing partial line for the next call: the writer may be
            // in the middle of it.
            if (auto r = s->ingest_chunk(id, path, *offset, bytes)) points += r->points;
          }
          return points;
        },
        [this](int64_t points) {
          tail_in_flight_ = false;
          if (points > 0) refresh();
        });
  });
}

void RunsModel::follow_file(store::RunId id, const QString& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path.toStdString());
  // A directory's source names are relative to its canonical path, as import_directory read it.
  if (std::filesystem::is_directory(p, ec)) p = std::filesystem::weakly_canonical(p, ec);
  // The same directory dropped again while followed: one follower, not two reading it.
  const std::pair<store::RunId, std::string> entry{id, p.string()};
  if (std::find(followed_.begin(), followed_.end(), entry) == followed_.end()) followed_.push_back(entry);
  tail_.start();
}

void RunsModel::unfollow_files() {
  followed_.clear();
  tail_.stop();
}

int RunsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : static_cast<int>(runs_.size()); }
int RunsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant RunsModel::headerData(int section, Qt::Orientation o, int role) const {
  if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* names[] = {"Id", "Name", "Date", "Shape (rep×shard×cp×tp)", "Model", "Status", "Final loss", "Tokens/s", "Steps"};
  return tr(names[section]);
}

Qt::ItemFlags RunsModel::flags(const QModelIndex& index) const {
  Qt::ItemFlags f = QAbstractTableModel::flags(index);
  if (index.column() == kName) f |= Qt::ItemIsEditable;
  return f;
}

QVariant RunsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= static_cast<int>(runs_.size())) return {};
  const store::RunSummary& s = runs_[static_cast<size_t>(index.row())];
  if (role == kIdRole) return QVariant::fromValue<qint64>(s.id);
  const auto tps = run_tokens_per_s(s);
  if (role == kSortRole) {
    switch (index.column()) {
      case kId: return static_cast<qlonglong>(s.id);
      case kDate: return s.created;
      case kLoss: return s.final_loss ? *s.final_loss : 1e300;
      case kTokens: return tps ? *tps : -1.0;
      case kSteps: return static_cast<qlonglong>(s.steps);
      default: return data(index, Qt::DisplayRole).toString().toLower();
    }
  }
  if (role == Qt::DisplayRole || role == Qt::EditRole || role == Qt::ToolTipRole) {
    switch (index.column()) {
      case kId: return QString::number(s.id);
      case kName: return role == Qt::ToolTipRole && !s.origin.empty() ? q(s.name + "\nimported from " + s.origin) : q(s.name);
      case kDate: return QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(s.created * 1000)).toString("yyyy-MM-dd HH:mm");
      case kShape: return format_shape(s.shape);
      case kModel: return q(s.model);
      case kStatus:
        return role == Qt::ToolTipRole && !s.exit_reason.empty() ? q(s.status + ": " + s.exit_reason) : q(s.status);
      case kLoss: return s.final_loss ? QString::number(*s.final_loss, 'f', 4) : QString();
      case kTokens: return tps ? format_tokens_per_s(*tps) : QString();
      case kSteps: return completed_steps(s) > 0 ? QString::number(completed_steps(s)) : QString();
    }
  }
  if (role == Qt::ForegroundRole && index.column() == kStatus) {
    if (s.status == store::kStatusFailed) return QBrush(error_color());
    if (s.status == store::kStatusStopped) return QBrush(warning_color());
    if (s.status == store::kStatusOk) return QBrush(ok_color());
  }
  if (role == Qt::TextAlignmentRole && (index.column() == kId || index.column() == kLoss || index.column() == kTokens || index.column() == kSteps))
    return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

bool RunsModel::setData(const QModelIndex& index, const QVariant& value, int role) {
  if (role != Qt::EditRole || index.column() != kName) return false;
  const QString name = value.toString().trimmed();
  if (name.isEmpty()) return false;
  auto& s = runs_[static_cast<size_t>(index.row())];
  s.name = name.toStdString();
  Q_EMIT dataChanged(index, index);
  rename(s.id, name);
  return true;
}

const store::RunSummary* RunsModel::find(store::RunId id) const {
  for (const auto& s : runs_)
    if (s.id == id) return &s;
  return nullptr;
}

int RunsModel::row_of(store::RunId id) const {
  for (size_t i = 0; i < runs_.size(); ++i)
    if (runs_[i].id == id) return static_cast<int>(i);
  return -1;
}

void RunsModel::refresh() {
  if (!list_job_.start()) return;
  struct R {
    std::vector<store::RunSummary> runs;
    QString error;
    double ms = 0;  // worker time the list took
  };
  worker_->post<std::shared_ptr<R>>(
      this,
      [](store::RunStore* s) {
        auto out = std::make_shared<R>();
        QElapsedTimer t;
        t.start();
        if (!s) {
          out->error = error_text(store_unavailable());
          return out;
        }
        auto r = s->list_runs();
        if (!r) out->error = error_text(r.error());
        else out->runs = std::move(*r);
        out->ms = static_cast<double>(t.nsecsElapsed()) / 1e6;
        return out;
      },
      [this](std::shared_ptr<R> rp) {
        const bool again = list_job_.finish();
        R& r = *rp;
        last_load_ms_ = r.ms;
        if (r.error.isEmpty()) {
          // Same runs in the same order: update the cells in place (keeps selection and editors).
          bool same = r.runs.size() == runs_.size();
          for (size_t i = 0; same && i < runs_.size(); ++i) same = runs_[i].id == r.runs[i].id;
          if (same) {
            runs_ = std::move(r.runs);
            if (!runs_.empty()) Q_EMIT dataChanged(index(0, 0), index(rowCount() - 1, kColumns - 1));
          } else {
            beginResetModel();
            runs_ = std::move(r.runs);
            endResetModel();
          }
        }
        ++loads_;
        bool any_live = false;
        for (const auto& s : runs_) any_live |= live(s);
        // While a run is live its row moves: poll, but let the list take at most a fifth of the
        // store worker (a list of long runs takes a while; the charts' queries come first).
        if (any_live && !poll_.isActive()) poll_.start(std::max(2000, static_cast<int>(4 * last_load_ms_)));
        if (!any_live) poll_.stop();
        Q_EMIT loaded();
        if (again) refresh();
      });
}

// A change to the store on its worker: `done` gets the error's text, or an empty string.
void RunsModel::store_op(std::function<Status(store::RunStore*)> op, Done done, bool changes_runs) {
  worker_->post<QString>(
      this,
      [op = std::move(op)](store::RunStore* s) -> QString {
        if (!s) return error_text(store_unavailable());
        const Status st = op(s);
        return st ? QString() : error_text(st.error());
      },
      [this, done, changes_runs](QString e) {
        if (done) done(e);
        if (changes_runs) worker_->notify_runs_changed();
      });
}

void RunsModel::rename(store::RunId id, const QString& name, Done done) {
  store_op([id, n = name.toStdString()](store::RunStore* s) { return s->rename_run(id, n); }, done, true);
}

void RunsModel::remove(const std::vector<store::RunId>& ids, Done done) {
  store_op(
      [ids](store::RunStore* s) {
        for (store::RunId id : ids)
          if (Status st = s->delete_run(id); !st) return st;
        return Status::Ok();
      },
      done, true);
}

void RunsModel::export_csv(store::RunId id, const QString& path, Done done) {
  store_op([id, p = path.toStdString()](store::RunStore* s) { return s->export_csv(id, p); }, done, false);
}

void RunsModel::import_file(const QString& path, const QString& name, bool follow,
                            std::function<void(qint64, QString)> done) {
  using R = std::pair<qint64, QString>;
  worker_->post<R>(
      this,
      [p = path.toStdString(), n = name.toStdString(), follow](store::RunStore* s) -> R {
        if (!s) return {0, error_text(store_unavailable())};
        std::error_code ec;
        if (std::filesystem::is_directory(p, ec)) return import_directory(*s, p, n, follow);
        const std::string origin = std::filesystem::absolute(p).string();
        const interop::ForeignFormat foreign = interop::foreign_format(p);
        nlohmann::json config = nlohmann::json::object();
        if (foreign != interop::ForeignFormat::none) config["source_format"] = interop::to_string(foreign);
        auto id = s->create_run(n, config, nlohmann::json::object(), origin);
        if (!id) return {0, error_text(id.error())};
        Result<store::IngestCounts> r = store::IngestCounts{};
        if (foreign != interop::ForeignFormat::none) {
          // Another tool's run (TensorBoard events, trainer_state.json): read whole; a cut or
          // corrupt record keeps what came before it, as `meshwork runs import` does.
          std::string warning;
          r = interop::import_foreign_file(*s, *id, p, origin, warning);
          if (r && !follow) (void)s->set_status(*id, store::kStatusOk);
          if (r && !warning.empty()) (void)s->add_event(*id, "warning", warning);
        } else if (follow) {  // complete lines only: the rest arrives with the next tail
          std::ifstream in(p, std::ios::binary);
          if (!in) r = Error{"metrics file", p, "cannot be read"}.as(ErrorKind::io);
          std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
          if (r) r = s->ingest_chunk(*id, origin, 0, bytes);
        } else {
          r = s->ingest_file(*id, p, origin);
        }
        if (!r) {
          (void)s->delete_run(*id);
          return {0, error_text(r.error())};
        }
        return {*id, {}};
      },
      [this, done, follow, path](R r) {
        if (follow && r.first != 0) follow_file(r.first, path);
        worker_->notify_runs_changed();
        if (done) done(r.first, r.second);
      });
}

}  // namespace meshwork::ui
