// The fifth axis: pp in the mesh (layouts derived by hand from
// torch.distributed.DeviceMesh(arange(N).reshape(pp, dp_replicate, dp_shard, cp, tp))), the
// stage cut, the micro-batches in flight and the bubble of each schedule, the pp rules, and the
// run config / flags round trip with old files unchanged.
#include <gtest/gtest.h>

#include <numeric>

#include "core/mesh.h"
#include "core/mesh_json.h"
#include "core/pipeline.h"
#include "core/run_config.h"
#include "core/run_config_flags.h"
#include "core/validation.h"

using namespace meshwork;
using Groups = std::vector<std::vector<int>>;

namespace {

ModelSpec llama_like(int64_t layers, bool tied = false) {
  ModelSpec m;
  m.name = "test";
  m.architecture = "llama";
  m.hidden_size = 64;
  m.head_dim = 16;
  m.num_attention_heads = 4;
  m.num_key_value_heads = 4;
  m.intermediate_size = 128;
  m.vocab_size = 256;
  m.num_hidden_layers = layers;
  m.max_position_embeddings = 4096;
  m.tie_word_embeddings = tied;
  return m;
}

bool has(const ShapeReport& r, Severity level, const std::string& field) {
  for (const auto& d : r.diagnostics)
    if (d.level == level && d.field == field) return true;
  return false;
}

std::string message(const ShapeReport& r, const std::string& field) {
  for (const auto& d : r.diagnostics)
    if (d.field == field) return d.message;
  return "";
}

}  // namespace

TEST(PipelineMesh, StagesAreBlocksOfConsecutiveRanksAndTheOtherGroupsStayInside) {
  // pp 2 x dp_shard 2 x tp 2 = 8 ranks: reshape(2, 1, 2, 1, 2).
  auto m = DeviceMesh::create(MeshShape{1, 2, 1, 2, 2}, 4);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->groups(GroupKind::pp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m->groups(GroupKind::tp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m->groups(GroupKind::dp_shard), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m->coord_of(6), (MeshCoord{0, 1, 0, 0, 1}));
  EXPECT_EQ(m->rank_of(MeshCoord{0, 1, 0, 1, 1}), 7);
  EXPECT_EQ(m->group_rank(5, GroupKind::pp), 1);
  // 4 ranks per node: each stage is one node, so pp crosses nodes and nothing else does.
  EXPECT_TRUE(m->any_group_crosses_nodes(GroupKind::pp));
  EXPECT_FALSE(m->any_group_crosses_nodes(GroupKind::dp_shard));
  EXPECT_FALSE(m->any_group_crosses_nodes(GroupKind::tp));
  EXPECT_EQ(m->shape().world_size(), 8);
}

TEST(PipelineMesh, WithoutStagesTheFourAxisMeshIsUnchanged) {
  auto m = DeviceMesh::create(MeshShape{2, 2, 1, 2}, 8);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->groups(GroupKind::dp_replicate), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m->groups(GroupKind::pp), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(MeshShape(2, 2, 1, 2).to_string(), "dp_replicate=2 dp_shard=2 cp=1 tp=2");
  EXPECT_EQ(MeshShape(2, 2, 1, 2).compact(), "2x2x1x2");
  EXPECT_EQ(MeshShape(1, 2, 1, 2, 4).to_string(), "pp=4 dp_replicate=1 dp_shard=2 cp=1 tp=2");
  EXPECT_EQ(MeshShape(1, 2, 1, 2, 4).compact(), "pp4:1x2x1x2");
}

TEST(PipelineMesh, JsonWritesPpOnlyWhenItIsNotOneAndOldObjectsReadAsOneStage) {
  EXPECT_FALSE(to_json(MeshShape{1, 2, 1, 2}).contains("pp"));
  EXPECT_EQ(to_json(MeshShape(1, 2, 1, 2, 4))["pp"], 4);
  auto old = mesh_shape_from_json(nlohmann::json{{"dp_replicate", 1}, {"dp_shard", 2}, {"cp", 1}, {"tp", 2}});
  ASSERT_TRUE(old.ok());
  EXPECT_EQ((*old)[Axis::pp], 1);
  auto back = mesh_shape_from_json(to_json(MeshShape(1, 2, 1, 2, 4)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, MeshShape(1, 2, 1, 2, 4));
  auto bad = mesh_shape_from_json(nlohmann::json{{"pp", 0}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "mesh.pp");
  // -1 fills pp like any other axis.
  auto filled = resolve_shape(MeshShape(1, 2, 1, 1, -1), 8);
  ASSERT_TRUE(filled.ok());
  EXPECT_EQ((*filled)[Axis::pp], 4);
}

TEST(PipelineCut, EveryLayerOnceInOrderAndTheHeadLightensTheLastChunk) {
  const ModelSpec m = llama_like(16);
  for (int pp : {1, 2, 4}) {
    for (int v : {1, 2}) {
      const auto chunks = pipeline_cut(m, 256, pp, v);
      ASSERT_EQ(chunks.size(), static_cast<size_t>(pp * v));
      int next = 0;
      for (size_t i = 0; i < chunks.size(); ++i) {
        EXPECT_EQ(chunks[i].first_layer, next);
        EXPECT_GE(chunks[i].num_layers, 1);
        EXPECT_EQ(chunks[i].rank, static_cast<int>(i) % pp);
        EXPECT_EQ(chunks[i].embedding, i == 0);
        EXPECT_EQ(chunks[i].head, i + 1 == chunks.size());
        next += chunks[i].num_layers;
      }
      EXPECT_EQ(next, 16);
    }
  }
  // vocab 256 x h 64 = 16384 multiply-adds per token for the head; a layer is
  // 4*64*64 + 3*64*128 + 2*64 = 41088 weights + 256*64 = 16384 attention: the head is ~0.28 of a
  // layer, so 16 layers over 4 stages stay 4/4/4/4 (moving a layer off the last stage would give
  // another stage 5).
  auto four = pipeline_cut(m, 256, 4, 1);
  EXPECT_EQ(four[3].num_layers, 4);
  // A head worth several layers (vocab 32768): the last stage takes fewer layers.
  ModelSpec big_vocab = llama_like(16);
  big_vocab.vocab_size = 32768;
  auto cut = pipeline_cut(big_vocab, 256, 4, 1);
  EXPECT_LT(cut[3].num_layers, cut[0].num_layers);
  double worst = 0;
  for (const auto& c : cut) worst = std::max(worst, c.cost);
  // No other cut with the head on the last chunk does better: brute force over the last count.
  const PipelineCosts pc = pipeline_costs(big_vocab, 256);
  for (int last = 1; last <= 13; ++last) {
    const int rest = 16 - last;
    const double other = ((rest + 2) / 3) * pc.layer;
    EXPECT_LE(worst, std::max(other, last * pc.layer + pc.head) * (1 + 1e-12)) << last;
  }
}

TEST(PipelineSchedule, InFlightMicroBatchesOfEachSchedule) {
  // gpipe holds every micro-batch; 1f1b stage r holds pp - r (at most M).
  EXPECT_EQ(pipeline_in_flight(PipelineSchedule::gpipe, 4, 1, 8, 0), 8);
  EXPECT_EQ(pipeline_in_flight(PipelineSchedule::one_f_one_b, 4, 1, 8, 0), 4);
  EXPECT_EQ(pipeline_in_flight(PipelineSchedule::one_f_one_b, 4, 1, 8, 3), 1);
  EXPECT_EQ(pipeline_in_flight(PipelineSchedule::one_f_one_b, 4, 1, 2, 0), 2);
  // Interleaved (Megatron's warm-up 2 (pp - r - 1) + (V - 1) pp, plus the one in steady state):
  // pp 4, V 2, rank 0: 6 + 4 + 1 = 11 chunk-micro-batches of 1/V of the rank's layers, i.e.
  // 5.5 micro-batches' worth against 1f1b's 4: (1 + (pp - 1) / (pp V)) times more, minus 1/(pp V).
  EXPECT_EQ(pipeline_in_flight(PipelineSchedule::interleaved_1f1b, 4, 2, 8, 0), 11);
  EXPECT_EQ(pipeline_in_flight(PipelineSchedule::interleaved_1f1b, 4, 2, 8, 3), 5);
  EXPECT_EQ(pipeline_in_flight(PipelineSchedule::interleaved_1f1b, 4, 2, 2, 0), 4);  // M V caps it
}

TEST(PipelineSchedule, BubbleFractionShrinksWithMicroBatchesAndVirtualStages) {
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(PipelineSchedule::gpipe, 1, 1, 8), 0.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(PipelineSchedule::gpipe, 4, 1, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(PipelineSchedule::one_f_one_b, 4, 1, 8), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(PipelineSchedule::interleaved_1f1b, 4, 2, 8), 3.0 / 19.0);
  EXPECT_DOUBLE_EQ(pipeline_bubble_fraction(PipelineSchedule::one_f_one_b, 2, 1, 2), 1.0 / 3.0);
}

TEST(PipelineValidation, RulesNameTheFieldTheValueAndWhatIsAllowed) {
  const ModelSpec m = llama_like(4);
  ShapeQuery q;
  q.model = m;
  q.placement.world_size = 8;
  q.placement.ranks_per_node = 8;
  q.training.seq_len = 64;
  q.training.micro_batch = 1;

  // 1f1b with fewer micro-batches than stages: global 4 over dp_shard 2 = 2 micro-batches < pp 4.
  q.shape = MeshShape(1, 2, 1, 1, 4);
  q.training.global_batch = 4;
  ShapeReport r = validate_shape(q);
  EXPECT_TRUE(has(r, Severity::error, "global_batch"));
  EXPECT_NE(message(r, "global_batch").find("fewer than pp = 4"), std::string::npos) << message(r, "global_batch");
  q.training.global_batch = 8;
  EXPECT_TRUE(validate_shape(q).ok());
  // gpipe runs it, with a warning.
  q.training.global_batch = 4;
  q.training.pp_schedule = PipelineSchedule::gpipe;
  r = validate_shape(q);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(has(r, Severity::warning, "global_batch"));
  // Interleaved: V >= 2, layers >= pp V, micro-batches a multiple of pp.
  q.training.pp_schedule = PipelineSchedule::interleaved_1f1b;
  q.training.global_batch = 8;
  r = validate_shape(q);
  EXPECT_TRUE(has(r, Severity::error, "pp_virtual_stages"));
  q.training.pp_virtual_stages = 2;  // 4 stages x 2 chunks > 4 layers
  r = validate_shape(q);
  EXPECT_TRUE(has(r, Severity::error, "pp"));
  EXPECT_NE(message(r, "pp").find("num_hidden_layers (4)"), std::string::npos) << message(r, "pp");
  const ModelSpec deep = llama_like(8);
  q.model = deep;
  EXPECT_TRUE(validate_shape(q).ok());
  q.training.global_batch = 12;  // 6 micro-batches, not a multiple of 4
  EXPECT_TRUE(has(validate_shape(q), Severity::error, "global_batch"));
  // V != 1 without interleaving.
  q.training.global_batch = 8;
  q.training.pp_schedule = PipelineSchedule::one_f_one_b;
  EXPECT_TRUE(has(validate_shape(q), Severity::error, "pp_virtual_stages"));
  // Tied embeddings cannot be cut across stages.
  q.training.pp_virtual_stages = 1;
  const ModelSpec tied = llama_like(8, true);
  q.model = tied;
  EXPECT_TRUE(has(validate_shape(q), Severity::error, "pp"));
}

TEST(PipelineRunConfig, FieldsRoundTripAndAConfigWithoutStagesIsWrittenAsBefore) {
  RunConfig c;
  const nlohmann::json plain = to_json(c);
  EXPECT_FALSE(plain["mesh"].contains("pp"));
  EXPECT_FALSE(plain["training"].contains("pp_schedule"));
  EXPECT_FALSE(plain["training"].contains("pp_virtual_stages"));
  for (const std::string& a : run_config_to_flags(c)) EXPECT_EQ(a.rfind("--pp", 0), std::string::npos) << a;

  c.mesh = MeshShape(1, 2, 1, 1, 4);
  c.training.pp_schedule = PipelineSchedule::interleaved_1f1b;
  c.training.pp_virtual_stages = 2;
  auto back = run_config_from_json(to_json(c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->mesh, c.mesh);
  EXPECT_EQ(back->training, c.training);

  // Flags: the config's flag form reads back to the same config.
  RunConfig from_flags;
  const std::vector<std::string> args = run_config_to_flags(c);
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const RunConfigFlag* f = find_run_config_flag(args[i]);
    ASSERT_NE(f, nullptr) << args[i];
    ASSERT_TRUE(f->apply(from_flags, args[i + 1]).ok()) << args[i] << " " << args[i + 1];
  }
  EXPECT_EQ(from_flags.mesh, c.mesh);
  EXPECT_EQ(from_flags.training.pp_schedule, c.training.pp_schedule);
  EXPECT_EQ(from_flags.training.pp_virtual_stages, 2);

  auto bad = run_config_from_json(nlohmann::json{{"training", {{"pp_schedule", "zigzag"}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "training.pp_schedule");
  EXPECT_NE(bad.error().allowed.find("gpipe, 1f1b or interleaved-1f1b"), std::string::npos) << bad.error().allowed;
}
