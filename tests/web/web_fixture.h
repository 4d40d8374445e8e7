// Runs for the web view's tests and bench/web.sh: stored the way a launch stores them (start,
// step and end records in meshtrain's own line format, through RunStore::ingest_chunk), with a
// loss that falls and wobbles so charts have something to draw.
#pragma once

#include <cmath>
#include <ctime>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/mesh.h"
#include "core/mesh_json.h"
#include "core/flight_record.h"
#include "core/metrics.h"
#include "core/store/rank_states.h"
#include "core/store/run_store.h"
#include "tests/store/test_util.h"

namespace meshwork::web::testing {

using store::testing::TempDir;  // one temporary directory per test (tests/store/test_util.h)

// A shape by its sizes, dp_replicate x dp_shard x cp x tp.
inline MeshShape shape(int dp_replicate, int dp_shard, int cp, int tp) {
  MeshShape m;
  m.set(Axis::dp_replicate, dp_replicate);
  m.set(Axis::dp_shard, dp_shard);
  m.set(Axis::cp, cp);
  m.set(Axis::tp, tp);
  return m;
}

struct RunSpec {
  std::string name = "run";
  MeshShape shape;          // world = product of the sizes
  int ranks_per_node = 2;
  double lr = 1e-3;         // config training.lr (what the config diff shows)
  double loss_scale = 1.0;  // runs differ in their curves
};

inline nlohmann::json config_of(const RunSpec& spec) {
  return {{"name", spec.name},
          {"model", "tiny"},
          {"mesh", to_json(spec.shape)},
          {"training", {{"lr", spec.lr}, {"steps", 1000}, {"device", "cpu"}}}};
}

inline StepRecord step_of(const RunSpec& spec, int rank, int64_t step) {
  StepRecord r;
  r.rank = rank;
  r.step = step;
  r.time = 1000.0 + 0.25 * static_cast<double>(step);
  r.loss = spec.loss_scale * (2.0 + 3.0 / (1.0 + 0.01 * static_cast<double>(step))) +
           0.05 * std::sin(static_cast<double>(step) * 0.7);
  r.lr = spec.lr;
  r.grad_norm = 0.5 + 0.1 * std::cos(static_cast<double>(step) * 0.3);
  r.tokens = 512;
  r.tokens_per_s = 4000 + 10 * rank;
  r.tflops = 1.5;
  r.mfu = 0.25;
  r.mem_bytes = (int64_t{1} << 30) + rank * (int64_t{1} << 24);
  r.mem_peak_bytes = (int64_t{3} << 29) + rank * (int64_t{1} << 24);
  // 10, 20, 30, 40 ms for dp_replicate, dp_shard, cp, tp (50 for pp) where the axis is used.
  const AxisArray<double> ms = AxisArray<double>::of(0.01, 0.02, 0.03, 0.04, 0.05);
  for (Axis a : kAxes) r.comm_s[a] = spec.shape.size(a) > 1 ? ms[a] : 0.0;
  r.compute_s = 0.1;
  r.step_s = 0.2;
  return r;
}

// Creates the run and stores the start records of every rank (status "running").
inline store::RunId create_run(store::RunStore& s, const RunSpec& spec) {
  const nlohmann::json config = config_of(spec);
  const nlohmann::json cluster = {
      {"probes", nlohmann::json::array({{{"host", "node0"}, {"mem_total_bytes", 64.0 * (1 << 30)}},
                                        {{"host", "node1"}, {"mem_total_bytes", 64.0 * (1 << 30)}}})}};
  auto id = s.create_run(spec.name, config, cluster);
  if (!id) return 0;
  const int world = static_cast<int>(spec.shape.world_size());
  for (int r = 0; r < world; ++r) {
    StartRecord st;
    st.rank = r;
    st.world = world;
    st.node = r / spec.ranks_per_node;
    st.host = "node" + std::to_string(st.node);
    st.pid = 4000 + r;
    st.time = 999;
    st.mesh = spec.shape;
    st.config = config;
    const std::string line = to_json_line(st) + "\n";
    if (!s.ingest_chunk(*id, "start-" + std::to_string(r), 0, line)) return 0;
  }
  return *id;
}

// Appends steps [first, last] of every rank; `offsets` keeps each rank's source offset.
inline bool add_steps(store::RunStore& s, store::RunId id, const RunSpec& spec, int64_t first, int64_t last,
                      std::vector<uint64_t>& offsets) {
  const int world = static_cast<int>(spec.shape.world_size());
  offsets.resize(static_cast<size_t>(world), 0);
  for (int r = 0; r < world; ++r) {
    std::string chunk;
    for (int64_t step = first; step <= last; ++step) chunk += to_json_line(step_of(spec, r, step)) + "\n";
    auto c = s.ingest_chunk(id, "metrics-rank" + std::to_string(r), offsets[static_cast<size_t>(r)], chunk);
    if (!c) return false;
    offsets[static_cast<size_t>(r)] = c->offset;
  }
  return true;
}

inline bool end_run(store::RunStore& s, store::RunId id, const RunSpec& spec, const std::string& status,
                    const std::string& reason, std::vector<uint64_t>& offsets) {
  const int world = static_cast<int>(spec.shape.world_size());
  offsets.resize(static_cast<size_t>(world), 0);
  for (int r = 0; r < world; ++r) {
    EndRecord e;
    e.rank = r;
    e.status = (r == world - 1) ? status : "ok";
    e.reason = (r == world - 1) ? reason : "";
    e.time = 5000;
    auto c = s.ingest_chunk(id, "metrics-rank" + std::to_string(r), offsets[static_cast<size_t>(r)],
                            to_json_line(e) + "\n");
    if (!c) return false;
    offsets[static_cast<size_t>(r)] = c->offset;
  }
  return true;
}

// A whole finished run of `steps` steps.
inline store::RunId finished_run(store::RunStore& s, const RunSpec& spec, int64_t steps,
                                 const std::string& status = "ok", const std::string& reason = "") {
  const store::RunId id = create_run(s, spec);
  std::vector<uint64_t> offsets;
  if (id == 0 || !add_steps(s, id, spec, 0, steps - 1, offsets) || !end_run(s, id, spec, status, reason, offsets))
    return 0;
  return id;
}

// A run of 1x2x1x2 on two nodes (ranks 0-1 on node0, 2-3 on node1) that hangs: its last step
// long ago, rank 1 waiting in all_gather on dp_shard #12 for rank 3 ({1, 3} is a dp_shard
// group), which is stopped in backward layer 1 and never entered it. The stall reports go
// through core/store/rank_states.h as the follower writes them, with its beat now.
inline store::RunId hung_run(store::RunStore& s, const std::string& name = "hung") {
  const RunSpec spec{name, shape(1, 2, 1, 2)};
  const store::RunId id = create_run(s, spec);
  std::vector<uint64_t> offsets;
  if (id == 0 || !add_steps(s, id, spec, 0, 5, offsets)) return 0;
  const double now = static_cast<double>(std::time(nullptr));
  const FlightGroup dp_shard{false, GroupKind::dp_shard};
  FlightState waiting;
  waiting.rank = 1;
  waiting.pid = 4001;
  waiting.step = 6;
  waiting.phase = FlightPhase::backward;
  waiting.layer = 0;
  FlightOp op;
  op.group = dp_shard;
  op.op = FlightOpKind::all_gather;
  op.seq = 12;
  op.bytes = 4096;
  op.enter = now - 100;
  waiting.current = op;
  waiting.last_seq = {{dp_shard, 12}};
  FlightState stopped;
  stopped.rank = 3;
  stopped.pid = 4003;
  stopped.step = 6;
  stopped.phase = FlightPhase::backward;
  stopped.layer = 1;
  stopped.activity = now - 101;
  stopped.last_seq = {{dp_shard, 11}};
  const Status put = store::put_rank_states(
      s, id, {{1, now, true, "running", waiting}, {3, now, true, "stopped", stopped}}, now);
  return put ? id : 0;
}

}  // namespace meshwork::web::testing
