#include "core/store/rank_states.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "core/mesh_json.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

namespace {

constexpr const char* kTablesSql =
    "CREATE TABLE IF NOT EXISTS rank_states(run INTEGER NOT NULL, rank INTEGER NOT NULL, time REAL NOT NULL,"
    " stalled INTEGER NOT NULL, process TEXT NOT NULL, flight TEXT NOT NULL, PRIMARY KEY(run, rank)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS follow_beats(run INTEGER PRIMARY KEY, time REAL NOT NULL);";

Status ensure_tables(sqlite3* db) { return sql::exec(db, kTablesSql); }

Result<bool> has_tables(sqlite3* db) {
  sql::Stmt q(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'rank_states'");
  Result<std::optional<int64_t>> n = q.first([&] { return q.int64(0); });
  if (!n) return n.error();
  return n->value_or(0) > 0;
}

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

Status put_rank_states(RunStore& store, RunId run, const std::vector<StoredRankState>& states, double beat_time) {
  sqlite3* db = store.handle();
  if (Status s = ensure_tables(db); !s) return s;
  sql::Transaction tx(db);
  if (!tx.begun()) return tx.begun();
  sql::Stmt put(db, "INSERT OR REPLACE INTO rank_states(run, rank, time, stalled, process, flight)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!put.ok()) return put.error();
  for (const StoredRankState& s : states) {
    const std::string flight = s.flight ? to_json(*s.flight).dump() : std::string("null");
    put.bind(1, run).bind(2, s.rank).bind(3, s.time).bind(4, s.stalled ? 1 : 0).bind(5, s.process).bind(6, flight);
    if (Status st = put.run(); !st) return st;
  }
  if (beat_time > 0) {
    sql::Stmt beat(db, "INSERT OR REPLACE INTO follow_beats(run, time) VALUES (?1, ?2)");
    if (Status st = beat.bind(1, run).bind(2, beat_time).run(); !st) return st;
  }
  return tx.commit();
}

Status put_follow_beat(RunStore& store, RunId run, double time) { return put_rank_states(store, run, {}, time); }

Result<std::vector<StoredRankState>> rank_states(RunStore& store, RunId run) {
  sqlite3* db = store.handle();
  Result<bool> has = has_tables(db);
  if (!has) return has.error();
  std::vector<StoredRankState> out;
  if (!*has) return out;
  sql::Stmt q(db, "SELECT rank, time, stalled, process, flight FROM rank_states WHERE run = ?1 ORDER BY rank");
  q.bind(1, run);
  Status s = q.each_row([&] {
    StoredRankState st;
    st.rank = static_cast<int>(q.int64(0));
    st.time = q.real(1);
    st.stalled = q.int64(2) != 0;
    st.process = q.text(3);
    const nlohmann::json j = nlohmann::json::parse(q.text(4), nullptr, false);
    if (j.is_object()) {
      Result<FlightState> f = flight_state_from_json(j);
      if (f) st.flight = std::move(*f);
    }
    out.push_back(std::move(st));
  });
  if (!s) return s.error();
  return out;
}

Result<std::optional<double>> follow_beat(RunStore& store, RunId run) {
  sqlite3* db = store.handle();
  Result<bool> has = has_tables(db);
  if (!has) return has.error();
  if (!*has) return std::optional<double>();
  sql::Stmt q(db, "SELECT time FROM follow_beats WHERE run = ?1");
  q.bind(1, run);
  return q.first([&] { return q.real(0); });
}

Status forget_rank_states(sqlite3* db, RunId run) {
  Result<bool> has = has_tables(db);
  if (!has) return has.error();
  if (!*has) return Status::Ok();
  for (const char* table : {"rank_states", "follow_beats"}) {
    sql::Stmt del(db, std::string("DELETE FROM ") + table + " WHERE run = ?1");
    if (Status s = del.bind(1, run).run(); !s) return s;
  }
  return Status::Ok();
}

Result<DiagnosisSource> diagnosis_source(RunStore& store, RunId run, double now, int recent_steps) {
  Result<RunInfo> info = store.get_run(run);
  if (!info) return info.error();
  DiagnosisSource out;
  out.status = info->summary.status;
  DiagnosisInput& in = out.input;
  in.now = now;
  in.started = info->summary.created;
  if (!info->summary.shape) {
    return Error{"run", std::to_string(run), "has no mesh shape in its config: nothing to diagnose"};
  }
  in.shape = *info->summary.shape;

  Result<std::vector<RankInfo>> ranks = store.ranks(run);
  if (!ranks) return ranks.error();
  std::map<int, RankObservation> obs;
  int on_node0 = 0;
  for (const RankInfo& r : *ranks) {
    RankObservation o;
    o.rank = r.rank;
    o.node = r.node;
    o.host = r.host;
    o.pid = r.pid;
    if (!r.status.empty()) o.ended = r.status + (r.reason.empty() ? "" : ": " + r.reason);
    if (r.node == 0) ++on_node0;
    obs[r.rank] = std::move(o);
  }
  const int64_t world = in.shape.world_size();
  in.ranks_per_node = on_node0 > 0 ? on_node0 : static_cast<int>(std::max<int64_t>(1, world));
  for (int r = 0; r < world; ++r) {
    if (!obs.count(r)) {
      RankObservation o;
      o.rank = r;
      o.node = r / in.ranks_per_node;
      obs[r] = std::move(o);
    }
  }

  sqlite3* db = store.handle();
  {
    sql::Stmt q(db, "SELECT rank, max(step), time FROM steps WHERE run = ?1 GROUP BY rank");
    q.bind(1, run);
    Status s = q.each_row([&] {
      auto it = obs.find(static_cast<int>(q.int64(0)));
      if (it == obs.end()) return;
      it->second.last_step = q.int64(1);
      it->second.last_step_time = q.real(2);
    });
    if (!s) return s.error();
  }
  int64_t last_step = -1;
  for (const auto& [rank, o] : obs) last_step = std::max(last_step, o.last_step);
  if (last_step >= 0) {
    std::string cols = "rank, v_step_s, v_compute_s, v_cpu_s";
    for (Axis a : kAxes) cols += ", v_comm_s_" + std::string(axis_name(a));
    sql::Stmt q(db, "SELECT " + cols + " FROM steps WHERE run = ?1 AND step > ?2 ORDER BY rank, step");
    q.bind(1, run).bind(2, last_step - recent_steps);
    struct Acc {
      std::vector<double> step, compute, cpu;
      bool cpu_everywhere = true;  // every step holds cpu_s (records of older meshtrains do not)
      AxisArray<std::vector<double>> comm;
    };
    std::map<int, Acc> acc;
    Status s = q.each_row([&] {
      if (q.is_null(1) || q.is_null(2)) return;
      Acc& a = acc[static_cast<int>(q.int64(0))];
      a.step.push_back(q.real(1));
      a.compute.push_back(q.real(2));
      if (q.is_null(3)) a.cpu_everywhere = false;
      else a.cpu.push_back(q.real(3));
      int col = 4;
      for (Axis ax : kAxes) a.comm[ax].push_back(q.is_null(col) ? 0.0 : q.real(col)), ++col;
    });
    if (!s) return s.error();
    for (auto& [rank, a] : acc) {
      RankTiming t;
      t.rank = rank;
      t.steps = static_cast<int>(a.step.size());
      t.step_s = median(a.step);
      t.compute_s = median(a.compute);
      t.step_mean_s = mean(a.step);
      for (Axis ax : kAxes) t.comm_mean_s[ax] = mean(a.comm[ax]);
      if (a.cpu_everywhere && !a.cpu.empty()) t.cpu_mean_s = mean(a.cpu);
      for (Axis ax : kAxes) t.comm_s[ax] = median(a.comm[ax]);
      in.timings.push_back(t);
    }
  }

  Result<std::vector<StoredRankState>> states = rank_states(store, run);
  if (!states) return states.error();
  for (StoredRankState& st : *states) {
    auto it = obs.find(st.rank);
    if (it == obs.end()) continue;
    it->second.process = st.process;
    if (st.stalled) {
      it->second.stalled = true;
      it->second.flight = std::move(st.flight);
    }
  }
  Result<std::optional<double>> beat = follow_beat(store, run);
  if (!beat) return beat.error();
  out.follow_beat = *beat;
  for (auto& [rank, o] : obs) in.ranks.push_back(std::move(o));
  return out;
}

nlohmann::json RunHealth::to_json(RunId run) const {
  nlohmann::json j = diagnosis.to_json();
  j["run"] = run;
  j["status"] = status;
  j["follower"] = follower_age_s ? nlohmann::json(*follower_age_s) : nlohmann::json(nullptr);
  return j;
}

Result<RunHealth> run_health(RunStore& store, RunId run, double now, std::optional<double> hang_after_s) {
  Result<DiagnosisSource> src = diagnosis_source(store, run, now);
  if (!src) return src.error();
  src->input.hang_after_s = hang_after_s;
  RunHealth out;
  out.status = src->status;
  if (src->follow_beat) out.follower_age_s = now - *src->follow_beat;
  if (src->status == kStatusRunning || src->status == kStatusCreated) {
    out.diagnosis = diagnose(src->input);
    // A follower writes its beat every ~2 s: older than that, what the store holds may be stale.
    constexpr double kFollowerQuietS = 10;
    if (!out.follower_age_s || *out.follower_age_s > kFollowerQuietS) {
      out.diagnosis.notes.push_back(
          out.follower_age_s ? "no follower has written for " + duration_words(*out.follower_age_s) +
                                   ": the ranks' states may be old (`meshwork attach RUN` follows it again)"
                             : "no follower has written the ranks' states: `meshwork attach RUN` follows it");
    }
  } else {
    Result<RunInfo> info = store.get_run(run);
    out.diagnosis = diagnose_ended(src->input, src->status, info ? info->summary.exit_reason : std::string());
  }
  return out;
}

Result<StepHeat> step_heat(RunStore& store, RunId run, int steps, int max_rows) {
  StepHeat h;
  sqlite3* db = store.handle();
  int64_t world = 0, last = -1;
  {
    sql::Stmt q(db, "SELECT coalesce(max(rank), -1) + 1, coalesce(max(step), -1) FROM steps WHERE run = ?1");
    q.bind(1, run);
    Result<std::optional<std::pair<int64_t, int64_t>>> r = q.first([&] { return std::make_pair(q.int64(0), q.int64(1)); });
    if (!r) return r.error();
    if (*r) std::tie(world, last) = **r;
  }
  if (world <= 0 || last < 0 || steps <= 0 || max_rows <= 0) return h;
  h.first_step = std::max<int64_t>(0, last - steps + 1);
  h.steps = static_cast<int>(last - h.first_step + 1);
  h.ranks_per_row = static_cast<int>((world + max_rows - 1) / max_rows);
  h.rows = static_cast<int>((world + h.ranks_per_row - 1) / h.ranks_per_row);
  const size_t cells = static_cast<size_t>(h.rows) * static_cast<size_t>(h.steps);
  h.step_s.assign(cells, std::numeric_limits<double>::quiet_NaN());
  h.wait_s.assign(cells, std::numeric_limits<double>::quiet_NaN());
  std::string wait = "0";
  for (Axis a : kAxes) wait += " + coalesce(v_comm_s_" + std::string(axis_name(a)) + ", 0)";
  sql::Stmt q(db, "SELECT rank / ?3, step, max(v_step_s), max(" + wait +
                      ") FROM steps WHERE run = ?1 AND step >= ?2 GROUP BY rank / ?3, step");
  q.bind(1, run).bind(2, h.first_step).bind(3, h.ranks_per_row);
  Status s = q.each_row([&] {
    const int64_t row = q.int64(0), col = q.int64(1) - h.first_step;
    if (row < 0 || row >= h.rows || col < 0 || col >= h.steps) return;
    const size_t i = static_cast<size_t>(row) * static_cast<size_t>(h.steps) + static_cast<size_t>(col);
    if (!q.is_null(2)) h.max_step_s = std::max(h.max_step_s, h.step_s[i] = q.real(2));
    if (!q.is_null(3)) h.max_wait_s = std::max(h.max_wait_s, h.wait_s[i] = q.real(3));
  });
  if (!s) return s.error();
  return h;
}

}  // namespace meshwork::store
