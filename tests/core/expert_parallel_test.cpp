// The ep axis: the sparse mesh's groups (against torchtitan's [pp, dp_replicate, efsdp, ep]
// unflattened by hand from arange(N)), its rules, its JSON key, its flag and its metrics key.
#include <gtest/gtest.h>

#include "core/mesh.h"
#include "core/mesh_json.h"
#include "core/metrics.h"
#include "core/model_spec.h"
#include "core/parallel_layout.h"
#include "core/run_config_flags.h"
#include "core/validation.h"

using namespace meshwork;
using Groups = std::vector<std::vector<int>>;

namespace {

MeshShape with_ep(MeshShape s, int ep) {
  s.ep = ep;
  return s;
}

ModelSpec preset(const std::string& name) {
  auto spec = load_model_spec(name);
  EXPECT_TRUE(spec.ok()) << name;
  return *spec;
}

ShapeQuery query(MeshShape shape, const ModelSpec* model) {
  ShapeQuery q;
  q.shape = shape;
  q.placement.world_size = shape.world_size();
  q.placement.ranks_per_node = 8;
  if (model) q.model = *model;
  return q;
}

std::vector<std::string> messages(const ShapeReport& r, const std::string& field) {
  std::vector<std::string> out;
  for (const Diagnostic& d : r.errors())
    if (d.field == field) out.push_back(d.message);
  return out;
}

}  // namespace

// dp_replicate 2 x dp_shard 2 x tp 2 with ep 2: each block of dp_shard * tp = 4 ranks is
// (efsdp 2, ep 2): torch.arange(8).reshape(2, 2, 2) over (dp_replicate, efsdp, ep).
TEST(ExpertParallel, GroupsAreTorchtitansSparseMesh) {
  auto m = DeviceMesh::create(with_ep(MeshShape{2, 2, 1, 2}, 2), 8);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->expert_groups(ExpertGroupKind::ep), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m->expert_groups(ExpertGroupKind::efsdp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m->expert_group_rank(7, ExpertGroupKind::ep), 1);
  EXPECT_EQ(m->expert_group_rank(7, ExpertGroupKind::efsdp), 1);
  EXPECT_EQ(m->expert_group_members(5, ExpertGroupKind::ep), (std::vector<int>{4, 5}));
}

// ep borrows from cp and tp too: dp_shard 2 x cp 2 x tp 2 = 8 ranks, ep 4 spans cp x tp, efsdp
// is dp_shard; with pp 2 the sparse mesh repeats in each stage.
TEST(ExpertParallel, BorrowsAcrossCpAndTpInsideEachStage) {
  auto m = DeviceMesh::create(with_ep(MeshShape{1, 2, 2, 2, 2}, 4), 8);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->expert_groups(ExpertGroupKind::ep),
            (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(m->expert_groups(ExpertGroupKind::efsdp),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(m->shape().efsdp_size(), 2);
}

// Every rank in exactly one group of each kind; the groups' sizes are ep and B / ep; the
// crossing test agrees with listing the groups, for several placements.
TEST(ExpertParallel, GroupsTileTheWorldAndCrossingMatchesListing) {
  for (int gpn : {1, 2, 3, 4, 6, 8}) {
    for (MeshShape base : {MeshShape{2, 4, 1, 2}, MeshShape{1, 8, 1, 1}, MeshShape{2, 2, 2, 2, 2}, MeshShape{1, 3, 1, 4}}) {
      for (int ep = 1; ep <= base.expert_block_size(); ++ep) {
        if (base.expert_block_size() % ep != 0) continue;
        auto m = DeviceMesh::create(with_ep(base, ep), gpn);
        ASSERT_TRUE(m.ok());
        for (ExpertGroupKind kind : kExpertGroupKinds) {
          std::vector<int> seen(static_cast<size_t>(m->world_size()), 0);
          bool crosses = false;
          for (const auto& g : m->expert_groups(kind)) {
            EXPECT_EQ(static_cast<int>(g.size()), m->shape().expert_group_size(kind));
            for (size_t i = 0; i < g.size(); ++i) {
              ++seen[static_cast<size_t>(g[i])];
              EXPECT_EQ(m->expert_group_rank(g[i], kind), static_cast<int>(i));
              if (m->node_of(g[i]) != m->node_of(g[0])) crosses = true;
            }
          }
          for (int s : seen) EXPECT_EQ(s, 1);
          EXPECT_EQ(m->any_expert_group_crosses_nodes(kind), crosses)
              << base.compact() << " ep " << ep << " gpn " << gpn << " " << expert_group_name(kind);
        }
      }
    }
  }
}

TEST(ExpertParallel, IsNotAFactorOfTheWorld) {
  MeshShape s = with_ep(MeshShape{1, 8, 1, 1}, 4);
  EXPECT_EQ(s.world_size(), 8);
  EXPECT_EQ(s.to_string(), "dp_replicate=1 dp_shard=8 cp=1 tp=1 ep=4");
  EXPECT_EQ(s.compact(), "1x8x1x1/ep4");
  auto resolved = resolve_shape(with_ep(MeshShape{1, -1, 1, 1}, 4), 8);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->ep, 4);
  EXPECT_FALSE(DeviceMesh::create(with_ep(MeshShape{1, 4, 1, 1}, 3), 8).ok());
}

TEST(ExpertParallel, RulesNameTheReason) {
  const ModelSpec moe = preset("qwen3-30b-a3b");  // 128 experts
  const ModelSpec dense = preset("qwen3-8b");
  EXPECT_TRUE(validate_shape(query(with_ep(MeshShape{1, 8, 1, 1}, 8), &moe)).ok());
  EXPECT_TRUE(validate_shape(query(with_ep(MeshShape{1, 2, 1, 4}, 8), &moe)).ok());  // borrows tp

  auto not_dividing = messages(validate_shape(query(with_ep(MeshShape{2, 2, 1, 1}, 4), &moe)), "ep");
  ASSERT_EQ(not_dividing.size(), 1u);
  EXPECT_NE(not_dividing[0].find("must divide dp_shard * cp * tp (2 * 1 * 1 = 2)"), std::string::npos);

  auto dense_refused = messages(validate_shape(query(with_ep(MeshShape{1, 8, 1, 1}, 2), &dense)), "ep");
  ASSERT_EQ(dense_refused.size(), 1u);
  EXPECT_NE(dense_refused[0].find("dense model with no experts"), std::string::npos);
  EXPECT_TRUE(validate_shape(query(MeshShape{1, 8, 1, 1}, &dense)).ok());

  const ModelSpec mixtral = preset("mixtral-8x7b");  // 8 experts
  auto experts = messages(validate_shape(query(with_ep(MeshShape{1, 16, 1, 1}, 16), &mixtral)), "ep");
  ASSERT_EQ(experts.size(), 1u);
  EXPECT_NE(experts[0].find("must divide num_experts (8)"), std::string::npos);
}

TEST(ExpertParallel, LayoutCarriesEpAndEfsdp) {
  const ModelSpec moe = preset("qwen3-30b-a3b");
  RunConfig config;
  config.mesh = with_ep(MeshShape{2, 4, 1, 2}, 4);
  auto checked = ParallelLayout::check(config, &moe, Placement::of(config));
  ASSERT_TRUE(checked.ok()) << (checked.error_texts().empty() ? "" : checked.error_texts()[0]);
  EXPECT_EQ(checked.layout->ep_size(), 4);
  EXPECT_EQ(checked.layout->efsdp_size(), 2);
  EXPECT_EQ(checked.layout->world_size(), 16);
}

TEST(ExpertParallel, JsonKeyFlagAndMetricsKey) {
  const MeshShape s = with_ep(MeshShape{1, 4, 1, 2}, 8);
  EXPECT_EQ(to_json(s)["ep"], 8);
  EXPECT_FALSE(to_json(MeshShape{1, 4, 1, 2}).contains("ep"));
  auto back = mesh_shape_from_json(to_json(s), "mesh", false);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, s);
  auto bad = mesh_shape_from_json(nlohmann::json{{"dp_shard", 8}, {"ep", -1}}, "mesh", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "mesh.ep");

  RunConfig c;
  ASSERT_NE(find_run_config_flag("--ep"), nullptr);
  ASSERT_TRUE(find_run_config_flag("--ep")->apply(c, "4").ok());
  EXPECT_EQ(c.mesh.ep, 4);
  EXPECT_FALSE(find_run_config_flag("--ep")->apply(c, "0").ok());
  const std::vector<std::string> flags = run_config_to_flags(c);
  auto it = std::find(flags.begin(), flags.end(), "--ep");
  ASSERT_NE(it, flags.end());
  EXPECT_EQ(*(it + 1), "4");

  StepRecord r;
  r.step = 3;
  r.comm_ep_s = 0.25;
  auto parsed = parse_metrics_line(to_json_line(r));
  ASSERT_TRUE(parsed.ok());
  EXPECT_DOUBLE_EQ(std::get<StepRecord>(*parsed).comm_ep_s, 0.25);
  EXPECT_NE(to_json_line(r).find("\"ep\":0.25"), std::string::npos);
  EXPECT_EQ(comm_ep_key(), "comm_s.ep");
}
