// Every shape rule of core/validation.h, each with a passing and a failing case.
#include <gtest/gtest.h>

#include "core/run_config.h"
#include "core/parallel_layout.h"
#include "core/validation.h"

using namespace meshwork;

namespace {

ModelSpec spec(int64_t heads, int64_t kv, int64_t inter = 1024, int64_t vocab = 1024) {
  ModelSpec m;
  m.name = "test";
  m.architecture = "llama";
  m.hidden_size = heads * 16;
  m.head_dim = 16;
  m.num_attention_heads = heads;
  m.num_key_value_heads = kv;
  m.intermediate_size = inter;
  m.vocab_size = vocab;
  m.num_hidden_layers = 2;
  m.max_position_embeddings = 4096;
  return m;
}

ShapeQuery query(MeshShape shape, int64_t world) {
  ShapeQuery q;
  q.shape = shape;
  q.placement.world_size = world;
  q.placement.ranks_per_node = 8;
  return q;
}

bool has(const ShapeReport& r, Severity level, const std::string& field) {
  for (const auto& d : r.diagnostics)
    if (d.level == level && d.field == field) return true;
  return false;
}

}  // namespace

TEST(Validation, ProductMustEqualWorldSize) {
  EXPECT_TRUE(validate_shape(query({1, 4, 1, 2}, 8)).ok());
  ShapeReport r = validate_shape(query({1, 4, 1, 4}, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors()[0].field, "mesh");
  EXPECT_EQ(r.errors()[0].value, "1x4x1x4");
  EXPECT_NE(r.errors()[0].message.find("world size 8"), std::string::npos);
}

TEST(Validation, AutoAxisIsFilled) {
  ShapeReport r = validate_shape(query({1, -1, 1, 2}, 16));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.shape, (MeshShape{1, 8, 1, 2}));
  EXPECT_FALSE(validate_shape(query({1, -1, 1, 3}, 16)).ok());
  EXPECT_FALSE(validate_shape(query({-1, -1, 1, 2}, 16)).ok());
}

TEST(Validation, SizesAtLeastOne) {
  ShapeReport r = validate_shape(query({1, 0, 1, 8}, 8));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors()[0].field, "dp_shard");
  EXPECT_EQ(r.errors()[0].value, "0");
  EXPECT_TRUE(has(validate_shape(query({1, 8, 1, -2}, 8)), Severity::error, "tp"));
  EXPECT_TRUE(has(validate_shape(query({1, 1, 1, 1}, 0)), Severity::error, "world_size"));
}

TEST(Validation, TensorOrContextWithPureReplicationRefusedOnlyWhenTheTrainerCannot) {
  // Accelerate's rule, for a trainer that cannot replicate tp/cp pieces.
  ShapeQuery no_pure = query({2, 1, 1, 4}, 8);
  no_pure.trainer.tp_cp_with_pure_replication = false;
  ShapeReport tp = validate_shape(no_pure);
  ASSERT_FALSE(tp.ok());
  EXPECT_EQ(tp.errors()[0].field, "dp_shard");
  EXPECT_NE(tp.errors()[0].message.find("pure replication"), std::string::npos);
  no_pure.shape = {2, 1, 4, 1};
  EXPECT_FALSE(validate_shape(no_pure).ok());
  // With sharding (HSDP) or without replication, tp/cp are fine; pure replication alone too.
  no_pure.shape = {2, 2, 1, 2};
  EXPECT_TRUE(validate_shape(no_pure).ok());
  EXPECT_TRUE(validate_shape(query({1, 1, 1, 8}, 8)).ok());
  EXPECT_TRUE(validate_shape(query({8, 1, 1, 1}, 8)).ok());
  // meshtrain's rule set (the default): accepted, and marked with Accelerate's reason.
  ShapeReport meshtrain = validate_shape(query({2, 1, 1, 4}, 8));
  EXPECT_TRUE(meshtrain.ok());
  EXPECT_FALSE(meshtrain.accelerate_refusal.empty());
  EXPECT_TRUE(validate_shape(query({2, 2, 1, 2}, 8)).accelerate_refusal.empty());
}

TEST(Validation, HeadsDivisibleByTp) {
  ModelSpec m = spec(12, 12);
  ShapeQuery q = query({1, 2, 1, 4}, 8);
  q.model = m;
  EXPECT_TRUE(validate_shape(q).ok());
  ModelSpec odd = spec(10, 10);
  q.model = odd;
  ShapeReport r = validate_shape(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors()[0].field, "tp");
  EXPECT_EQ(r.errors()[0].value, "4");
  EXPECT_NE(r.errors()[0].message.find("num_attention_heads (10)"), std::string::npos);
}

TEST(Validation, KvHeadsDivisibleOrReplicated) {
  ModelSpec m = spec(32, 8);
  ShapeQuery q = query({1, 1, 1, 8}, 8);
  q.model = m;
  ShapeReport exact = validate_shape(q);
  EXPECT_TRUE(exact.ok());
  EXPECT_FALSE(exact.kv_replicated);
  EXPECT_TRUE(exact.warnings().empty());

  ModelSpec gqa = spec(32, 4);  // tp 8 > 4 kv heads, 8 % 4 == 0: replicate each kv head twice
  q.model = gqa;
  ShapeReport rep = validate_shape(q);
  EXPECT_TRUE(rep.ok());
  EXPECT_TRUE(rep.kv_replicated);
  ASSERT_EQ(rep.warnings().size(), 1u);
  EXPECT_EQ(rep.warnings()[0].field, "tp");
  EXPECT_NE(rep.warnings()[0].message.find("replicated on 2 tp ranks"), std::string::npos);

  ModelSpec three = spec(24, 3);  // tp 8 > 3 and 8 % 3 != 0
  q.model = three;
  EXPECT_TRUE(has(validate_shape(q), Severity::error, "tp"));
  ModelSpec six = spec(24, 6);  // tp 4 < 6 and 6 % 4 != 0
  ShapeQuery q4 = query({1, 2, 1, 4}, 8);
  q4.model = six;
  ShapeReport r6 = validate_shape(q4);
  ASSERT_FALSE(r6.ok());
  EXPECT_NE(r6.errors()[0].message.find("num_key_value_heads (6)"), std::string::npos);
}

TEST(Validation, IntermediateAndVocabDivisibleByTp) {
  ModelSpec m = spec(8, 8, /*inter=*/1004, /*vocab=*/1002);
  ShapeQuery q = query({1, 1, 1, 8}, 8);
  q.model = m;
  ShapeReport r = validate_shape(q);
  ASSERT_EQ(r.errors().size(), 2u);
  EXPECT_NE(r.errors()[0].message.find("intermediate_size (1004)"), std::string::npos);
  EXPECT_NE(r.errors()[1].message.find("vocab_size (1002)"), std::string::npos);
  q.trainer.vocab_parallel = false;
  EXPECT_EQ(validate_shape(q).errors().size(), 1u);
}

TEST(Validation, SeqLenForContextParallel) {
  ShapeQuery q = query({1, 2, 2, 2}, 8);
  q.training.seq_len = 16;  // 2*cp*tp = 8 divides 16
  EXPECT_TRUE(validate_shape(q).ok());
  q.training.seq_len = 12;
  ShapeReport r = validate_shape(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors()[0].text(),
            "seq_len: 12: must be a multiple of 2*cp*tp = 8 (load-balanced causal context "
            "parallel with sequence parallel)");
  ShapeQuery cp_only = query({1, 2, 4, 1}, 8);
  cp_only.training.seq_len = 12;  // 2*cp = 8 does not divide 12
  EXPECT_FALSE(validate_shape(cp_only).ok());
  cp_only.training.seq_len = 24;
  EXPECT_TRUE(validate_shape(cp_only).ok());
}

TEST(Validation, SeqLenForSequenceParallel) {
  ShapeQuery q = query({1, 2, 1, 4}, 8);
  q.training.seq_len = 10;
  ShapeReport r = validate_shape(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors()[0].field, "seq_len");
  EXPECT_NE(r.errors()[0].message.find("multiple of tp = 4"), std::string::npos);
  q.training.seq_len = 12;
  EXPECT_TRUE(validate_shape(q).ok());
}

TEST(Validation, SeqLenBeyondMaxPositionsWarns) {
  ModelSpec m = spec(8, 8);
  ShapeQuery q = query({1, 8, 1, 1}, 8);
  q.model = m;
  q.training.seq_len = 8192;
  ShapeReport r = validate_shape(q);
  EXPECT_TRUE(r.ok());
  EXPECT_TRUE(has(r, Severity::warning, "seq_len"));
}

TEST(Validation, GlobalBatchDivisibleByMicroBatchTimesDp) {
  ShapeQuery q = query({2, 2, 1, 2}, 8);
  q.training.micro_batch = 2;
  q.training.global_batch = 16;  // 2 * (2*2) = 8 per step, 2 accumulation steps
  ShapeReport ok = validate_shape(q);
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.grad_accum_steps, 2);
  q.training.global_batch = 12;
  ShapeReport r = validate_shape(q);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.errors()[0].text(),
            "global_batch: 12: must be a multiple of micro_batch*dp_replicate*dp_shard = 8");
  q.training.micro_batch = 0;
  EXPECT_TRUE(has(validate_shape(q), Severity::error, "micro_batch"));
}

TEST(Validation, TpGroupCrossingNodesWarns) {
  ShapeQuery q = query({1, 1, 1, 16}, 16);
  q.placement.ranks_per_node = 8;
  q.placement.links.inter_node_bytes_per_s = 50e9;
  ShapeReport r = validate_shape(q);
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.warnings().size(), 1u);
  EXPECT_EQ(r.warnings()[0].field, "tp");
  EXPECT_NE(r.warnings()[0].message.find("more than one node"), std::string::npos);
  EXPECT_NE(r.warnings()[0].message.find("50 GB/s"), std::string::npos);
  // tp = 4 with 6 GPUs per node: the second group (ranks 4..7) straddles nodes 0 and 1.
  ShapeQuery straddle = query({1, 3, 1, 4}, 12);
  straddle.placement.ranks_per_node = 6;
  EXPECT_TRUE(has(validate_shape(straddle), Severity::warning, "tp"));
  ShapeQuery inside = query({1, 2, 1, 8}, 16);
  EXPECT_TRUE(validate_shape(inside).warnings().empty());
}

TEST(Validation, TpOverSlowLinkWarns) {
  ShapeQuery q = query({1, 2, 1, 4}, 8);
  q.placement.links.intra_node_bytes_per_s = 32e9;  // PCIe Gen4 x16
  ShapeReport r = validate_shape(q);
  EXPECT_TRUE(r.ok());
  ASSERT_EQ(r.warnings().size(), 1u);
  EXPECT_NE(r.warnings()[0].message.find("slow intra-node link (32 GB/s"), std::string::npos);
  q.placement.links.intra_node_bytes_per_s = 450e9;  // NVLink
  EXPECT_TRUE(validate_shape(q).warnings().empty());
}

TEST(Validation, DiagnosticTextAndError) {
  Diagnostic d{Severity::error, "tp", "3", "must divide 8"};
  EXPECT_EQ(d.text(), "tp: 3: must divide 8");
  EXPECT_EQ(d.to_error().message(), "tp: 3: must divide 8");
  ShapeReport r = validate_shape(query({1, 4, 1, 4}, 8));
  EXPECT_EQ(r.first_error().field, "mesh");
}

TEST(Validation, LayoutFromRunConfigAndPlacement) {
  RunConfig rc;
  rc.mesh = MeshShape{1, -1, 1, 2};
  rc.nodes = {NodeConfig{"local", 4, {}}, NodeConfig{"b", 4, {}}};
  rc.training.seq_len = 256;
  rc.training.micro_batch = 1;
  rc.training.global_batch = 8;
  ModelSpec m = spec(8, 4);
  const Placement placement = Placement::of(rc);
  EXPECT_EQ(placement.world_size, 8);
  EXPECT_EQ(placement.ranks_per_node, 4);
  LayoutCheck checked = ParallelLayout::check(rc, &m, placement);
  ASSERT_TRUE(checked.ok()) << checked.report.first_error().message();
  const ParallelLayout& l = *checked.layout;
  EXPECT_EQ(l.shape(), (MeshShape{1, 4, 1, 2}));
  EXPECT_EQ(l.grad_accum_steps(), 2);
  EXPECT_EQ(l.dp_size(), 4);
  EXPECT_EQ(l.fsdp_group(), GroupKind::dp_shard);
  EXPECT_EQ(l.num_nodes(), 2);
  EXPECT_EQ(l.seq_len_divisor(), 2);
  EXPECT_EQ(l.tokens_per_replica_step(), 8 * 256 / 4);
  EXPECT_TRUE(l.accelerate_refusal().empty());
  // cp: FSDP shards over dp_shard x cp; the sequence splits into 2*cp*tp pieces.
  rc.mesh = MeshShape{1, 2, 2, 2};
  checked = ParallelLayout::check(rc, &m, placement);
  ASSERT_TRUE(checked.ok()) << checked.report.first_error().message();
  EXPECT_EQ(checked.layout->fsdp_group(), GroupKind::dp_shard_cp);
  EXPECT_EQ(checked.layout->fsdp_size(), 4);
  EXPECT_EQ(checked.layout->seq_len_divisor(), 8);
}

TEST(Validation, AccelerateRefusalIsMarkedNotHidden) {
  RunConfig rc;
  rc.mesh = MeshShape{2, 1, 1, 4};
  ModelSpec m = spec(8, 4);
  LayoutCheck checked = ParallelLayout::check(rc, &m, Placement::of(rc));
  ASSERT_TRUE(checked.ok()) << checked.report.first_error().message();
  EXPECT_NE(checked.layout->accelerate_refusal().find("Accelerate refuses"), std::string::npos);
  // A trainer that cannot replicate tp pieces refuses it, with the rule's words.
  TrainerSupport accelerate_like;
  accelerate_like.tp_cp_with_pure_replication = false;
  checked = ParallelLayout::check(rc, &m, Placement::of(rc), accelerate_like);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.report.errors()[0].field, "dp_shard");
}

namespace {

// meshtrain computes full causal attention: a sliding window shorter than seq_len is an error
// on model.sliding_window; one at least seq_len long is full attention and fine.
TEST(Validation, SlidingWindowShorterThanSeqLenIsRefused) {
  ModelSpec m = spec(8, 8);
  m.sliding_window = 4096;
  m.sliding_window_field = "sliding_window";
  ShapeQuery q = query({1, 8, 1, 1}, 8);
  q.model = m;
  q.training.seq_len = 4096;
  EXPECT_TRUE(validate_shape(q).ok());
  q.training.seq_len = 8192;
  ShapeReport r = validate_shape(q);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(has(r, Severity::error, "model.sliding_window"));
}

}  // namespace
