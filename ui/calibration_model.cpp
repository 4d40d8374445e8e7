#include "ui/calibration_model.h"

#include <QCoreApplication>
#include <QDateTime>
#include <algorithm>
#include <cmath>
#include <iterator>

#include "ui/core_bridge.h"
#include "ui/error_text.h"

namespace meshwork::ui {

namespace {
QString q(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

struct Loaded {
  std::vector<store::StoredCalibration> calibrations;
  QString error;
};

// A column of a table: its header and, where the header needs one, its tooltip.
struct ColumnHeader {
  const char* name;
  const char* tip = nullptr;
};

template <size_t N>
QVariant header_data(const ColumnHeader (&columns)[N], int section, Qt::Orientation o, int role) {
  if (o != Qt::Horizontal || section < 0 || section >= static_cast<int>(N)) return {};
  const ColumnHeader& c = columns[section];
  if (role == Qt::DisplayRole) return QCoreApplication::translate("CalibrationModel", c.name);
  if (role == Qt::ToolTipRole && c.tip) return QCoreApplication::translate("CalibrationModel", c.tip);
  return {};
}

const ColumnHeader kMatmulColumns[] = {
    {"Precision"},
    {"Split", "The layer's matmuls split this many ways (tp × cp of a shape)"},
    {"GFLOP/s per rank", "Per rank, while every rank of the node multiplies"},
    {"Ranks per node"},
    {"Threads", "Intra-op threads each rank had"},
};
static_assert(std::size(kMatmulColumns) == CalibrationModel::MatmulTable::kColumns);

const ColumnHeader kCollectiveColumns[] = {
    {"Link"},
    {"Collective"},
    {"n"},
    {"Latency (µs)", "alpha of t = alpha + x / beta: per message (scaled by the ring's steps)"},
    {"Bandwidth (MB/s)", "beta: bytes one rank sends per second (bus bandwidth, 1 MB = 10⁶ bytes)"},
    {"Samples", "Message sizes the fit was made from"},
    {"Worst residual", "Largest |measured − fitted| / measured over the samples"},
};
static_assert(std::size(kCollectiveColumns) == CalibrationModel::CollectiveTable::kColumns);
}  // namespace

QString format_gflops(double flops_per_s) { return QString::number(flops_per_s / 1e9, 'f', 1); }
QString format_latency_us(double seconds) { return QString::number(seconds * 1e6, 'f', 1); }
QString format_mb_per_s(double bytes_per_s) { return QString::number(bytes_per_s / 1e6, 'f', 1); }
QString format_residual(double fraction) { return QString::number(100 * fraction, 'f', 0) + QStringLiteral(" %"); }

QString calibration_label(const store::StoredCalibration& c) {
  const Calibration& cal = c.calibration;
  const QDateTime t = QDateTime::fromString(q(cal.measured_at), Qt::ISODate);
  const QString date = t.isValid() ? t.toUTC().toString(QStringLiteral("yyyy-MM-dd HH:mm 'UTC'")) : q(cal.measured_at);
  const int nodes = static_cast<int>(cal.fingerprint.nodes.size());
  return QStringLiteral("%1 · %2 · %3 · %4")
      .arg(q(cal.fingerprint.id()).left(8), date,
           nodes == 1 ? QStringLiteral("1 node") : QStringLiteral("%1 nodes").arg(nodes), q(to_string(cal.fingerprint.device)));
}

// ---- tables ----

void CalibrationModel::MatmulTable::set_rows(std::vector<MatmulRate> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}
int CalibrationModel::MatmulTable::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int CalibrationModel::MatmulTable::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }
QVariant CalibrationModel::MatmulTable::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const MatmulRate& r = rows_[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole)
    return index.column() == kPrecision ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kPrecision: return q(to_string(r.precision));
    case kSplit: return QString::number(r.split);
    case kGflops: return format_gflops(r.flops_per_s);
    case kRanksPerNode: return QString::number(r.ranks_per_node);
    case kThreads: return QString::number(r.threads);
  }
  return {};
}
QVariant CalibrationModel::MatmulTable::headerData(int section, Qt::Orientation o, int role) const {
  return header_data(kMatmulColumns, section, o, role);
}

void CalibrationModel::CollectiveTable::set_rows(std::vector<CollectiveFit> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}
int CalibrationModel::CollectiveTable::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int CalibrationModel::CollectiveTable::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumns;
}
QVariant CalibrationModel::CollectiveTable::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const CollectiveFit& f = rows_[static_cast<size_t>(index.row())];
  if (role == Qt::TextAlignmentRole)
    return index.column() <= kOp ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kLink: return q(to_string(f.link));
    case kOp: return q(to_string(f.op));
    case kGroupSize: return QString::number(f.group_size);
    case kLatency: return format_latency_us(f.fit.latency_s);
    case kBandwidth: return format_mb_per_s(f.fit.bytes_per_s);
    case kSamples: return QString::number(f.samples);
    case kResidual: return format_residual(f.worst_residual);
  }
  return {};
}
QVariant CalibrationModel::CollectiveTable::headerData(int section, Qt::Orientation o, int role) const {
  return header_data(kCollectiveColumns, section, o, role);
}

// ---- the model ----

CalibrationModel::CalibrationModel(StoreWorker* worker, QObject* parent)
    : QObject(parent),
      worker_(worker),
      matmul_(new MatmulTable(this)),
      collective_(new CollectiveTable(this)),
      run_fits_(new RunFitModel(worker, this)) {
  // A run that ends (a calibration run among them) or a store change elsewhere in the workbench.
  connect(worker_, &StoreWorker::runs_changed, this, [this] { refresh(); });
}

CalibrationModel::~CalibrationModel() = default;

QAbstractTableModel* CalibrationModel::matmul_table() const { return matmul_; }
QAbstractTableModel* CalibrationModel::collective_table() const { return collective_; }

void CalibrationModel::refresh(std::optional<int64_t> select_id) {
  if (select_id) pending_select_ = select_id;
  if (!load_job_.start()) return;
  worker_->post<Loaded>(
      this,
      [](store::RunStore* s) -> Loaded {
        Loaded out;
        if (!s) {
          out.error = error_text(store_unavailable());
          return out;
        }
        auto list = store::list_calibrations(*s);
        if (!list) out.error = error_text(list.error());
        else out.calibrations = std::move(*list);
        return out;
      },
      [this](Loaded r) {
        const bool again = load_job_.finish();
        ++loads_;
        error_ = r.error;
        // Which calibration was shown, to show it again (a refresh keeps the selection).
        const std::optional<int64_t> shown = selected() ? std::optional<int64_t>(selected()->id) : std::nullopt;
        std::vector<int64_t> before, after;
        for (const auto& c : calibrations_) before.push_back(c.id);
        for (const auto& c : r.calibrations) after.push_back(c.id);
        const bool different = before != after;
        if (different) {
          calibrations_ = std::move(r.calibrations);
          shared_.clear();
          for (const auto& c : calibrations_) shared_.push_back(std::make_shared<const Calibration>(c.calibration));
        }
        int index = calibrations_.empty() ? -1 : 0;
        const std::optional<int64_t> want = pending_select_ ? pending_select_ : shown;
        bool found = false;
        if (want)
          for (size_t i = 0; i < calibrations_.size(); ++i)
            if (calibrations_[i].id == *want) {
              index = static_cast<int>(i);
              found = true;
            }
        if (pending_select_ && found) pending_select_.reset();
        if (different || index != selected_) {
          selected_ = -2;  // forces select() to rebuild the tables over the new list
          select(index);
        }
        if (different) Q_EMIT changed();
        Q_EMIT loaded();
        if (again) refresh();
      });
}

QString CalibrationModel::label(int index) const {
  if (index < 0 || index >= count()) return {};
  return calibration_label(calibrations_[static_cast<size_t>(index)]);
}

const store::StoredCalibration* CalibrationModel::selected() const {
  return selected_ >= 0 && selected_ < count() ? &calibrations_[static_cast<size_t>(selected_)] : nullptr;
}

void CalibrationModel::select(int index) {
  if (index < -1 || index >= count()) index = -1;
  if (index == selected_) return;
  selected_ = index;
  apply_selection();
  Q_EMIT selection_changed();
}

void CalibrationModel::apply_selection() {
  const store::StoredCalibration* s = selected();
  matmul_->set_rows(s ? s->calibration.matmul : std::vector<MatmulRate>{});
  collective_->set_rows(s ? s->calibration.collectives : std::vector<CollectiveFit>{});
  curves_.clear();
  if (s)
    for (const CollectiveFit& f : s->calibration.collectives) curves_.push_back(curve_of(f));
}

std::vector<double> CalibrationModel::curve_sizes() {
  std::vector<double> sizes;
  for (int e = 12; e <= 24; ++e) sizes.push_back(std::ldexp(1.0, e));  // 4 KiB .. 16 MiB
  return sizes;
}

BandwidthCurve CalibrationModel::curve_of(const CollectiveFit& fit) {
  BandwidthCurve c;
  c.link = fit.link;
  c.op = fit.op;
  c.group_size = fit.group_size;
  c.name = QStringLiteral("%1 %2 n=%3").arg(q(to_string(fit.link)), q(to_string(fit.op))).arg(fit.group_size);
  for (double x : curve_sizes()) {
    const double t = fit.fit.seconds(x);
    if (!(t > 0) || !std::isfinite(t)) continue;
    c.bytes.push_back(x);
    c.bytes_per_s.push_back(x / t);
  }
  return c;
}

const store::StoredCalibration* CalibrationModel::stored_for_cluster(DeviceKind device,
                                                                    const std::vector<NodeConfig>& nodes) const {
  return calibration_for_cluster(calibrations_, device, nodes);
}

std::shared_ptr<const Calibration> CalibrationModel::for_cluster(DeviceKind device,
                                                                 const std::vector<NodeConfig>& nodes) const {
  const store::StoredCalibration* s = stored_for_cluster(device, nodes);
  if (!s) return nullptr;
  return shared_[static_cast<size_t>(s - calibrations_.data())];
}

}  // namespace meshwork::ui
