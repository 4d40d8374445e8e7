#include "ui/monitor_model.h"

#include <QElapsedTimer>
#include <functional>

#include "core/metrics.h"
#include "ui/error_text.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

namespace {
// Beyond this many ranks the per-rank memory lines become a mean and a max (a legend of 64 lines
// helps nobody, and each line is one query).
constexpr int kMaxRankLines = 16;

int64_t version_of(const store::RunSummary& s) {
  return s.points * 1000003 + s.steps * 31 + static_cast<int64_t>(std::hash<std::string>{}(s.status) % 1000) +
         static_cast<int64_t>(s.exit_reason.size());
}
}  // namespace

std::string breakdown_key(int k) { return k < kAxisCount ? comm_key(kAxes[static_cast<size_t>(k)]) : "compute_s"; }

std::optional<double> capacity_of(const nlohmann::json& cluster, const nlohmann::json& config, int world) {
  if (!cluster.is_object() || !cluster.contains("probes") || !cluster["probes"].is_array()) return std::nullopt;
  const bool cuda = config.is_object() && config.contains("training") &&
                    config["training"].value("device", std::string("cpu")) == "cuda";
  const auto& probes = cluster["probes"];
  if (probes.empty()) return std::nullopt;
  const int per_node = std::max(1, world / static_cast<int>(probes.size()));
  std::optional<double> cap;
  for (const auto& p : probes) {
    double c = 0;
    if (cuda && p.contains("gpus") && p["gpus"].is_array() && !p["gpus"].empty()) {
      c = 1e300;
      for (const auto& g : p["gpus"]) c = std::min(c, g.value("memory_total_mib", 0.0) * 1024.0 * 1024.0);
    } else {
      c = p.value("mem_total_bytes", 0.0) / per_node;
    }
    if (c > 0) cap = cap ? std::min(*cap, c) : c;
  }
  return cap;
}

void load_stragglers(store::RunStore* store, store::RunId run, MonitorFrame& f) {
  // The latest steps' step times: show the newest step every rank has reported (while the ranks
  // are mid-step the newest one is partial), else the newest. A few rows of the aggregates.
  constexpr int64_t kLookBack = 16;
  const int64_t last = f.summary.steps;
  auto recent = store->step_extremes(run, "step_s", last - kLookBack, last);
  if (!recent || recent->empty()) return;
  const store::StepExtremes* pick = &recent->back();
  for (auto it = recent->rbegin(); it != recent->rend(); ++it)
    if (it->ranks >= f.world) {
      pick = &*it;
      break;
    }
  f.straggler_step = pick->step;
  f.stragglers.push_back({std::nullopt, *pick});
  for (Axis a : kAxes) {
    if (f.shape.size(a) <= 1) continue;  // an axis of size 1 never communicates
    auto at = store->step_extremes(run, comm_key(a), pick->step, pick->step);
    if (at && !at->empty()) f.stragglers.push_back({a, at->front()});
  }
}

std::shared_ptr<MonitorFrame> load_monitor_frame(store::RunStore* store, store::RunId run, int rank,
                                                 std::optional<std::pair<double, double>> range, int pixels,
                                                 int64_t last_version) {
  auto f = std::make_shared<MonitorFrame>();
  f->run = run;
  f->rank = rank;
  f->pixels = pixels;
  if (!store) {
    f->error = error_text(store_unavailable());
    return f;
  }
  QElapsedTimer timer;
  timer.start();
  auto info = store->get_run(run);
  if (!info) {
    f->error = error_text(info.error());
    return f;
  }
  f->version = version_of(info->summary);
  if (last_version != 0 && f->version == last_version) return nullptr;
  f->summary = info->summary;
  f->config = info->config;
  f->shape = info->summary.shape.value_or(MeshShape{});
  f->world = std::max(1, info->summary.world);
  f->capacity_bytes = capacity_of(info->cluster, info->config, f->world);
  if (info->cluster.is_object() && info->cluster.contains("slurm") && info->cluster["slurm"].is_object())
    f->slurm_script = QString::fromStdString(info->cluster["slurm"].value("script", std::string()));

  store::SeriesQuery q;
  q.runs = {run};
  q.x = store::XAxis::step;
  if (range) {
    q.x_min = range->first;
    q.x_max = range->second;
  }
  q.pixels = std::max(16, pixels);
  auto one = [&](const std::string& key, int r, store::Aggregate agg) -> MonitorFrame::Points {
    q.key = key;
    q.rank = r;
    q.aggregate = agg;
    auto s = store->query_series(q);
    if (!s || s->empty()) return {};
    return std::move((*s)[0].points);
  };
  // Loss, lr and grad norm are the same on every rank (docs/metrics.md): read one rank.
  const int shown = rank >= 0 ? rank : 0;
  {
    q.key = "loss";
    q.rank = shown;
    q.aggregate = store::Aggregate::none;
    if (auto s = store->query_series(q); s && !s->empty()) {
      f->loss = std::move((*s)[0].points);
      f->source_points = (*s)[0].source_points;
    }
  }
  f->eval_loss = one(kEvalLossKey, shown, store::Aggregate::none);
  f->lr = one("lr", shown, store::Aggregate::none);
  f->grad_norm = one("grad_norm", shown, store::Aggregate::none);
  // Per-rank quantities: the chosen rank, or the mean over ranks.
  const store::Aggregate agg = rank >= 0 ? store::Aggregate::none : store::Aggregate::mean;
  f->tokens_per_s = one("tokens_per_s", shown, agg);
  // tokens_per_s is per data-parallel replica; the run's throughput is that times the replicas.
  const double replicas = f->shape.group_size(GroupKind::dp);
  for (auto& p : f->tokens_per_s) p.y *= replicas;
  f->mfu = one("mfu", shown, agg);
  f->step_s = one("step_s", shown, agg);
  f->compute = one("compute_s", shown, agg);
  // An axis of size 1 never communicates (the page draws no layer for it): not queried.
  for (Axis a : kAxes)
    if (f->shape.size(a) > 1) f->comm[static_cast<size_t>(a)] = one(comm_key(a), shown, agg);
  if (f->world <= kMaxRankLines) {
    for (int r = 0; r < f->world; ++r) {
      f->mem.push_back(one("mem_bytes", r, store::Aggregate::none));
      f->mem_peak.push_back(one("mem_peak_bytes", r, store::Aggregate::none));
    }
    // The latest step's breakdown per rank: a one-step range, so each query reads one point.
    store::SeriesQuery last = q;
    last.x_min = last.x_max = static_cast<double>(info->summary.steps);
    last.pixels = 1;
    last.aggregate = store::Aggregate::none;
    for (int r = 0; r < f->world; ++r) {
      std::array<double, kBreakdownColumns> b{};
      last.rank = r;
      for (int k = 0; k < kBreakdownColumns; ++k) {
        if (k < kAxisCount && f->shape.size(kAxes[static_cast<size_t>(k)]) <= 1) continue;
        last.key = breakdown_key(k);
        if (auto s = store->query_series(last); s && !s->empty() && !(*s)[0].points.empty())
          b[k] = (*s)[0].points.back().y;
      }
      f->last_breakdown.push_back(b);
    }
  } else {
    f->mem.push_back(one("mem_bytes", 0, store::Aggregate::max));
    f->mem_peak.push_back(one("mem_peak_bytes", 0, store::Aggregate::max));
  }
  load_stragglers(store, run, *f);
  if (auto ev = store->events(run)) {
    for (const store::Event& e : *ev)
      if (e.level != "info") f->problems.push_back(e);
    if (f->problems.size() > 8) f->problems.erase(f->problems.begin(), f->problems.end() - 8);
  }
  f->query_ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
  return f;
}

MonitorModel::MonitorModel(StoreWorker* worker, QObject* parent) : QObject(parent), worker_(worker) {
  qRegisterMetaType<std::shared_ptr<const MonitorFrame>>();
  timer_.setInterval(40);  // at most 25 frames a second
  connect(&timer_, &QTimer::timeout, this, &MonitorModel::tick);
}

void MonitorModel::set_run(store::RunId run) {
  if (run == run_) return;
  run_ = run;
  frame_.reset();
  range_.reset();
  ++generation_;
  dirty_ = true;
  if (run_ != 0) {
    timer_.start();
    request(true);
  } else {
    timer_.stop();
  }
}

void MonitorModel::set_rank(int rank) {
  if (rank == rank_) return;
  rank_ = rank;
  dirty_ = true;
  request(true);
}

void MonitorModel::set_range(std::optional<std::pair<double, double>> range) {
  range_ = range;
  dirty_ = true;
  request(true);
}

void MonitorModel::set_pixels(int pixels) {
  pixels = std::clamp(pixels, 16, 8192);
  if (std::abs(pixels - pixels_) < 8) return;  // a few pixels of resize do not need a re-query
  pixels_ = pixels;
  dirty_ = true;
}

void MonitorModel::set_live(bool live) {
  live_ = live;
  if (live_ && run_ != 0) timer_.start();
}

void MonitorModel::refresh() {
  dirty_ = true;
  request(true);
}

void MonitorModel::tick() {
  if (run_ == 0) return;
  if (!live_ && !dirty_) return;
  request(dirty_);
}

void MonitorModel::request(bool force) {
  if (run_ == 0 || in_flight_) return;  // the answer in flight is followed by the next tick
  in_flight_ = true;
  const bool was_dirty = dirty_ || force;
  dirty_ = false;
  const store::RunId run = run_;
  const int rank = rank_;
  const auto range = range_;
  const int pixels = pixels_;
  const int64_t last = (was_dirty || !frame_) ? 0 : frame_->version;
  const quint64 gen = generation_;
  worker_->post<std::shared_ptr<MonitorFrame>>(
      this,
      [=](store::RunStore* s) { return load_monitor_frame(s, run, rank, range, pixels, last); },
      [this, gen](std::shared_ptr<MonitorFrame> f) {
        in_flight_ = false;
        if (gen != generation_ || !f) return;  // another run since, or nothing new
        frame_ = std::move(f);
        ++frames_;
        Q_EMIT frame_ready(frame_);
        const std::string& st = frame_->summary.status;
        // A finished run does not change any more: stop polling (a refresh() still works).
        if (st == store::kStatusOk || st == store::kStatusFailed || st == store::kStatusStopped)
          if (!live_) timer_.stop();
      });
}

}  // namespace meshwork::ui
