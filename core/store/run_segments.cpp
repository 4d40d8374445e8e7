#include "core/store/run_segments.h"

#include "core/mesh_json.h"
#include "core/store/sqlite.h"

namespace meshwork::store {

namespace {

constexpr const char* kTableSql =
    "CREATE TABLE IF NOT EXISTS run_segments(run INTEGER NOT NULL, segment INTEGER NOT NULL,"
    " from_step INTEGER NOT NULL, mesh TEXT NOT NULL, world INTEGER NOT NULL, hosts TEXT NOT NULL,"
    " cause TEXT NOT NULL, time REAL NOT NULL, PRIMARY KEY(run, segment)) WITHOUT ROWID;";

Result<bool> has_table(sqlite3* db) {
  sql::Stmt q(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'run_segments'");
  Result<std::optional<int64_t>> n = q.first([&] { return q.int64(0); });
  if (!n) return n.error();
  return n->value_or(0) > 0;
}

Status insert(sqlite3* db, RunId run, const RunSegment& s) {
  sql::Stmt put(db, "INSERT INTO run_segments(run, segment, from_step, mesh, world, hosts, cause, time)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
  if (!put.ok()) return put.error();
  put.bind(1, run).bind(2, s.segment).bind(3, s.from_step).bind(4, to_json(s.mesh).dump()).bind(5, s.world);
  put.bind(6, nlohmann::json(s.hosts).dump()).bind(7, s.cause).bind(8, s.time);
  return put.run();
}

Result<std::vector<RunSegment>> read(sqlite3* db, RunId run) {
  std::vector<RunSegment> out;
  sql::Stmt q(db, "SELECT segment, from_step, mesh, world, hosts, cause, time FROM run_segments"
                  " WHERE run = ?1 ORDER BY segment");
  q.bind(1, run);
  Status s = q.each_row([&] {
    RunSegment seg;
    seg.segment = static_cast<int>(q.int64(0));
    seg.from_step = q.int64(1);
    auto mesh = mesh_shape_from_json(nlohmann::json::parse(q.text(2), nullptr, false));
    if (mesh) seg.mesh = *mesh;
    seg.world = static_cast<int>(q.int64(3));
    const nlohmann::json hosts = nlohmann::json::parse(q.text(4), nullptr, false);
    if (hosts.is_array())
      for (const auto& h : hosts)
        if (h.is_string()) seg.hosts.push_back(h.get<std::string>());
    seg.cause = q.text(5);
    seg.time = q.real(6);
    out.push_back(std::move(seg));
  });
  if (!s) return s.error();
  return out;
}

}  // namespace

Result<RunSegment> begin_segment(RunStore& store, RunId run, int64_t from_step, const MeshShape& mesh,
                                 const std::vector<std::string>& hosts, std::string cause, double time) {
  if (from_step < 1) return Error{"from_step", std::to_string(from_step), "a step >= 1"};
  Result<RunInfo> info = store.get_run(run);
  if (!info) return info.error();
  sqlite3* db = store.handle();
  if (Status s = sql::exec(db, kTableSql); !s) return s.error();
  sql::Transaction tx(db);
  if (!tx.begun()) return tx.begun().error();
  Result<std::vector<RunSegment>> existing = read(db, run);
  if (!existing) return existing.error();
  if (existing->empty()) {
    RunSegment first;
    first.segment = 0;
    first.from_step = 1;
    if (auto m = info->config.find("mesh"); m != info->config.end()) {
      auto shape = mesh_shape_from_json(*m);
      if (shape) first.mesh = *shape;
    }
    first.world = info->summary.world;
    if (auto nodes = info->config.find("cluster"); nodes != info->config.end() && nodes->is_object())
      for (const auto& n : nodes->value("nodes", nlohmann::json::array()))
        if (n.is_object() && n.contains("host") && n["host"].is_string()) first.hosts.push_back(n["host"]);
    first.cause = "launched";
    first.time = info->summary.created;
    if (Status s = insert(db, run, first); !s) return s.error();
    existing->push_back(first);
  }
  const RunSegment& last = existing->back();
  if (from_step < last.from_step)
    return Error{"from_step", std::to_string(from_step),
                 "at least segment " + std::to_string(last.segment) + "'s first step (" +
                     std::to_string(last.from_step) + ")"};
  RunSegment seg;
  seg.segment = last.segment + 1;
  seg.from_step = from_step;
  seg.mesh = mesh;
  seg.world = static_cast<int>(mesh.world_size());
  seg.hosts = hosts;
  seg.cause = std::move(cause);
  seg.time = time;
  if (Status s = insert(db, run, seg); !s) return s.error();
  if (Status s = tx.commit(); !s) return s.error();
  return seg;
}

Result<std::vector<RunSegment>> run_segments(RunStore& store, RunId run) {
  sqlite3* db = store.handle();
  Result<bool> has = has_table(db);
  if (!has) return has.error();
  if (!*has) return std::vector<RunSegment>{};
  return read(db, run);
}

Status set_run_cluster(RunStore& store, RunId run, const nlohmann::json& cluster) {
  sql::Stmt put(store.handle(), "UPDATE runs SET cluster = ?2 WHERE id = ?1");
  if (!put.ok()) return put.error();
  if (Status s = put.bind(1, run).bind(2, cluster.dump()).run(); !s) return s;
  if (sqlite3_changes(store.handle()) != 1) return Error{"run", std::to_string(run), "a run in the store"};
  return Status::Ok();
}

Status forget_run_segments(sqlite3* db, RunId run) {
  Result<bool> has = has_table(db);
  if (!has) return has.error();
  if (!*has) return Status::Ok();
  sql::Stmt del(db, "DELETE FROM run_segments WHERE run = ?1");
  return del.bind(1, run).run();
}

}  // namespace meshwork::store
