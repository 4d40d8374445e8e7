// Schema v6: a mixture of experts' routing (tokens per expert per sparse layer, the aux loss) is
// stored once per step whatever the rank count, comm_s.ep is a series like every axis's, and a
// real version-5 file written by the Meshwork before v6 opens as v6 with every row kept.
// data/moe-run-rank{0,1}.jsonl are a real meshtrain run's metrics (a Qwen3-MoE of 8 experts,
// sparse layers 0, 2 and 3, at dp_shard 2; data/README.md).
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/store/expert_load.h"
#include "core/store/schema.h"
#include "test_util.h"

namespace meshwork::store {
namespace {

using testing::count;
using testing::open_store;
using testing::start_line;
using testing::step_record;
using testing::TempDir;

const std::filesystem::path kData = MESHWORK_STORE_TEST_DATA;

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The step records of a real metrics file, as core parses them.
std::vector<StepRecord> steps_of(const std::filesystem::path& p) {
  std::vector<StepRecord> out;
  std::istringstream in(read_file(p));
  for (std::string line; std::getline(in, line);) {
    auto rec = parse_metrics_line(line);
    if (rec && std::holds_alternative<StepRecord>(*rec)) out.push_back(std::get<StepRecord>(*rec));
  }
  return out;
}

const ExpertLoad& layer_of(const StepRecord& r, int layer) {
  for (const ExpertLoad& l : r.moe->layers)
    if (l.layer == layer) return l;
  ADD_FAILURE() << "step " << r.step << " has no layer " << layer;
  return r.moe->layers.front();
}

// The routing of records[from...] (sparse layers 0, 2 and 3) made by core from the records
// themselves: what the store's reading must equal.
Result<MeasuredRouting> routing_of_records(const std::vector<StepRecord>& records, size_t from) {
  std::vector<RoutedStep> steps;
  for (size_t i = from; i < records.size(); ++i) {
    RoutedStep step;
    for (int layer : {0, 2, 3}) step.layers.push_back(layer_of(records[i], layer).tokens);
    steps.push_back(std::move(step));
  }
  return MeasuredRouting::make(std::move(steps), "records");
}

RunId import_moe_run(RunStore& store) {
  const RunId run = *store.create_run("moe", {}, {});
  auto counts = store.ingest_files(run, {{kData / "moe-run-rank0.jsonl", "rank0"}, {kData / "moe-run-rank1.jsonl", "rank1"}});
  EXPECT_TRUE(counts.ok()) << counts.error().message();
  return run;
}

TEST(StoreExpertLoad, RealRunStoresTheRoutingOncePerStepNotPerRank) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  ASSERT_TRUE(store);
  const RunId run = import_moe_run(*store);
  const std::vector<StepRecord> rank0 = steps_of(kData / "moe-run-rank0.jsonl");
  ASSERT_EQ(rank0.size(), 30u);
  ASSERT_TRUE(rank0[0].moe);
  // Two ranks wrote every step's counts; 30 steps x 3 sparse layers are stored once.
  EXPECT_EQ(count(*store, "SELECT count(*) FROM expert_load"), 30 * 3);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM moe_steps"), 30);
  EXPECT_EQ(*expert_load_layers(*store, run), (std::vector<int>{0, 2, 3}));

  auto map = expert_load_map(*store, run, 2, 100);
  ASSERT_TRUE(map.ok()) << map.error().message();
  EXPECT_EQ(map->layer, 2);
  EXPECT_EQ(map->experts, 8);
  EXPECT_EQ(map->steps, 30);
  ASSERT_EQ(map->columns.size(), 30u);
  double max_imbalance = 0;
  for (size_t i = 0; i < rank0.size(); ++i) {
    const ExpertLoadColumn& c = map->columns[i];
    const ExpertLoad& l = layer_of(rank0[i], 2);
    EXPECT_EQ(c.first_step, rank0[i].step);
    EXPECT_EQ(c.last_step, rank0[i].step);
    EXPECT_EQ(c.tokens, l.tokens) << "step " << i;
    EXPECT_DOUBLE_EQ(c.imbalance, l.imbalance) << "step " << i;
    ASSERT_TRUE(c.aux_loss);
    EXPECT_DOUBLE_EQ(*c.aux_loss, rank0[i].moe->aux_loss);
    max_imbalance = std::max(max_imbalance, l.imbalance);
  }
  EXPECT_DOUBLE_EQ(map->max_imbalance, max_imbalance);
  // A cell's colour: tokens over the step's mean (its expert's share of a fair load).
  const std::vector<double> ratios = load_ratios(map->columns[5].tokens);
  double sum = 0;
  for (double t : map->columns[5].tokens) sum += t;
  EXPECT_DOUBLE_EQ(ratios[3], map->columns[5].tokens[3] / (sum / 8));

  // The same lines again (a copied file, a resend) store nothing.
  ASSERT_TRUE(store->ingest_chunk(run, "again", 0, read_file(kData / "moe-run-rank1.jsonl")).ok());
  EXPECT_EQ(count(*store, "SELECT count(*) FROM expert_load"), 30 * 3);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM moe_steps"), 30);

  // Deleting the run deletes its routing.
  ASSERT_TRUE(store->delete_run(run).ok());
  EXPECT_EQ(count(*store, "SELECT count(*) FROM expert_load"), 0);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM moe_steps"), 0);
}

// What the planner reads (measured_routing): every stored step's layers, in order, equal to the
// counts the run's records carry, and a dense run is refused in words.
TEST(StoreExpertLoad, MeasuredRoutingIsEveryStoredStepAsTheRecordsCarryIt) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  ASSERT_TRUE(store);
  const RunId run = import_moe_run(*store);
  auto routing = measured_routing(*store, run);
  ASSERT_TRUE(routing.ok()) << routing.error().message();
  EXPECT_EQ(routing->source(), "run " + std::to_string(run) + " (moe)");
  EXPECT_EQ(routing->steps(), 30);
  EXPECT_EQ(routing->num_experts(), 8);
  EXPECT_EQ(routing->sparse_layers(), 3);
  // The same measurement made from the records as core parses them.
  auto from_records = routing_of_records(steps_of(kData / "moe-run-rank0.jsonl"), 0);
  ASSERT_TRUE(from_records.ok());
  for (int ep : {2, 4, 8}) {
    EXPECT_DOUBLE_EQ(routing->step_imbalance(ep), from_records->step_imbalance(ep)) << "ep " << ep;
    EXPECT_DOUBLE_EQ(routing->memory_imbalance(ep), from_records->memory_imbalance(ep)) << "ep " << ep;
    EXPECT_GT(routing->step_imbalance(ep), 1.0);
    EXPECT_GT(routing->memory_imbalance(ep), 1.0);  // a real router is never exactly even
  }

  const RunId dense = *store->create_run("dense", {}, {});
  ASSERT_TRUE(store->ingest_chunk(dense, "r0", 0, start_line(0, 1) + testing::step_line(0, 0, 2.0)).ok());
  auto none = measured_routing(*store, dense);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("run " + std::to_string(dense) + " (dense)"), std::string::npos);
  EXPECT_NE(none.error().message().find("stored none"), std::string::npos);
}

// The model of data/moe-run as transformers' config.json names it (8 experts; layer 1 dense).
ModelSpec moe_run_model(int experts = 8, const char* mlp_only_layers = "[1]") {
  auto spec = model_spec_from_json(nlohmann::json::parse(std::string(R"({"model_type": "qwen3_moe",
    "hidden_size": 48, "intermediate_size": 96, "moe_intermediate_size": 24, "num_hidden_layers": 4,
    "num_attention_heads": 6, "num_key_value_heads": 3, "head_dim": 8, "vocab_size": 250,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
    "num_experts_per_tok": 2, "norm_topk_prob": true, "decoder_sparse_step": 1, "router_aux_loss_coef": 0.001,
    "num_experts": )") + std::to_string(experts) + R"(, "mlp_only_layers": )" + mlp_only_layers + "}"),
                                   "moe8");
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  return *spec;
}

// A long run is read from its latest steps only: the routing of the last k records, whatever
// k, and a window of no steps is refused in words.
TEST(StoreExpertLoad, MeasuredRoutingReadsTheLatestStepsOnly) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  ASSERT_TRUE(store);
  const RunId run = import_moe_run(*store);
  const std::vector<StepRecord> records = steps_of(kData / "moe-run-rank0.jsonl");
  ASSERT_EQ(records.size(), 30u);
  for (int64_t k : {1, 7, 29, 30, 1000}) {
    auto routing = measured_routing(*store, run, k);
    ASSERT_TRUE(routing.ok()) << routing.error().message();
    const size_t n = std::min<size_t>(static_cast<size_t>(k), records.size());
    EXPECT_EQ(routing->steps(), static_cast<int64_t>(n)) << k;
    auto from_records = routing_of_records(records, records.size() - n);
    ASSERT_TRUE(from_records.ok());
    for (int ep : {2, 4, 8}) {
      EXPECT_DOUBLE_EQ(routing->step_imbalance(ep), from_records->step_imbalance(ep)) << "k " << k << ", ep " << ep;
      EXPECT_DOUBLE_EQ(routing->memory_imbalance(ep), from_records->memory_imbalance(ep)) << "k " << k << ", ep " << ep;
    }
  }
  auto none = measured_routing(*store, run, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("max_steps"), std::string::npos) << none.error().message();
}

// The runs the workbench's planner offers for a model: those whose stored routing has its expert
// and sparse-layer counts, newest first, as many as asked for; none for another model or a dense one.
TEST(StoreExpertLoad, RoutingRunsAreTheRunsOfTheModelNewestFirst) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  ASSERT_TRUE(store);
  const RunId older = import_moe_run(*store);
  const RunId dense = *store->create_run("dense", {}, {});
  ASSERT_TRUE(store->ingest_chunk(dense, "r0", 0, start_line(0, 1) + testing::step_line(0, 0, 2.0)).ok());
  const RunId newer = import_moe_run(*store);
  ASSERT_TRUE(store->rename_run(newer, "moe again").ok());

  auto both = routing_runs(*store, moe_run_model(), 10);
  ASSERT_TRUE(both.ok()) << both.error().message();
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[0].id, newer);
  EXPECT_EQ((*both)[0].name, "moe again");
  EXPECT_EQ((*both)[1].id, older);
  EXPECT_EQ((*both)[1].experts, 8);
  EXPECT_EQ((*both)[1].sparse_layers, 3);
  // Each one is a routing the planner takes for that model.
  for (const RoutingRun& r : *both) EXPECT_TRUE(measured_routing(*store, r.id)->check_matches(moe_run_model()).ok());

  auto one = routing_runs(*store, moe_run_model(), 1);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(one->front().id, newer);
  EXPECT_TRUE(routing_runs(*store, moe_run_model(16), 10)->empty());        // other expert count
  EXPECT_TRUE(routing_runs(*store, moe_run_model(8, "[]"), 10)->empty());   // 4 sparse layers, not 3
  ModelSpec dense_model = *load_model_spec("llama-3.2-1b");
  EXPECT_TRUE(routing_runs(*store, dense_model, 10)->empty());
}

TEST(StoreExpertLoad, MoreStepsThanColumnsMergeIntoEvenColumnsKeepingTheWorstStep) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  ASSERT_TRUE(store);
  const RunId run = import_moe_run(*store);
  const std::vector<StepRecord> rank0 = steps_of(kData / "moe-run-rank0.jsonl");
  auto map = expert_load_map(*store, run, 0, 7);
  ASSERT_TRUE(map.ok()) << map.error().message();
  ASSERT_EQ(map->columns.size(), 7u);
  EXPECT_EQ(map->columns.front().first_step, 0);
  EXPECT_EQ(map->columns.back().last_step, 29);
  for (size_t c = 0; c < map->columns.size(); ++c) {
    const ExpertLoadColumn& col = map->columns[c];
    if (c > 0) EXPECT_EQ(col.first_step, map->columns[c - 1].last_step + 1);
    std::vector<double> mean(8, 0.0);
    double worst = 0;
    for (int64_t s = col.first_step; s <= col.last_step; ++s) {
      const ExpertLoad& l = layer_of(rank0[static_cast<size_t>(s)], 0);
      for (size_t e = 0; e < 8; ++e) mean[e] += l.tokens[e] / static_cast<double>(col.last_step - col.first_step + 1);
      worst = std::max(worst, l.imbalance);
    }
    for (size_t e = 0; e < 8; ++e) EXPECT_NEAR(col.tokens[e], mean[e], 1e-9) << "column " << c;
    EXPECT_DOUBLE_EQ(col.imbalance, worst);
  }
  // A step range, and the refusal of no columns.
  auto part = expert_load_map(*store, run, 3, 100, 10, 14);
  ASSERT_TRUE(part.ok());
  ASSERT_EQ(part->columns.size(), 5u);
  EXPECT_EQ(part->columns[0].tokens, layer_of(rank0[10], 3).tokens);
  auto none = expert_load_map(*store, run, 3, 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("columns"), std::string::npos);
  // A layer without routing (the dense layer 1) and a dense run: nothing.
  EXPECT_TRUE(expert_load_map(*store, run, 1, 10)->columns.empty());
  const RunId dense = *store->create_run("dense", {}, {});
  ASSERT_TRUE(store->ingest_chunk(dense, "r0", 0, start_line(0, 1) + testing::step_line(0, 0, 2.0)).ok());
  EXPECT_TRUE(expert_load_layers(*store, dense)->empty());
}

TEST(StoreExpertLoad, CommEpIsASeriesOfExpertParallelRunsOnly) {
  TempDir dir;
  auto store = open_store(dir / "runs.db");
  ASSERT_TRUE(store);
  EXPECT_EQ(count(*store, "SELECT col FROM keys WHERE name = 'comm_s.ep'"), 16);
  const RunId ep = *store->create_run("ep", {}, {});
  std::string text = start_line(0, 2) + start_line(1, 2);
  for (int s = 0; s < 20; ++s)
    for (int rank : {0, 1}) {
      StepRecord r = step_record(rank, s, 3.0);
      r.comm_ep_s = 0.01 + 0.001 * s + 0.1 * rank;
      text += to_json_line(r) + "\n";
    }
  ASSERT_TRUE(store->ingest_chunk(ep, "all", 0, text).ok());
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics_v WHERE key = 'comm_s.ep'"), 40);
  SeriesQuery q;
  q.runs = {ep};
  q.key = "comm_s.ep";
  q.rank = 1;
  auto series = store->query_series(q);
  ASSERT_TRUE(series.ok()) << series.error().message();
  ASSERT_EQ((*series)[0].points.size(), 20u);
  EXPECT_DOUBLE_EQ((*series)[0].points[4].y, 0.01 + 0.004 + 0.1);
  q.rank = 0;
  q.aggregate = Aggregate::max;
  auto worst = store->query_series(q);
  ASSERT_TRUE(worst.ok());
  EXPECT_DOUBLE_EQ((*worst)[0].points[4].y, 0.01 + 0.004 + 0.1);
  // A run without ep has no such series.
  const RunId plain = *store->create_run("plain", {}, {});
  ASSERT_TRUE(store->ingest_chunk(plain, "r0", 0, start_line(0, 1) + testing::step_line(0, 0, 2.0)).ok());
  auto keys = store->keys(plain);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(std::find(keys->begin(), keys->end(), "comm_s.ep"), keys->end());
}

TEST(StoreExpertLoad, TokensBlobRoundTripsAndABrokenOneIsNamed) {
  const std::vector<double> tokens = {0, 1, 175, 3.5e9, 12};
  const std::string blob = pack_expert_tokens(tokens);
  EXPECT_EQ(blob.size(), 5u * 8u);
  EXPECT_EQ(*unpack_expert_tokens(blob), tokens);
  auto bad = unpack_expert_tokens(blob.substr(0, 13));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("13 bytes"), std::string::npos);
}

// tests/store/data/store_v5.db was written by the Meshwork before v6 (`meshwork runs import` of
// tests/ui/data/ddp-2x1.jsonl and of this MoE run; data/README.md); store_v5-run2.csv is that
// Meshwork's export of run 2. Opened now it is version 6, every row as it was.
TEST(StoreExpertLoad, Version5FileFromMeshworkOpensAsSixKeepingEveryRow) {
  TempDir dir;
  const auto path = dir / "runs.db";
  std::filesystem::copy_file(kData / "store_v5.db", path);
  int64_t points = 0, steps = 0, buckets = 0, aggs = 0, sources = 0, ranks = 0;
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    auto one = [&](const char* sql) {
      sqlite3_stmt* st = nullptr;
      EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK) << sql;
      int64_t v = -1;
      if (st && sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
      return v;
    };
    ASSERT_EQ(one("SELECT version FROM schema_version"), 5);
    EXPECT_EQ(one("SELECT count(*) FROM sqlite_master WHERE name = 'expert_load'"), 0);
    points = one("SELECT count(*) FROM metrics");
    steps = one("SELECT count(*) FROM steps");
    buckets = one("SELECT count(*) FROM buckets");
    aggs = one("SELECT count(*) FROM rank_agg");
    sources = one("SELECT count(*) FROM sources");
    ranks = one("SELECT count(*) FROM ranks");
    sqlite3_close(db);
  }
  ASSERT_EQ(points, 240 + 900);  // the two runs as imported
  auto store = open_store(path);
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM metrics"), points);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM steps"), steps);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM buckets"), buckets);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM rank_agg"), aggs);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM sources"), sources);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM ranks"), ranks);
  EXPECT_EQ(count(*store, "SELECT count(*) FROM pragma_table_info('steps') WHERE name = 'v_comm_s_ep'"), 1);
  std::ostringstream csv;
  ASSERT_TRUE(store->export_csv(2, csv).ok());
  EXPECT_EQ(csv.str(), read_file(kData / "store_v5-run2.csv"));
  // v5 kept no routing: the migrated runs have none; the same lines into a new run do.
  EXPECT_TRUE(expert_load_layers(*store, 2)->empty());
  const RunId again = import_moe_run(*store);
  EXPECT_EQ(*expert_load_layers(*store, again), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(expert_load_map(*store, again, 3, 50)->columns.size(), 30u);
}

}  // namespace
}  // namespace meshwork::store
