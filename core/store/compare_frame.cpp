#include "core/store/compare_frame.h"

#include <algorithm>
#include <chrono>
#include <set>

#include "core/metrics.h"

namespace meshwork::store {

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
  static const std::vector<std::string> order = [] {
    std::vector<std::string> o{"model"};
    for (Axis a : kAxes) o.push_back("mesh." + std::string(axis_name(a)));
    for (const char* rest : {"training.", "data", "cluster"}) o.emplace_back(rest);
    return o;
  }();
  for (size_t i = 0; i < order.size(); ++i)
    if (key.rfind(order[i], 0) == 0) return static_cast<int>(i);
  return static_cast<int>(order.size());
}
}  // namespace

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
    r.key = k;
    std::optional<std::string> first;
    for (size_t i = 0; i < flat.size(); ++i) {
      auto it = flat[i].find(k);
      const std::string v = it == flat[i].end() ? std::string("\xE2\x80\x94") : it->second;  // em dash
      r.values.push_back(v);
      if (!first) first = v;
      else if (*first != v) r.differs = true;
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

namespace {
bool finished(const RunSummary& s) {
  return s.status == kStatusOk || s.status == kStatusFailed || s.status == kStatusStopped;
}
}  // namespace

// Mean seconds per step of each comm key and compute, over ranks, for runs of the same length
// (`last_step`): every step while the run has at most kCommSampleSteps, else every step of
// kCommWindows evenly spaced windows of kCommSampleSteps / kCommWindows steps. Every step of a
// window (each query asks for more pixel columns than the window has steps, so nothing is
// decimated away): an unbiased estimate from real per-step means, where the chart's per-column
// min/max/last points would over-weight every spike. The mean over ranks of a step comes from the
// store's cross-rank aggregates (one row per step, whatever the rank count: docs/store.md).
Status comm_means(RunStore* store, const std::vector<RunId>& runs, int64_t first_step,
                  int64_t last_step, std::vector<CommStats>& out) {
  out.assign(runs.size(), CommStats{});
  const int64_t steps = last_step - first_step + 1;
  if (steps <= 0) return Status::Ok();
  const bool sampled = steps > kCommSampleSteps;
  const int windows = sampled ? kCommWindows : 1;
  const int64_t width = sampled ? kCommSampleSteps / kCommWindows : steps;
  // The breakdown's columns, then the experts' all-to-all (not an axis of the mesh: CommStats::ep_mean).
  constexpr int kKeys = kBreakdownColumns + 1;
  auto key_of = [](int k) { return k < kBreakdownColumns ? breakdown_key(k) : comm_ep_key(); };
  std::vector<std::array<double, kKeys>> sum(runs.size(), std::array<double, kKeys>{});
  std::vector<std::array<int64_t, kKeys>> n(runs.size(), std::array<int64_t, kKeys>{});
  SeriesQuery q;
  q.runs = runs;
  q.x = XAxis::step;
  q.aggregate = Aggregate::mean;
  q.pixels = static_cast<int>(2 * width + 16);
  for (int w = 0; w < windows; ++w) {
    const int64_t a = first_step + (windows == 1 ? 0 : (steps - width) * w / (windows - 1));
    q.x_min = static_cast<double>(a);
    q.x_max = static_cast<double>(a + width - 1);
    for (int k = 0; k < kKeys; ++k) {
      q.key = key_of(k);
      auto r = store->query_series(q);
      if (!r) return r.error();
      for (size_t i = 0; i < r->size() && i < runs.size(); ++i)
        for (const Point& p : (*r)[i].points) {
          if (!std::isfinite(p.y)) continue;
          sum[i][static_cast<size_t>(k)] += p.y;
          ++n[i][static_cast<size_t>(k)];
        }
    }
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    // A run that never recorded a column (another tool's run has no per-axis communication)
    // holds NaN there: absent, which the page shows as such, never as 0 ms.
    auto mean_of = [&](size_t k) { return n[i][k] ? sum[i][k] / static_cast<double>(n[i][k]) : std::nan(""); };
    for (size_t k = 0; k < kBreakdownColumns; ++k) out[i].mean[k] = mean_of(k);
    out[i].ep_mean = mean_of(kBreakdownColumns);
    out[i].sampled_steps = std::min(steps, windows * width);
    out[i].steps = steps;
  }
  return Status::Ok();
}

std::shared_ptr<CompareFrame> load_compare_frame(RunStore* store, const CompareQuery& cq,
                                                 CompareCache* cache) {
  auto f = std::make_shared<CompareFrame>();
  if (!store) {
    f->error = Error{"run store", "", "could not be opened"}.as(ErrorKind::io);
    return f;
  }
  const auto started = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  };
  std::vector<std::optional<CommStats>> comm(cq.runs.size());
  for (size_t i = 0; i < cq.runs.size(); ++i) {
    const RunId id = cq.runs[i];
    std::optional<CompareCache::Entry> hit;
    if (cache) hit = cache->get(id);
    if (!hit) {
      auto info = store->get_run(id);
      if (!info) {
        f->error = info.error();
        return f;
      }
      hit = CompareCache::Entry{std::move(*info), std::nullopt};
    }
    f->runs.push_back(hit->info.summary);
    f->configs.push_back(hit->info.config);
    f->shapes.push_back(hit->info.summary.shape);  // absent stays absent: never a made-up 1x1x1x1
    comm[i] = hit->comm;
    if (cache && finished(hit->info.summary)) cache->put(id, *hit);  // a finished run no longer changes
  }
  const double runs_ms = elapsed_ms();
  SeriesQuery q;
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
    f->error = s.error();
    return f;
  }
  f->series = std::move(*s);
  const double series_ms = elapsed_ms() - runs_ms;
  // Per-axis communication: runs of the same length share their sample windows (one query per
  // key and window covers them all); finished runs keep theirs in the cache.
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> by_length;
  for (size_t i = 0; i < cq.runs.size(); ++i) {
    if (comm[i]) continue;
    by_length[{0, f->runs[i].steps}].push_back(i);
  }
  for (const auto& [len, idx] : by_length) {
    std::vector<RunId> ids;
    for (size_t i : idx) ids.push_back(cq.runs[i]);
    std::vector<CommStats> stats;
    if (Status st = comm_means(store, ids, len.first, len.second, stats); !st) {
      f->error = st.error();
      return f;
    }
    for (size_t j = 0; j < idx.size(); ++j) {
      comm[idx[j]] = stats[j];
      if (cache && finished(f->runs[idx[j]])) cache->set_comm(cq.runs[idx[j]], stats[j]);
    }
  }
  for (const auto& c : comm) f->comm.push_back(c.value_or(CommStats{}));
  f->load_ms = elapsed_ms();
  f->runs_ms = runs_ms;
  f->series_ms = series_ms;
  f->comm_ms = f->load_ms - runs_ms - series_ms;
  return f;
}

std::optional<CompareCache::Entry> CompareCache::get(RunId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void CompareCache::put(RunId id, const Entry& e) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = entries_[id];
  const auto comm = slot.comm;
  slot = e;
  if (!slot.comm) slot.comm = comm;
}

void CompareCache::set_comm(RunId id, const CommStats& c) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(id);
  if (it != entries_.end()) it->second.comm = c;
}

void CompareCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

}  // namespace meshwork::store
