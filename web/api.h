// The web view's JSON API (docs/web.md): a GET path and its query parameters in, a status and a
// JSON body out. No HTTP and no Qt here: the server (web/server.h) only moves bytes, so every rule
// of the API -- which ids, which ranges, how many points -- is tested on its own
// (tests/web/api_test.cpp). The answers are built from core's one-read loaders
// (store::load_run_frame, store::load_compare_frame), the same data the workbench draws.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/store/compare_frame.h"
#include "core/store/rank_states.h"
#include "core/store/run_observations.h"
#include "core/store/run_store.h"

namespace meshwork::web {

using Params = std::map<std::string, std::string, std::less<>>;

struct ApiReply {
  int status = 200;  // 200, or 400 / 404 / 500 with {"error": message}
  nlohmann::json body = nlohmann::json::object();
};

// Bounds on what one request may ask for (docs/web.md "Bounds").
inline constexpr int kMinPixels = 16;
inline constexpr int kMaxPixels = 4096;
inline constexpr int kDefaultPixels = 800;
inline constexpr size_t kMaxCompareRuns = 10;
inline constexpr size_t kMaxKeyLength = 64;
inline constexpr int kMaxLayoutRanks = 1024;  // the mesh drawing lists at most this many ranks
inline constexpr size_t kMaxProblems = 50;

class Api {
 public:
  explicit Api(std::unique_ptr<store::RunStore> store);

  // `path` is the part after "/api" ("/runs", "/runs/3/frame", "/compare").
  ApiReply get(std::string_view path, const Params& params);

  // For the live updates: every run's version (store::run_version) and one for the whole list.
  struct Versions {
    int64_t list = 0;
    std::map<store::RunId, int64_t> runs;
    std::map<store::RunId, std::string> status;
    std::map<store::RunId, int64_t> steps;
  };
  Result<Versions> versions();
  // SQLite's data_version: changes when any other connection commits (a cheap "did anything
  // change at all" before reading the runs).
  int64_t data_version();

  store::RunStore* store() { return store_.get(); }

 private:
  ApiReply runs();
  ApiReply run(store::RunId id);
  ApiReply frame(store::RunId id, const Params& params);
  ApiReply series(store::RunId id, const Params& params);
  ApiReply compare(const Params& params);
  ApiReply prediction(store::RunId id);
  ApiReply health(store::RunId id, const Params& params);
  ApiReply expert_load(store::RunId id, const Params& params);

  std::unique_ptr<store::RunStore> store_;
  store::CompareCache cache_;
};

// The JSON of a run's summary as every page shows it (docs/web.md "RUN").
nlohmann::json run_json(const store::RunSummary& s);

// The body of GET /api/runs/ID/prediction for a prediction store::predict_run made (docs/web.md
// "Prediction"): basis, calibrated, fitted_runs, predicted / measured {step_s, compute_s,
// comm_s: {axis: s}} (every axis) and error {step_s, compute_s, comm_s} ((predicted - measured)
// / measured; null where nothing was measured).
nlohmann::json prediction_json(const store::RunPrediction& p);

}  // namespace meshwork::web
