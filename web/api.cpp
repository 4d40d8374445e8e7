#include "web/api.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <set>
#include <vector>

#include "core/mesh.h"
#include "core/metrics.h"
#include "core/store/expert_load.h"
#include "core/store/run_frame.h"

namespace meshwork::web {

namespace {

using store::RunId;

// What a request said, as the error repeats it: never more than a line of it.
std::string shown(std::string_view text) {
  constexpr size_t kMax = 64;
  return std::string(text.substr(0, kMax)) + (text.size() > kMax ? "..." : "");
}

ApiReply error_reply(int status, const Error& e) {
  ApiReply r;
  r.status = status;
  r.body = {{"error", e.message()}};
  return r;
}
ApiReply bad_request(const std::string& field, std::string_view value, const std::string& allowed) {
  return error_reply(400, Error{field, shown(value), allowed});
}

// Store errors: an unknown run is the request's fault (404); anything else is the server's.
ApiReply store_error(const Error& e) {
  return error_reply(e.kind == ErrorKind::invalid_input ? 404 : 500, e);
}

std::optional<int64_t> parse_integer(std::string_view text) {
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

Result<RunId> parse_run_id(const std::string& field, std::string_view text) {
  const auto v = parse_integer(text);
  if (!v || *v < 1) return Error{field, shown(text), "a run id: a whole number >= 1"};
  return *v;
}

// An optional integer parameter in [lo, hi].
Result<int> int_param(const Params& p, const std::string& field, int fallback, int lo, int hi) {
  auto it = p.find(field);
  if (it == p.end()) return fallback;
  const auto v = parse_integer(it->second);
  if (!v || *v < lo || *v > hi)
    return Error{field, shown(it->second), "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi)};
  return static_cast<int>(*v);
}

Result<std::optional<double>> finite_param(const Params& p, const std::string& field) {
  auto it = p.find(field);
  if (it == p.end()) return std::optional<double>{};
  const std::string& s = it->second;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || s.size() > 32 || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    return Error{field, shown(s), "a finite number"};
  return std::optional<double>{v};
}

Result<std::string> key_param(const Params& p, const std::string& field, const std::string& fallback) {
  auto it = p.find(field);
  if (it == p.end()) return fallback;
  const std::string& k = it->second;
  const bool ok = !k.empty() && k.size() <= kMaxKeyLength &&
                  std::all_of(k.begin(), k.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
                  });
  if (!ok) return Error{field, shown(k), "a metric key: 1-64 of A-Z a-z 0-9 _ . -"};
  return k;
}

Result<store::XAxis> x_param(const Params& p) {
  auto it = p.find("x");
  if (it == p.end()) return store::XAxis::step;
  auto x = store::parse_x_axis(it->second);
  if (!x) return Error{"x", shown(it->second), "one of step, tokens, time"};
  return *x;
}

// The x range of a query: both ends optional, in order when both are given.
Result<std::optional<std::pair<double, double>>> range_params(const Params& p) {
  auto lo = finite_param(p, "x_min");
  if (!lo) return lo.error();
  auto hi = finite_param(p, "x_max");
  if (!hi) return hi.error();
  using Range = std::optional<std::pair<double, double>>;
  if (!*lo && !*hi) return Range{};
  if (*lo && *hi && **lo > **hi)
    return Error{"x_max", shown(p.find("x_max")->second), "at least x_min"};
  return Range{std::pair{lo->value_or(-1e300), hi->value_or(1e300)}};
}

// What a chart read of one metric names: the metric (`key`, loss when absent) and its x axis.
struct MetricParams {
  std::string key;
  store::XAxis x = store::XAxis::step;
};
Result<MetricParams> metric_params(const Params& p) {
  auto key = key_param(p, "key", "loss");
  if (!key) return key.error();
  auto x = x_param(p);
  if (!x) return x.error();
  return MetricParams{std::move(*key), *x};
}

// How a chart read is drawn: its pixel columns and the x range it covers.
struct ViewParams {
  int pixels = kDefaultPixels;
  std::optional<std::pair<double, double>> range;
};
Result<ViewParams> view_params(const Params& p) {
  auto pixels = int_param(p, "pixels", kDefaultPixels, kMinPixels, kMaxPixels);
  if (!pixels) return pixels.error();
  auto range = range_params(p);
  if (!range) return range.error();
  return ViewParams{*pixels, *range};
}

nlohmann::json points_json(const std::vector<store::Point>& points) {
  nlohmann::json a = nlohmann::json::array();
  a.get_ref<nlohmann::json::array_t&>().reserve(points.size());
  for (const store::Point& p : points) a.push_back({p.x, p.y});  // NaN y is written as null
  return a;
}

nlohmann::json optional_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

nlohmann::json shape_json(const MeshShape& s) {
  nlohmann::json j = nlohmann::json::object();
  for (Axis a : kAxes) j[std::string(axis_name(a))] = s.size(a);
  return j;
}

// The mesh over its nodes: which ranks each node holds (from the ranks' start records; a run
// another tool trained has none: one unnamed node) and every rank's coordinates. The first
// kMaxLayoutRanks ranks only: a drawing of 8,192 squares says no more than 1,024 do.
nlohmann::json layout_json(const store::RunSummary& s, const std::vector<store::RankInfo>& ranks) {
  const MeshShape shape = s.shape.value_or(MeshShape{});
  const int world = std::max(1, s.world);
  const int shown_ranks = std::min(world, kMaxLayoutRanks);
  std::map<int, std::pair<std::string, std::vector<int>>> nodes;
  std::set<int> placed;
  for (const store::RankInfo& r : ranks) {
    if (r.rank < 0 || r.rank >= shown_ranks) continue;
    auto& n = nodes[r.node];
    if (n.first.empty()) n.first = r.host;
    n.second.push_back(r.rank);
    placed.insert(r.rank);
  }
  for (int r = 0; r < shown_ranks; ++r)
    if (!placed.count(r)) nodes[-1].second.push_back(r);  // not started (yet): no node known
  nlohmann::json out = {{"nodes", nlohmann::json::array()}, {"coords", nlohmann::json::array()},
                        {"ranks_total", world}};
  for (auto& [node, n] : nodes) {
    std::sort(n.second.begin(), n.second.end());
    out["nodes"].push_back({{"node", node}, {"host", n.first}, {"ranks", n.second}});
  }
  const bool known = shape.world_size() == world;
  auto mesh = DeviceMesh::create(known ? shape : MeshShape{}, 1);
  for (int r = 0; r < shown_ranks; ++r) {
    if (!known || !mesh) {
      out["coords"].push_back(nullptr);
      continue;
    }
    const MeshCoord c = mesh->coord_of(r);
    // [dp_replicate, dp_shard, cp, tp], then the stage when the run has pp stages (docs/web.md):
    // pages written for the four axes read the same positions.
    nlohmann::json row = nlohmann::json::array();
    for (Axis a : kAxes)
      if (a != Axis::pp) row.push_back(c.get(a));
    if (shape[Axis::pp] > 1) row.push_back(c.get(Axis::pp));
    out["coords"].push_back(row);
  }
  return out;
}

}  // namespace

nlohmann::json prediction_json(const store::RunPrediction& p) {
  const PredictionCheck& c = p.check;
  auto relative = [](double predicted, double measured) {
    return measured > 0 ? nlohmann::json(PredictionCheck::error(predicted, measured)) : nlohmann::json();
  };
  nlohmann::json predicted = {{"step_s", c.predicted_step_s}, {"compute_s", c.predicted_compute_s},
                              {"comm_s", nlohmann::json::object()}};
  nlohmann::json measured = {{"step_s", c.measured_step_s}, {"compute_s", c.measured_compute_s},
                             {"comm_s", nlohmann::json::object()}, {"steps", p.measured.steps}};
  nlohmann::json error = {{"step_s", relative(c.predicted_step_s, c.measured_step_s)},
                          {"compute_s", relative(c.predicted_compute_s, c.measured_compute_s)},
                          {"comm_s", nlohmann::json::object()}};
  for (Axis a : kAxes) {
    const std::string name(axis_name(a));
    predicted["comm_s"][name] = c.predicted_comm_s[a];
    measured["comm_s"][name] = c.measured_comm_s[a];
    error["comm_s"][name] = relative(c.predicted_comm_s[a], c.measured_comm_s[a]);
  }
  return {{"available", true},
          {"basis", p.basis()},
          {"calibrated", p.calibrated},
          {"fitted_runs", p.fitted_runs},
          {"predicted", std::move(predicted)},
          {"measured", std::move(measured)},
          {"error", std::move(error)}};
}

nlohmann::json run_json(const store::RunSummary& s) {
  return {{"id", s.id},
          {"name", s.name},
          {"created", s.created},
          {"status", s.status},
          {"exit_reason", s.exit_reason},
          {"shape", s.shape ? shape_json(*s.shape) : nlohmann::json()},
          {"shape_text", s.shape ? s.shape->compact() : std::string()},
          {"model", s.model},
          {"world", s.world},
          {"steps", s.steps},
          {"points", s.points},
          {"final_loss", optional_json(s.final_loss)},
          {"tokens_per_s", optional_json(store::run_tokens_per_s(s))},
          {"origin", s.origin}};
}

Api::Api(std::unique_ptr<store::RunStore> store) : store_(std::move(store)) {}

int64_t Api::data_version() { return store_->data_version(); }

Result<Api::Versions> Api::versions() {
  auto list = store_->list_runs();
  if (!list) return list.error();
  Versions v;
  uint64_t h = 1469598103934665603ull;  // FNV-1a over (id, version): any change of any run
  for (const store::RunSummary& s : *list) {
    const int64_t rv = store::run_version(s);
    v.runs[s.id] = rv;
    v.status[s.id] = s.status;
    v.steps[s.id] = s.steps;
    for (int64_t x : {s.id, rv}) {
      h ^= static_cast<uint64_t>(x);
      h *= 1099511628211ull;
    }
  }
  h ^= list->size();
  v.list = static_cast<int64_t>(h >> 1);
  return v;
}

ApiReply Api::get(std::string_view path, const Params& params) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j;
  }
  if (parts.size() == 1 && parts[0] == "runs") return runs();
  if (parts.size() == 1 && parts[0] == "compare") return compare(params);
  if (parts.size() >= 2 && parts.size() <= 3 && parts[0] == "runs") {
    auto id = parse_run_id("run", parts[1]);
    if (!id) return error_reply(400, id.error());
    if (parts.size() == 2) return run(*id);
    if (parts[2] == "frame") return frame(*id, params);
    if (parts[2] == "series") return series(*id, params);
    if (parts[2] == "prediction") return prediction(*id);
    if (parts[2] == "health") return health(*id, params);
    if (parts[2] == "expert-load") return expert_load(*id, params);
  }
  return error_reply(404, Error{"path", shown("/api" + std::string(path)),
                                "one of /api/runs, /api/runs/ID, /api/runs/ID/frame, /api/runs/ID/series, "
                                "/api/runs/ID/prediction, /api/runs/ID/health, /api/runs/ID/expert-load, "
                                "/api/compare (docs/web.md)"});
}

ApiReply Api::runs() {
  auto list = store_->list_runs();
  if (!list) return store_error(list.error());
  ApiReply r;
  r.body["runs"] = nlohmann::json::array();
  for (const store::RunSummary& s : *list) r.body["runs"].push_back(run_json(s));
  auto v = versions();
  r.body["version"] = v ? v->list : 0;
  return r;
}

ApiReply Api::run(RunId id) {
  auto info = store_->get_run(id);
  if (!info) return store_error(info.error());
  auto ranks = store_->ranks(id);
  if (!ranks) return store_error(ranks.error());
  auto events = store_->events(id);
  if (!events) return store_error(events.error());
  auto keys = store_->keys(id);
  if (!keys) return store_error(keys.error());
  const store::RunSummary& s = info->summary;
  ApiReply r;
  r.body["run"] = run_json(s);
  r.body["config"] = info->config;
  r.body["ranks"] = nlohmann::json::array();
  for (const store::RankInfo& k : *ranks) {
    if (k.rank >= kMaxLayoutRanks) continue;
    r.body["ranks"].push_back({{"rank", k.rank}, {"node", k.node}, {"host", k.host}, {"status", k.status},
                               {"reason", k.reason}});
  }
  std::vector<store::Event> problems;
  for (const store::Event& e : *events)
    if (e.level != "info") problems.push_back(e);
  if (problems.size() > kMaxProblems) problems.erase(problems.begin(), problems.end() - kMaxProblems);
  r.body["problems"] = nlohmann::json::array();
  for (const store::Event& e : problems)
    r.body["problems"].push_back({{"time", e.time}, {"level", e.level}, {"text", e.text}});
  const auto cause = store::root_cause(s, problems);
  // One text, as docs/web.md has it: the headline line, then the detail.
  r.body["root_cause"] =
      cause ? nlohmann::json(std::string(cause->failed ? "The run failed: " : "The run was stopped: ") +
                             cause->reason + (cause->detail.empty() ? "" : "\n" + cause->detail))
            : nlohmann::json();
  r.body["capacity_bytes"] = optional_json(store::capacity_of(info->cluster, info->config, std::max(1, s.world)));
  r.body["keys"] = *keys;
  r.body["layout"] = layout_json(s, *ranks);
  std::string script;
  if (info->cluster.is_object() && info->cluster.contains("slurm") && info->cluster["slurm"].is_object())
    script = info->cluster["slurm"].value("script", std::string());
  r.body["slurm_script"] = script.empty() ? nlohmann::json() : nlohmann::json(script);
  return r;
}

ApiReply Api::frame(RunId id, const Params& params) {
  auto pixels = int_param(params, "pixels", kDefaultPixels, kMinPixels, kMaxPixels);
  if (!pixels) return error_reply(400, pixels.error());
  auto rank = int_param(params, "rank", -1, -1, 1 << 24);
  if (!rank) return error_reply(400, rank.error());
  auto range = range_params(params);
  if (!range) return error_reply(400, range.error());
  auto f = store::load_run_frame(store_.get(), id, *rank, *range, *pixels, 0);
  if (!f) return error_reply(500, Error{"frame", std::to_string(id), "could not be read"});
  if (f->error) return store_error(*f->error);
  ApiReply r;
  nlohmann::json& b = r.body;
  b["version"] = f->version;
  b["run"] = run_json(f->summary);
  b["pixels"] = *pixels;
  b["rank"] = *rank;
  b["loss"] = points_json(f->loss);
  b["eval_loss"] = points_json(f->eval_loss);
  b["lr"] = points_json(f->lr);
  b["grad_norm"] = points_json(f->grad_norm);
  b["tokens_per_s"] = points_json(f->tokens_per_s);
  b["mfu"] = points_json(f->mfu);
  b["step_s"] = points_json(f->step_s);
  b["compute"] = points_json(f->compute);
  b["comm"] = nlohmann::json::object();
  for (Axis a : kAxes)
    if (f->shape.size(a) > 1) b["comm"][std::string(axis_name(a))] = points_json(f->comm[a]);
  if (f->shape.ep > 1) b["comm"][std::string(kEpName)] = points_json(f->comm_ep);
  b["moe_layers"] = f->moe_layers;  // empty: a dense run (the page hides its expert load)
  b["mem"] = nlohmann::json::array();
  b["mem_peak"] = nlohmann::json::array();
  for (const auto& m : f->mem) b["mem"].push_back(points_json(m));
  for (const auto& m : f->mem_peak) b["mem_peak"].push_back(points_json(m));
  // load_run_frame draws one line per rank up to its limit, else one "max over ranks" line.
  nlohmann::json mem_ranks = nlohmann::json::array();
  if (f->mem.size() == static_cast<size_t>(f->world))
    for (int k = 0; k < f->world; ++k) mem_ranks.push_back(k);
  else
    mem_ranks.push_back("max");
  b["mem_ranks"] = mem_ranks;
  b["capacity_bytes"] = optional_json(f->capacity_bytes);
  b["source_points"] = f->source_points;
  b["query_ms"] = f->query_ms;
  return r;
}

// The expert-load heat map of one sparse layer (core/store/expert_load.h), as the Monitor draws
// it: per column the steps it stands for, the tokens per expert, the worst max/mean, the aux loss.
ApiReply Api::expert_load(RunId id, const Params& params) {
  auto layer = int_param(params, "layer", -1, -1, 1 << 20);
  if (!layer) return error_reply(400, layer.error());
  auto columns = int_param(params, "columns", 200, 1, kMaxPixels);
  if (!columns) return error_reply(400, columns.error());
  auto range = range_params(params);
  if (!range) return error_reply(400, range.error());
  if (auto info = store_->get_run(id); !info) return store_error(info.error());
  auto layers = store::expert_load_layers(*store_, id);
  if (!layers) return store_error(layers.error());
  ApiReply r;
  nlohmann::json& b = r.body;
  b = {{"run", id}, {"layers", *layers}, {"layer", nullptr}, {"experts", 0}, {"steps", 0},
       {"max_imbalance", nullptr}, {"max_imbalance_step", nullptr}, {"columns", nlohmann::json::array()}};
  if (layers->empty()) return r;  // a dense run
  // -1 or a layer without routing: the first sparse layer, as the workbench's picker starts.
  const int chosen = std::find(layers->begin(), layers->end(), *layer) != layers->end() ? *layer : layers->front();
  std::optional<int64_t> lo, hi;
  if (*range) {
    auto step_of = [](double x) { return static_cast<int64_t>(std::clamp(x, -9e18, 9e18)); };
    lo = step_of(std::ceil((*range)->first));
    hi = step_of(std::floor((*range)->second));
  }
  auto map = store::expert_load_map(*store_, id, chosen, *columns, lo, hi);
  if (!map) return store_error(map.error());
  b["layer"] = chosen;
  b["experts"] = map->experts;
  b["steps"] = map->steps;
  if (map->max_imbalance_step >= 0) {
    b["max_imbalance"] = map->max_imbalance;
    b["max_imbalance_step"] = map->max_imbalance_step;
  }
  for (const store::ExpertLoadColumn& c : map->columns)
    b["columns"].push_back({{"first_step", c.first_step}, {"last_step", c.last_step}, {"tokens", c.tokens},
                            {"imbalance", c.imbalance}, {"aux_loss", optional_json(c.aux_loss)}});
  return r;
}

ApiReply Api::series(RunId id, const Params& params) {
  store::SeriesQuery q;
  q.runs = {id};
  auto metric = metric_params(params);
  if (!metric) return error_reply(400, metric.error());
  q.key = metric->key;
  q.x = metric->x;
  if (auto it = params.find("agg"); it != params.end()) {
    auto a = store::parse_aggregate(it->second);
    if (!a) return bad_request("agg", it->second, "one of none, mean, min, max, sum");
    q.aggregate = *a;
  }
  auto rank = int_param(params, "rank", 0, 0, 1 << 24);
  if (!rank) return error_reply(400, rank.error());
  q.rank = *rank;
  auto view = view_params(params);
  if (!view) return error_reply(400, view.error());
  q.pixels = view->pixels;
  if (view->range) {
    q.x_min = view->range->first;
    q.x_max = view->range->second;
  }
  if (auto info = store_->get_run(id); !info) return store_error(info.error());
  auto s = store_->query_series(q);
  if (!s) return store_error(s.error());
  ApiReply r;
  r.body = {{"run", id}, {"key", q.key}, {"x", std::string(store::to_string(q.x))}};
  const store::Series empty;
  const store::Series& one = s->empty() ? empty : s->front();
  r.body["points"] = points_json(one.points);
  r.body["source_points"] = one.source_points;
  r.body["lod"] = one.lod_level;
  return r;
}

ApiReply Api::prediction(RunId id) {
  // An unknown run is the request's fault (404); a run predict_run cannot judge (still running,
  // too few steps, another tool's run without comm_s, ...) is an answer: 200, available false.
  if (auto info = store_->get_run(id); !info) return store_error(info.error());
  auto p = store::predict_run(store_.get(), id);
  ApiReply r;
  if (!p) {
    const ErrorKind k = p.error().kind;
    if (k == ErrorKind::io || k == ErrorKind::internal) return error_reply(500, p.error());
    r.body = {{"available", false}, {"reason", p.error().message()}};
    return r;
  }
  r.body = prediction_json(*p);
  r.body["run"] = id;
  return r;
}

ApiReply Api::health(RunId id, const Params& params) {
  std::optional<double> hang_after;
  if (auto it = params.find("hang_after"); it != params.end()) {
    auto t = finite_param(params, "hang_after");
    if (!t) return error_reply(400, t.error());
    if (**t < 1 || **t > 7 * 86400) return bad_request("hang_after", it->second, "seconds, 1 to 604800");
    hang_after = *t;
  }
  // An unknown run is the request's fault (404); a run that cannot be diagnosed (another tool's
  // run without a mesh shape) is an answer: 200, available false, as for the prediction.
  if (auto info = store_->get_run(id); !info) return store_error(info.error());
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  const double now = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  auto h = store::run_health(*store_, id, now, hang_after);
  ApiReply r;
  if (!h) {
    const ErrorKind k = h.error().kind;
    if (k == ErrorKind::io || k == ErrorKind::internal) return error_reply(500, h.error());
    r.body = {{"available", false}, {"reason", h.error().message()}, {"run", id}};
    return r;
  }
  // The same JSON as `meshwork diagnose RUN --json`.
  r.body = h->to_json(id);
  return r;
}

ApiReply Api::compare(const Params& params) {
  auto it = params.find("runs");
  if (it == params.end() || it->second.empty())
    return bad_request("runs", "", "1 to 10 run ids, comma-separated (runs=3,4,7)");
  store::CompareQuery q;
  std::string_view list = it->second;
  std::set<RunId> seen;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view one = list.substr(0, comma);
    auto id = parse_run_id("runs", one);
    if (!id) return error_reply(400, id.error());
    if (!seen.insert(*id).second) return bad_request("runs", it->second, "each run once");
    q.runs.push_back(*id);
    if (q.runs.size() > kMaxCompareRuns) return bad_request("runs", it->second, "at most 10 runs");
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  auto metric = metric_params(params);
  if (!metric) return error_reply(400, metric.error());
  q.key = metric->key;
  q.x = metric->x;
  auto view = view_params(params);
  if (!view) return error_reply(400, view.error());
  q.pixels = view->pixels;
  q.range = view->range;
  auto f = store::load_compare_frame(store_.get(), q, &cache_);
  if (f->error) return store_error(*f->error);
  ApiReply r;
  nlohmann::json& b = r.body;
  b["runs"] = nlohmann::json::array();
  for (const store::RunSummary& s : f->runs) b["runs"].push_back(run_json(s));
  b["series"] = nlohmann::json::array();
  for (const store::Series& s : f->series)
    b["series"].push_back({{"run", s.run}, {"points", points_json(s.points)}, {"source_points", s.source_points}});
  b["comm"] = nlohmann::json::array();
  for (size_t i = 0; i < f->comm.size() && i < f->runs.size(); ++i) {
    const store::CommStats& c = f->comm[i];
    nlohmann::json mean = nlohmann::json::object();
    for (int k = 0; k < store::kBreakdownColumns; ++k) {
      const std::string name = k < kAxisCount ? std::string(axis_name(kAxes[static_cast<size_t>(k)])) : "compute";
      const double v = c.mean[static_cast<size_t>(k)];
      mean[name] = std::isnan(v) ? nlohmann::json() : nlohmann::json(v);  // absent, never 0
    }
    b["comm"].push_back({{"run", f->runs[i].id}, {"mean", mean}, {"exact", c.exact()}, {"steps", c.steps},
                         {"sampled_steps", c.sampled_steps}});
  }
  b["diff"] = nlohmann::json::array();
  for (const store::DiffRow& d : store::config_diff(f->configs))
    b["diff"].push_back({{"key", d.key}, {"values", d.values}, {"differs", d.differs}});
  b["pixels"] = q.pixels;
  b["load_ms"] = f->load_ms;
  return r;
}

}  // namespace meshwork::web
