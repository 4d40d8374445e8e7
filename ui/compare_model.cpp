#include "ui/compare_model.h"

#include <QColor>
#include <QElapsedTimer>
#include <map>
#include <set>

#include "ui/monitor_model.h"
#include "ui/store_worker.h"

namespace meshwork::ui {

namespace {
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    return;
  }
  if (prefix.empty()) return;
  out[prefix] = j.is_string() ? j.get<std::string>() : j.dump();
}
// Keys in the order people read a config: what, which shape, how it trains, then the rest.
int rank_of(const std::string& key) {
  static const char* order[] = {"model", "mesh.dp_replicate", "mesh.dp_shard", "mesh.cp", "mesh.tp", "training.", "data", "cluster"};
  for (int i = 0; i < 8; ++i)
    if (key.rfind(order[i], 0) == 0) return i;
  return 8;
}
constexpr const char* kCommKeys[5] = {"comm_s.dp_replicate", "comm_s.dp_shard", "comm_s.cp", "comm_s.tp", "compute_s"};
}  // namespace

QColor run_color(int index) {
  static const char* k[] = {"#4E79A7", "#F28E2B", "#E15759", "#76B7B2", "#59A14F",
                            "#EDC948", "#B07AA1", "#FF9DA7", "#9C755F", "#BAB0AC"};
  return QColor(k[((index % 10) + 10) % 10]);
}

std::vector<DiffRow> config_diff(const std::vector<nlohmann::json>& configs) {
  std::vector<std::map<std::string, std::string>> flat(configs.size());
  std::set<std::string> keys;
  for (size_t i = 0; i < configs.size(); ++i) {
    flatten(configs[i], "", flat[i]);
    flat[i].erase("name");
    flat[i].erase("v");
    for (const auto& [k, v] : flat[i]) keys.insert(k);
  }
  std::vector<std::string> ordered(keys.begin(), keys.end());
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const std::string& a, const std::string& b) { return rank_of(a) < rank_of(b); });
  std::vector<DiffRow> rows;
  for (const std::string& k : ordered) {
    DiffRow r;
    r.key = QString::fromStdString(k);
    std::optional<std::string> first;
    for (size_t i = 0; i < flat.size(); ++i) {
      auto it = flat[i].find(k);
      const std::string v = it == flat[i].end() ? std::string("\xE2\x80\x94") : it->second;  // em dash
      r.values.push_back(QString::fromStdString(v));
      if (!first) first = v;
      else if (*first != v) r.differs = true;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::shared_ptr<CompareFrame> load_compare_frame(store::RunStore* store, const CompareQuery& cq) {
  auto f = std::make_shared<CompareFrame>();
  if (!store) {
    f->error = QStringLiteral("the run store could not be opened");
    return f;
  }
  QElapsedTimer timer;
  timer.start();
  for (store::RunId id : cq.runs) {
    auto info = store->get_run(id);
    if (!info) {
      f->error = QString::fromStdString(info.error().message());
      return f;
    }
    f->runs.push_back(info->summary);
    f->configs.push_back(info->config);
    f->shapes.push_back(parse_shape_text(info->summary.shape));
  }
  store::SeriesQuery q;
  q.runs = cq.runs;
  q.key = cq.key;
  q.x = cq.x;
  q.aggregate = cq.aggregate;
  q.rank = 0;
  if (cq.range) {
    q.x_min = cq.range->first;
    q.x_max = cq.range->second;
  }
  q.pixels = std::max(16, cq.pixels);
  auto s = store->query_series(q);
  if (!s) {
    f->error = QString::fromStdString(s.error().message());
    return f;
  }
  f->series = std::move(*s);
  // Per-axis communication: one query per key covers every run.
  f->comm.assign(cq.runs.size(), {});
  store::SeriesQuery cqk = q;
  cqk.x = store::XAxis::step;
  cqk.x_min.reset();
  cqk.x_max.reset();
  cqk.aggregate = store::Aggregate::mean;
  cqk.pixels = 2048;
  for (int k = 0; k < 5; ++k) {
    cqk.key = kCommKeys[k];
    auto r = store->query_series(cqk);
    if (!r) continue;
    for (size_t i = 0; i < r->size() && i < f->comm.size(); ++i) {
      const auto& pts = (*r)[i].points;
      double sum = 0;
      for (const auto& p : pts) sum += p.y;
      f->comm[i][static_cast<size_t>(k)] = pts.empty() ? 0 : sum / static_cast<double>(pts.size());
    }
  }
  f->load_ms = static_cast<double>(timer.nsecsElapsed()) / 1e6;
  return f;
}

CompareModel::CompareModel(StoreWorker* worker, QObject* parent) : QObject(parent), worker_(worker) {
  qRegisterMetaType<std::shared_ptr<const CompareFrame>>();
}

void CompareModel::set_query(const CompareQuery& q) {
  query_ = q;
  start();
}

void CompareModel::start() {
  if (in_flight_) {
    again_ = true;
    return;
  }
  in_flight_ = true;
  const CompareQuery q = query_;
  worker_->post<std::shared_ptr<CompareFrame>>(
      this, [q](store::RunStore* s) { return load_compare_frame(s, q); },
      [this](std::shared_ptr<CompareFrame> f) {
        in_flight_ = false;
        if (again_) {  // the query changed meanwhile: this answer is already stale
          again_ = false;
          start();
          return;
        }
        frame_ = std::move(f);
        ++frames_;
        Q_EMIT frame_ready(frame_);
      });
}

}  // namespace meshwork::ui
