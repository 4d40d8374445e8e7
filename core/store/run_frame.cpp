#include "core/store/run_frame.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <chrono>
#include <functional>

#include "core/metrics.h"

namespace meshwork::store {

namespace {
// Beyond this many ranks the per-rank memory lines become a mean and a max (a legend of 64 lines
// helps nobody, and each line is one query).
constexpr int kMaxRankLines = 16;
}  // namespace

int64_t run_version(const RunSummary& s) {
  return s.points * 1000003 + s.steps * 31 + static_cast<int64_t>(std::hash<std::string>{}(s.status) % 1000) +
         static_cast<int64_t>(s.exit_reason.size());
}

std::optional<double> run_tokens_per_s(const RunSummary& s) {
  if (!s.tokens_per_s) return std::nullopt;
  return *s.tokens_per_s * s.shape.value_or(MeshShape{}).group_size(GroupKind::dp);
}

std::string breakdown_key(int k) { return k < kAxisCount ? comm_key(kAxes[static_cast<size_t>(k)]) : "compute_s"; }

namespace {
std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}
}  // namespace

std::optional<RootCause> root_cause(const RunSummary& s, const std::vector<Event>& problems) {
  const bool failed = s.status == kStatusFailed;
  if (!failed && !(s.status == kStatusStopped && !s.exit_reason.empty())) return std::nullopt;
  RootCause c;
  c.failed = failed;
  const size_t nl = s.exit_reason.find('\n');
  c.reason = s.exit_reason.substr(0, nl);
  std::string tail = nl == std::string::npos ? std::string() : s.exit_reason.substr(nl + 1);
  for (auto it = problems.rbegin(); trim(tail).empty() && it != problems.rend(); ++it)
    if (it->level == "error") {
      const size_t first = it->text.find('\n');
      tail = first == std::string::npos ? std::string() : it->text.substr(first + 1);
    }
  tail = trim(tail);
  if (tail.size() > kRootCauseDetailChars) tail = tail.substr(tail.size() - kRootCauseDetailChars);
  c.detail = tail;
  return c;
}

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

void load_stragglers(store::RunStore* store, store::RunId run, RunFrame& f) {
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

std::shared_ptr<RunFrame> load_run_frame(store::RunStore* store, store::RunId run, int rank,
                                                 std::optional<std::pair<double, double>> range, int pixels,
                                                 int64_t last_version, int moe_layer) {
  auto f = std::make_shared<RunFrame>();
  f->run = run;
  f->rank = rank;
  f->pixels = pixels;
  if (!store) {
    f->error = Error{"run store", "", "could not be opened"}.as(ErrorKind::io);
    return f;
  }
  const auto started = std::chrono::steady_clock::now();
  auto info = store->get_run(run);
  if (!info) {
    f->error = info.error();
    return f;
  }
  f->version = run_version(info->summary);
  if (last_version != 0 && f->version == last_version) return nullptr;
  f->summary = info->summary;
  f->config = info->config;
  f->shape = info->summary.shape.value_or(MeshShape{});
  f->world = std::max(1, info->summary.world);
  f->capacity_bytes = capacity_of(info->cluster, info->config, f->world);
  if (info->cluster.is_object() && info->cluster.contains("slurm") && info->cluster["slurm"].is_object())
    f->slurm_script = info->cluster["slurm"].value("script", std::string());

  store::SeriesQuery q;
  q.runs = {run};
  q.x = store::XAxis::step;
  if (range) {
    q.x_min = range->first;
    q.x_max = range->second;
  }
  q.pixels = std::max(16, pixels);
  auto one = [&](const std::string& key, int r, store::Aggregate agg) -> RunFrame::Points {
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
    if (f->shape.size(a) > 1) f->comm[a] = one(comm_key(a), shown, agg);
  if (f->shape.ep > 1) f->comm_ep = one(comm_ep_key(), shown, agg);
  if (auto layers = expert_load_layers(*store, run); layers && !layers->empty()) {
    f->moe_layers = std::move(*layers);
    const int layer = std::find(f->moe_layers.begin(), f->moe_layers.end(), moe_layer) != f->moe_layers.end()
                          ? moe_layer : f->moe_layers.front();
    std::optional<int64_t> lo, hi;
    if (range) {  // an open end may be +-1e300: clamped before it becomes a step
      auto step_of = [](double x) { return static_cast<int64_t>(std::clamp(x, -9e18, 9e18)); };
      lo = step_of(std::ceil(range->first));
      hi = step_of(std::floor(range->second));
    }
    if (auto map = expert_load_map(*store, run, layer, expert_load_columns(pixels), lo, hi)) f->expert_load = std::move(*map);
  }
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
  if (auto segments = run_segments(*store, run)) f->segments = std::move(*segments);
  if (auto ev = store->events(run)) {
    for (const store::Event& e : *ev)
      if (e.level != "info") f->problems.push_back(e);
    if (f->problems.size() > 8) f->problems.erase(f->problems.begin(), f->problems.end() - 8);
  }
  f->query_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return f;
}

}  // namespace meshwork::store
