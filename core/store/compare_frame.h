// The data behind a comparison of runs (the workbench's Compare mode and the web view's
// /api/compare): 2-10 runs, one metric overlaid (x = step, tokens or wall time), each run's config
// and shape, and its mean time per step in each axis's collectives, loaded in one call;
// config_diff() is a pure function. Qt-free.
#pragma once

#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mesh.h"
#include "core/store/run_frame.h"
#include "core/store/run_store.h"

namespace meshwork::store {

struct DiffRow {
  std::string key;              // dotted path: "mesh.dp_shard", "training.lr"
  std::vector<std::string> values;  // one per run ("—" where a run has no such key)
  bool differs = false;
};
// Flattens every config to dotted keys (objects recurse; arrays and scalars are leaves, arrays as
// compact JSON) and lines them up. "name" is left out: runs are told apart by their names anyway.
std::vector<DiffRow> config_diff(const std::vector<nlohmann::json>& configs);

// Mean seconds per step in each axis's collectives, then compute, and the experts' all-to-all
// (mean over ranks per step).
// Exact (every step) for a run of at most kCommSampleSteps steps; a longer run is estimated from
// every step of kCommWindows evenly spaced windows (kCommSampleSteps steps in all): the store
// keeps no per-series sums, and reading every step of 8 runs x 1M steps takes seconds.
inline constexpr int64_t kCommSampleSteps = 2048;
inline constexpr int kCommWindows = 8;
struct CommStats {
  std::array<double, kBreakdownColumns> mean{};  // NaN: the run recorded none (absent, not 0)
  double ep_mean = 0;  // the experts' all-to-all ("comm_s.ep"); NaN without ep, as above
  int64_t sampled_steps = 0;  // steps read
  int64_t steps = 0;          // steps of the run (sampled_steps == steps: exact)
  bool exact() const { return sampled_steps >= steps; }
  bool recorded() const {  // any communication column at all
    for (double m : mean)
      if (!std::isnan(m)) return true;
    return false;
  }
};

// CommStats of `runs` (all stored up to `last_step`) over steps first_step..last_step, sampled as
// above: one query per key and window covers every run.
Status comm_means(RunStore* store, const std::vector<RunId>& runs, int64_t first_step, int64_t last_step,
                  std::vector<CommStats>& out);

struct CompareFrame {
  std::optional<Error> error;
  std::vector<RunSummary> runs;  // in the order asked
  std::vector<nlohmann::json> configs;
  std::vector<std::optional<MeshShape>> shapes;  // unset: not recorded (another tool's run)
  std::vector<Series> series;    // the metric, one per run
  std::vector<CommStats> comm;          // one per run
  double load_ms = 0;                   // the whole job, of which:
  double runs_ms = 0, series_ms = 0, comm_ms = 0;  // run infos, the metric, the comm bars
};

// What a finished run shows in Compare does not change: its info and comm means are kept
// (worker thread and GUI thread: locked), cleared when the store's runs change.
class CompareCache {
 public:
  struct Entry {
    RunInfo info;
    std::optional<CommStats> comm;
  };
  std::optional<Entry> get(RunId id);
  void put(RunId id, const Entry& e);
  void set_comm(RunId id, const CommStats& c);
  void clear();

 private:
  std::mutex mutex_;
  std::map<RunId, Entry> entries_;
};

struct CompareQuery {
  std::vector<RunId> runs;
  std::string key = "loss";
  XAxis x = XAxis::step;
  Aggregate aggregate = Aggregate::mean;  // none: rank 0
  std::optional<std::pair<double, double>> range;
  int pixels = 1000;
};

// `cache` may be null (every run read afresh).
std::shared_ptr<CompareFrame> load_compare_frame(RunStore* store, const CompareQuery& q,
                                                 CompareCache* cache = nullptr);

}  // namespace meshwork::store
