#include "ui/routing_model.h"

#include <algorithm>

#include "ui/error_text.h"

namespace meshwork::ui {

namespace {
struct Read {
  nlohmann::json model;
  store::RunId choice = RoutingModel::kNewest;
  bool moe = false;
  std::vector<store::RoutingRun> runs;
  std::shared_ptr<const MeasuredRouting> routing;
  store::RunId routing_run = 0;
  QString error;
};
}  // namespace

RoutingModel::RoutingModel(StoreWorker* worker, QObject* parent) : QObject(parent), worker_(worker) {
  // A run that finished (or was imported, renamed, deleted): the model's runs may differ.
  connect(worker_, &StoreWorker::runs_changed, this, [this] {
    if (moe_) refresh();
  });
}

void RoutingModel::set_model(const nlohmann::json& run_model) {
  if (run_model == model_) return;
  model_ = run_model;
  refresh();
}

void RoutingModel::set_choice(store::RunId choice) {
  if (choice == choice_) return;
  choice_ = choice;
  refresh();
}

void RoutingModel::refresh() {
  if (!job_.start()) return;
  const nlohmann::json run_model = model_;
  const store::RunId choice = choice_;
  worker_->post<Read>(
      this,
      [run_model, choice](store::RunStore* s) -> Read {
        Read out;
        out.model = run_model;
        out.choice = choice;
        if (run_model.is_null()) return out;
        Result<ModelSpec> model = model_spec_from_run_model(run_model);
        if (!model || !model->is_moe()) return out;  // dense, or not a model (the editor says why)
        out.moe = true;
        if (!s) {
          out.error = error_text(store_unavailable());
          return out;
        }
        auto runs = store::routing_runs(*s, *model, kOfferedRuns);
        if (!runs) {
          out.error = error_text(runs.error());
          return out;
        }
        out.runs = std::move(*runs);
        if (choice == kBalanced) return out;
        store::RunId run = choice;
        if (run == kNewest) {
          if (out.runs.empty()) return out;  // no run of the model: balanced
          run = out.runs.front().id;
        } else if (std::none_of(out.runs.begin(), out.runs.end(), [&](const store::RoutingRun& r) { return r.id == run; })) {
          // A run chosen earlier that is gone (deleted) or is not of this model: said, balanced.
          out.error = QObject::tr("run %1 has no routing of %2 stored: taken as balanced")
                          .arg(run)
                          .arg(QString::fromStdString(model->name));
          return out;
        }
        auto routing = store::measured_routing(*s, run);
        if (!routing) {
          out.error = error_text(routing.error());
          return out;
        }
        if (Status matches = routing->check_matches(*model); !matches) {
          out.error = error_text(matches.error());
          return out;
        }
        out.routing = std::make_shared<const MeasuredRouting>(std::move(*routing));
        out.routing_run = run;
        return out;
      },
      [this](Read r) {
        const bool again = job_.finish();
        ++loads_;
        // Asked for another model or choice meanwhile: read again, keep nothing of this one.
        const bool stale = r.model != model_ || r.choice != choice_;
        if (!stale) {
          auto same_runs = [&] {
            if (r.runs.size() != runs_.size()) return false;
            for (size_t i = 0; i < runs_.size(); ++i)
              if (r.runs[i].id != runs_[i].id || r.runs[i].name != runs_[i].name) return false;
            return true;
          };
          const bool different = r.model != loaded_model_ || r.moe != moe_ || !same_runs() || r.routing_run != routing_run_ ||
                                 (r.routing == nullptr) != (routing_ == nullptr) || r.error != error_ ||
                                 (r.routing && routing_ && r.routing->steps() != routing_->steps());
          loaded_model_ = r.model;
          moe_ = r.moe;
          runs_ = std::move(r.runs);
          routing_ = std::move(r.routing);
          routing_run_ = r.routing_run;
          error_ = std::move(r.error);
          if (different) Q_EMIT changed();
        }
        Q_EMIT loaded();
        if (again || stale) refresh();
      });
}

}  // namespace meshwork::ui
