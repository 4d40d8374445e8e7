// Mesh coordinates and groups checked against layouts derived by hand from
// torch.distributed.DeviceMesh(arange(N).reshape(dp_replicate, dp_shard, cp, tp)).
#include <gtest/gtest.h>

#include "core/mesh.h"

using namespace meshwork;
using Groups = std::vector<std::vector<int>>;

namespace {
DeviceMesh make(int r, int s, int c, int t, int gpn = 8) {
  auto m = DeviceMesh::create(MeshShape{r, s, c, t}, gpn);
  EXPECT_TRUE(m.ok());
  return *m;
}
}  // namespace

TEST(Mesh, PureTensorParallel) {
  DeviceMesh m = make(1, 1, 1, 8);
  EXPECT_EQ(m.groups(GroupKind::tp), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(m.coord_of(5), (MeshCoord{0, 0, 0, 5}));
}

TEST(Mesh, ReplicateByTensor) {
  DeviceMesh m = make(2, 1, 1, 4);
  EXPECT_EQ(m.groups(GroupKind::dp_replicate), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.groups(GroupKind::tp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(m.coord_of(6), (MeshCoord{1, 0, 0, 2}));
}

TEST(Mesh, ShardByTensor) {
  DeviceMesh m = make(1, 4, 1, 2);
  EXPECT_EQ(m.groups(GroupKind::dp_shard), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::tp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.group_rank(6, GroupKind::dp_shard), 3);
  EXPECT_EQ(m.group_index(6, GroupKind::dp_shard), 0);
  EXPECT_EQ(m.group_index(7, GroupKind::dp_shard), 1);
}

TEST(Mesh, ReplicateShardContext) {
  DeviceMesh m = make(2, 2, 2, 1);
  EXPECT_EQ(m.coord_of(5), (MeshCoord{1, 0, 1, 0}));
  EXPECT_EQ(m.groups(GroupKind::cp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp_shard), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp_replicate), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // dp = (dp_replicate, dp_shard) flattened, one group per cp coordinate.
  EXPECT_EQ(m.groups(GroupKind::dp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  // dp_shard_cp = (dp_shard, cp) flattened, one group per replica.
  EXPECT_EQ(m.groups(GroupKind::dp_shard_cp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp_cp), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
}

TEST(Mesh, HsdpWithTensor) {
  DeviceMesh m = make(2, 2, 1, 2);
  EXPECT_EQ(m.coord_of(7), (MeshCoord{1, 1, 0, 1}));
  EXPECT_EQ(m.rank_of(MeshCoord{1, 0, 0, 1}), 5);
  EXPECT_EQ(m.groups(GroupKind::dp_replicate), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp_shard), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(m.group_members(3, GroupKind::dp), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(m.group_rank(5, GroupKind::dp), 2);
}

TEST(Mesh, ShardContextTensor) {
  DeviceMesh m = make(1, 2, 2, 2);
  EXPECT_EQ(m.coord_of(6), (MeshCoord{0, 1, 1, 0}));
  EXPECT_EQ(m.groups(GroupKind::cp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp_shard), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp_shard_cp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::dp_cp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(m.groups(GroupKind::tp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(Mesh, TwoNodesPlacement) {
  DeviceMesh m = make(2, 4, 1, 2, /*gpn=*/8);
  EXPECT_EQ(m.num_nodes(), 2);
  EXPECT_EQ(m.node_of(9), 1);
  EXPECT_EQ(m.local_rank_of(9), 1);
  for (int r = 0; r < 16; ++r) {
    EXPECT_FALSE(m.group_crosses_nodes(r, GroupKind::tp)) << r;
    EXPECT_FALSE(m.group_crosses_nodes(r, GroupKind::dp_shard)) << r;
    EXPECT_TRUE(m.group_crosses_nodes(r, GroupKind::dp_replicate)) << r;
  }
  EXPECT_EQ(m.group_members(9, GroupKind::dp_replicate), (std::vector<int>{1, 9}));
  // rank_on_node inverts node_of / local_rank_of (the mesh view finds ranks from node boxes).
  for (int r = 0; r < 16; ++r) EXPECT_EQ(m.rank_on_node(m.node_of(r), m.local_rank_of(r)), r) << r;
}

TEST(Mesh, TensorGroupCrossingNodes) {
  DeviceMesh m = make(1, 1, 1, 4, /*gpn=*/2);
  EXPECT_TRUE(m.group_crosses_nodes(0, GroupKind::tp));
}

// group_crosses_nodes() uses the stride rule; enumerating the members must agree, for every
// mesh shape of a 4 x 4 and an 8 x 8 cluster, every group kind and every rank.
TEST(Mesh, CrossesNodesMatchesEnumeration) {
  for (const auto& [nodes, gpn] : {std::pair{4, 4}, std::pair{8, 8}}) {
    const int world = nodes * gpn;
    int shapes = 0;
    for (int r = 1; r <= world; ++r)
      for (int s = 1; r * s <= world; ++s)
        for (int c = 1; r * s * c <= world; ++c) {
          if (world % (r * s * c)) continue;
          const int t = world / (r * s * c);
          DeviceMesh m = make(r, s, c, t, gpn);
          ++shapes;
          for (GroupKind kind : kGroupKinds)
            for (int rank = 0; rank < world; ++rank) {
              bool crosses = false;
              for (int member : m.group_members(rank, kind))
                crosses = crosses || m.node_of(member) != m.node_of(rank);
              ASSERT_EQ(m.group_crosses_nodes(rank, kind), crosses)
                  << m.shape().to_string() << " gpus_per_node=" << gpn << " "
                  << group_name(kind) << " rank " << rank;
            }
        }
    // Ordered factorizations of 2^k into 4 factors: C(k + 3, 3).
    EXPECT_EQ(shapes, world == 16 ? 35 : 84);
  }
}

// Whether any group crosses nodes, from residues of the strides, equals listing every group, for
// every shape of 4x4, 8x8 and (ranks per node not a power of two) 6x6 and 3x8 clusters.
TEST(Mesh, AnyGroupCrossesMatchesEnumeration) {
  for (const auto& [nodes, gpn] : {std::pair{4, 4}, std::pair{8, 8}, std::pair{6, 6}, std::pair{3, 8}}) {
    const int world = nodes * gpn;
    int crossing = 0, contained = 0;
    for (int r = 1; r <= world; ++r)
      for (int s = 1; r * s <= world; ++s)
        for (int c = 1; r * s * c <= world; ++c) {
          if (world % (r * s * c)) continue;
          DeviceMesh m = make(r, s, c, world / (r * s * c), gpn);
          for (GroupKind kind : kGroupKinds) {
            bool any = false;
            for (const auto& g : m.groups(kind))
              for (int member : g) any = any || m.node_of(member) != m.node_of(g.front());
            ASSERT_EQ(m.any_group_crosses_nodes(kind), any)
                << m.shape().to_string() << " gpus_per_node=" << gpn << " " << group_name(kind);
            (any ? crossing : contained)++;
          }
        }
    EXPECT_GT(crossing, 0);
    EXPECT_GT(contained, 0);
  }
}

// The planner's cluster of issue 26, 1,024 nodes x 8: for every one of the 560 shapes of 8,192
// ranks the stride rule gives what listing every group of every rank gave before it, so a plan at
// that size has the same shapes and the same numbers as when the time estimate enumerated groups.
TEST(Mesh, AnyGroupCrossesMatchesEnumerationAt1024x8) {
  constexpr int kNodes = 1024, kGpn = 8, kWorld = kNodes * kGpn;
  int shapes = 0, crossing = 0, contained = 0;
  for (int r = 1; r <= kWorld; r *= 2)
    for (int s = 1; r * s <= kWorld; s *= 2)
      for (int c = 1; r * s * c <= kWorld; c *= 2) {
        DeviceMesh m = make(r, s, c, kWorld / (r * s * c), kGpn);
        ++shapes;
        for (GroupKind kind : kGroupKinds) {
          bool any = false;
          for (const auto& g : m.groups(kind)) {
            for (int member : g) any = any || m.node_of(member) != m.node_of(g.front());
            if (any) break;
          }
          ASSERT_EQ(m.any_group_crosses_nodes(kind), any)
              << m.shape().to_string() << " " << group_name(kind);
          (any ? crossing : contained)++;
        }
      }
  EXPECT_EQ(shapes, 560);  // ordered factorizations of 2^13 into 4 factors: C(16, 3)
  EXPECT_GT(crossing, 0);
  EXPECT_GT(contained, 0);
}

TEST(Mesh, EveryRankRoundTripsAndGroupsPartition) {
  for (MeshShape s : {MeshShape{2, 3, 2, 2}, MeshShape{3, 1, 4, 1}, MeshShape{1, 5, 1, 3}}) {
    auto m = *DeviceMesh::create(s, 4);
    for (int r = 0; r < m.world_size(); ++r) EXPECT_EQ(m.rank_of(m.coord_of(r)), r);
    for (GroupKind k : kGroupKinds) {
      std::vector<int> seen(m.world_size(), 0);
      for (const auto& g : m.groups(k)) {
        EXPECT_EQ(static_cast<int>(g.size()), s.group_size(k));
        for (size_t i = 0; i < g.size(); ++i) {
          ++seen[g[i]];
          EXPECT_EQ(m.group_rank(g[i], k), static_cast<int>(i));
          EXPECT_EQ(m.group_members(g[i], k), g);
        }
      }
      for (int c : seen) EXPECT_EQ(c, 1) << group_name(k);
    }
  }
}

TEST(Mesh, ResolveAutoAxis) {
  auto r = resolve_shape(MeshShape{1, -1, 1, 2}, 16);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[Axis::dp_shard], 8);
  auto two = resolve_shape(MeshShape{-1, -1, 1, 1}, 8);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.error().field, "dp_shard");
  auto indivisible = resolve_shape(MeshShape{1, -1, 1, 3}, 8);
  ASSERT_FALSE(indivisible.ok());
  EXPECT_NE(indivisible.error().message().find("does not divide"), std::string::npos);
  auto mismatch = resolve_shape(MeshShape{2, 2, 1, 1}, 8);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.error().field, "mesh");
  auto zero = resolve_shape(MeshShape{0, 1, 1, 8}, 8);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.error().message(), "dp_replicate: 0: must be a whole number >= 1, or -1 to fill from the world size");
}

TEST(Mesh, AxisNames) {
  EXPECT_EQ(axis_from_name("dp-shard"), Axis::dp_shard);
  EXPECT_EQ(group_from_name("dp_shard_cp"), GroupKind::dp_shard_cp);
  EXPECT_EQ(axis_from_name("pp"), Axis::pp);
  EXPECT_EQ(group_from_name("pp"), GroupKind::pp);
  EXPECT_FALSE(axis_from_name("ep").has_value());  // expert parallelism is not an axis (yet)
  // An axis' value is its position in kAxes, outermost first (torchtitan's order).
  for (size_t i = 0; i < kAxes.size(); ++i) EXPECT_EQ(axis_index(kAxes[i]), i);
  EXPECT_EQ(kAxes.front(), Axis::pp);
  EXPECT_EQ(kAxes.back(), Axis::tp);
}
