#include "core/store/expert_load.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>

#include "core/store/sqlite.h"

namespace meshwork::store {

namespace {

uint64_t to_little_endian(uint64_t v) {
  if constexpr (std::endian::native == std::endian::little) return v;
  else return __builtin_bswap64(v);
}

// max / mean of one step's counts (0 without tokens), as core's expert_load() computes it.
double imbalance_of(const std::vector<double>& tokens) {
  double sum = 0, max = 0;
  for (double t : tokens) {
    sum += t;
    max = std::max(max, t);
  }
  return sum > 0 ? max * static_cast<double>(tokens.size()) / sum : 0;
}

}  // namespace

std::string pack_expert_tokens(const std::vector<double>& tokens) {
  std::string out(tokens.size() * sizeof(double), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint64_t bits = to_little_endian(std::bit_cast<uint64_t>(tokens[i]));
    std::memcpy(out.data() + i * sizeof bits, &bits, sizeof bits);
  }
  return out;
}

Result<std::vector<double>> unpack_expert_tokens(std::string_view blob) {
  if (blob.size() % sizeof(double) != 0)
    return Error{"expert_load.tokens", std::to_string(blob.size()) + " bytes",
                 "a whole number of float64 values (8 bytes each)"}.as(ErrorKind::io);
  std::vector<double> out(blob.size() / sizeof(double));
  for (size_t i = 0; i < out.size(); ++i) {
    uint64_t bits = 0;
    std::memcpy(&bits, blob.data() + i * sizeof bits, sizeof bits);
    out[i] = std::bit_cast<double>(to_little_endian(bits));
  }
  return out;
}

namespace {
// Column `col` of the statement's row: an expert_load tokens blob, unpacked.
Result<std::vector<double>> tokens_column(sql::Stmt& q, int col) {
  const void* blob = sqlite3_column_blob(q.raw(), col);
  const int bytes = sqlite3_column_bytes(q.raw(), col);
  return unpack_expert_tokens(std::string_view(static_cast<const char*>(blob), static_cast<size_t>(bytes)));
}
}  // namespace

std::vector<double> load_ratios(const std::vector<double>& tokens) {
  double sum = 0;
  for (double t : tokens) sum += t;
  std::vector<double> out(tokens.size(), 0.0);
  if (sum <= 0) return out;
  const double mean = sum / static_cast<double>(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) out[i] = tokens[i] / mean;
  return out;
}

// One index seek per layer ((run, layer, step) is the key): a run's layers without reading its steps.
Result<std::vector<int>> expert_load_layers(RunStore& store, RunId run) {
  sql::Stmt q(store.handle(), "SELECT layer FROM expert_load WHERE run = ?1 AND layer > ?2 ORDER BY layer LIMIT 1");
  if (!q.ok()) return q.error();
  std::vector<int> layers;
  int64_t after = INT64_MIN;
  for (;;) {
    q.bind(1, run).bind(2, after);
    Result<std::optional<int64_t>> next = q.first([&] { return q.int64(0); });
    if (!next) return next.error();
    if (!*next) return layers;
    after = **next;
    layers.push_back(static_cast<int>(after));
  }
}

Result<ExpertLoadMap> expert_load_map(RunStore& store, RunId run, int layer, int max_columns,
                                      std::optional<int64_t> first_step, std::optional<int64_t> last_step) {
  if (max_columns < 1)
    return Error{"columns", std::to_string(max_columns), "at least 1 column of the heat map"};
  const int64_t lo = first_step.value_or(INT64_MIN), hi = last_step.value_or(INT64_MAX);
  ExpertLoadMap map;
  map.layer = layer;
  sql::Stmt n(store.handle(),
              "SELECT count(*) FROM expert_load WHERE run = ?1 AND layer = ?2 AND step BETWEEN ?3 AND ?4");
  if (!n.ok()) return n.error();
  n.bind(1, run).bind(2, layer).bind(3, lo).bind(4, hi);
  if (Result<bool> row = n.step(); !row) return row.error();
  map.steps = n.int64(0);
  n.reset();
  if (map.steps == 0) return map;
  const int64_t columns = std::min<int64_t>(map.steps, max_columns);
  map.columns.resize(static_cast<size_t>(columns));
  std::vector<int64_t> steps_in(static_cast<size_t>(columns), 0), aux_in(static_cast<size_t>(columns), 0);

  sql::Stmt q(store.handle(),
              "SELECT e.step, e.tokens, m.aux_loss FROM expert_load e LEFT JOIN moe_steps m"
              " ON m.run = e.run AND m.step = e.step"
              " WHERE e.run = ?1 AND e.layer = ?2 AND e.step BETWEEN ?3 AND ?4 ORDER BY e.step");
  if (!q.ok()) return q.error();
  q.bind(1, run).bind(2, layer).bind(3, lo).bind(4, hi);
  int64_t i = 0;
  Status walked = q.each_row([&]() -> Status {
    // Evenly: step i of n falls in column i * columns / n.
    const size_t c = static_cast<size_t>(i * columns / map.steps);
    ++i;
    Result<std::vector<double>> tokens = tokens_column(q, 1);
    if (!tokens) return tokens.error();
    const int64_t step = q.int64(0);
    ExpertLoadColumn& col = map.columns[c];
    if (steps_in[c] == 0) col.first_step = step;
    col.last_step = step;
    if (col.tokens.size() < tokens->size()) col.tokens.resize(tokens->size(), 0.0);
    for (size_t e = 0; e < tokens->size(); ++e) col.tokens[e] += (*tokens)[e];
    ++steps_in[c];
    map.experts = std::max(map.experts, static_cast<int>(tokens->size()));
    const double imbalance = imbalance_of(*tokens);
    col.imbalance = std::max(col.imbalance, imbalance);
    if (imbalance > map.max_imbalance) {
      map.max_imbalance = imbalance;
      map.max_imbalance_step = step;
    }
    if (!q.is_null(2) && std::isfinite(q.real(2))) {
      col.aux_loss = col.aux_loss.value_or(0.0) + q.real(2);
      ++aux_in[c];
    }
    return Status::Ok();
  });
  if (!walked) return walked.error();
  for (size_t c = 0; c < map.columns.size(); ++c) {
    ExpertLoadColumn& col = map.columns[c];
    for (double& t : col.tokens) t /= static_cast<double>(std::max<int64_t>(1, steps_in[c]));
    if (col.aux_loss) *col.aux_loss /= static_cast<double>(aux_in[c]);
  }
  return map;
}

Result<MeasuredRouting> measured_routing(RunStore& store, RunId run, int64_t max_steps) {
  if (max_steps < 1) return Error{"max_steps", std::to_string(max_steps), "at least 1 step"};
  Result<RunInfo> info = store.get_run(run);
  if (!info) return info.error();
  std::string source = "run " + std::to_string(run);
  if (!info->summary.name.empty()) source += " (" + info->summary.name + ")";
  Result<std::vector<int>> layers = expert_load_layers(store, run);
  if (!layers) return layers.error();
  if (layers->empty())
    return Error{"routing", source, "a run that stored its tokens per expert (an MoE run of meshtrain); it stored none"};
  // The latest step of any layer (an index seek each), then each layer's window as one range scan.
  sql::Stmt last(store.handle(), "SELECT max(step) FROM expert_load WHERE run = ?1 AND layer = ?2");
  if (!last.ok()) return last.error();
  int64_t latest = INT64_MIN;
  for (int layer : *layers) {
    last.bind(1, run).bind(2, layer);
    Result<std::optional<int64_t>> step = last.first([&] { return last.int64(0); });
    if (!step) return step.error();
    if (*step) latest = std::max(latest, **step);
  }
  const int64_t first = latest - max_steps + 1;
  sql::Stmt q(store.handle(), "SELECT step, tokens FROM expert_load WHERE run = ?1 AND layer = ?2 AND step >= ?3 ORDER BY step");
  if (!q.ok()) return q.error();
  std::map<int64_t, RoutedStep> by_step;
  for (int layer : *layers) {
    q.bind(1, run).bind(2, layer).bind(3, first);
    Status walked = q.each_row([&]() -> Status {
      Result<std::vector<double>> tokens = tokens_column(q, 1);
      if (!tokens) return tokens.error();
      by_step[q.int64(0)].layers.push_back(std::move(*tokens));
      return Status::Ok();
    });
    if (!walked) return walked.error();
  }
  // A step some layer did not store (a record cut short) would shift the layers: left out.
  std::vector<RoutedStep> steps;
  for (auto& [step, routed] : by_step)
    if (routed.layers.size() == layers->size()) steps.push_back(std::move(routed));
  if (steps.empty())
    return Error{"routing", source, "a run that stored every sparse layer's tokens per expert in one step; none has all " +
                                        std::to_string(layers->size())};
  return MeasuredRouting::make(std::move(steps), std::move(source));
}

Result<std::vector<RoutingRun>> routing_runs(RunStore& store, const ModelSpec& model, int limit) {
  std::vector<RoutingRun> out;
  if (!model.is_moe() || limit < 1) return out;
  sql::Stmt runs(store.handle(), "SELECT id, name FROM runs ORDER BY created DESC, id DESC");
  if (!runs.ok()) return runs.error();
  sql::Stmt experts(store.handle(), "SELECT experts FROM expert_load WHERE run = ?1 AND layer = ?2 LIMIT 1");
  if (!experts.ok()) return experts.error();
  std::vector<RoutingRun> all;
  Status listed = runs.each_row([&] { all.push_back({runs.int64(0), runs.text(1), 0, 0}); });
  if (!listed) return listed.error();
  for (RoutingRun& r : all) {
    Result<std::vector<int>> layers = expert_load_layers(store, r.id);
    if (!layers) return layers.error();
    if (layers->empty()) continue;  // a dense run
    experts.bind(1, r.id).bind(2, layers->front());
    Result<std::optional<int64_t>> e = experts.first([&] { return experts.int64(0); });
    if (!e) return e.error();
    r.experts = e->value_or(0);
    r.sparse_layers = static_cast<int>(layers->size());
    if (r.experts != model.moe.num_experts || r.sparse_layers != model.sparse_layer_count()) continue;
    out.push_back(std::move(r));
    if (static_cast<int>(out.size()) == limit) break;
  }
  return out;
}

}  // namespace meshwork::store
