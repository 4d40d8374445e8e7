#include "ui/run_fit_model.h"

#include <optional>

#include "core/store/run_observations.h"
#include "ui/core_bridge.h"
#include "ui/error_text.h"

namespace meshwork::ui {

namespace {
struct Fitted {
  std::string node_set;
  std::string base;
  std::shared_ptr<const RunFit> fit;
  QStringList skipped;
  QString error;
  std::string refusal;
};
}  // namespace

RunFitModel::RunFitModel(StoreWorker* worker, QObject* parent) : QObject(parent), worker_(worker) {
  // A run that finished (or was deleted, renamed, imported): the cluster's runs may differ.
  connect(worker_, &StoreWorker::runs_changed, this, [this] {
    if (has_cluster_) refresh();
  });
}

RunFitModel::~RunFitModel() = default;

std::string RunFitModel::base_key(const Calibration* calibration) {
  if (!calibration) return {};
  return calibration->fingerprint.id() + "@" + calibration->measured_at;
}

void RunFitModel::set_cluster(DeviceKind device, const std::vector<NodeConfig>& nodes,
                              std::shared_ptr<const Calibration> calibration) {
  const std::string node_set = nodes.empty() ? std::string() : cluster_node_set(device, nodes).node_set_id();
  const std::string base = base_key(calibration.get());
  if (has_cluster_ && node_set == node_set_ && base == base_) return;
  has_cluster_ = true;
  node_set_ = node_set;
  base_ = base;
  calibration_ = std::move(calibration);
  refresh();
}

void RunFitModel::refresh() {
  if (!has_cluster_) return;
  if (!job_.start()) return;
  const std::string node_set = node_set_;
  const std::string base = base_;
  const std::shared_ptr<const Calibration> calibration = calibration_;
  worker_->post<Fitted>(
      this,
      [node_set, base, calibration](store::RunStore* s) -> Fitted {
        Fitted out;
        out.node_set = node_set;
        out.base = base;
        if (node_set.empty()) return out;  // no nodes: nothing to fit
        if (!s) {
          out.error = error_text(store_unavailable());
          return out;
        }
        // Judged on runs it did not learn from; too few runs for that: no fit, and the reason.
        auto fitted = store::fit_stored_runs(s, node_set, calibration ? std::optional<Calibration>(*calibration) : std::nullopt);
        if (!fitted) {
          out.error = error_text(fitted.error());
          return out;
        }
        for (const std::string& why : fitted->skipped) out.skipped << QString::fromStdString(why);
        out.fit = std::move(fitted->fit);
        out.refusal = std::move(fitted->refusal);  // "1 run: a fit of 2 unknowns needs …"
        return out;
      },
      [this](Fitted r) {
        const bool again = job_.finish();
        ++loads_;
        const std::string json = r.fit ? to_json(*r.fit).dump() : std::string();
        const bool different =
            r.node_set != fit_node_set_ || r.base != fit_base_ || json != fit_json_ || r.refusal != refusal_;
        fit_node_set_ = r.node_set;
        fit_base_ = r.base;
        fit_ = std::move(r.fit);
        fit_json_ = json;
        skipped_ = std::move(r.skipped);
        error_ = std::move(r.error);
        refusal_ = std::move(r.refusal);
        // Asked for other nodes or another base meanwhile: that fit is what the estimates want.
        const bool stale = r.node_set != node_set_ || r.base != base_;
        if (different) Q_EMIT changed();
        Q_EMIT loaded();
        if (again || stale) refresh();
      });
}

std::shared_ptr<const RunFit> RunFitModel::fit_for(DeviceKind device, const std::vector<NodeConfig>& nodes,
                                                   const std::shared_ptr<const Calibration>& calibration) const {
  if (!fit_ || nodes.empty()) return nullptr;
  if (fit_base_ != base_key(calibration.get())) return nullptr;
  if (fit_node_set_ != cluster_node_set(device, nodes).node_set_id()) return nullptr;
  return fit_;
}

}  // namespace meshwork::ui

namespace meshwork::ui {

std::string RunFitModel::refusal_for(DeviceKind device, const std::vector<NodeConfig>& nodes,
                                     const std::shared_ptr<const Calibration>& calibration) const {
  if (refusal_.empty() || nodes.empty()) return {};
  if (fit_base_ != base_key(calibration.get())) return {};
  if (fit_node_set_ != cluster_node_set(device, nodes).node_set_id()) return {};
  return refusal_;
}

}  // namespace meshwork::ui
