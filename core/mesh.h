// The one place for Meshwork's mesh math: rank <-> coordinates and axis groups.
//
// A mesh of world size N = dp_replicate * dp_shard * cp * tp is laid out exactly as
// torch.distributed.DeviceMesh(arange(N).reshape(dp_replicate, dp_shard, cp, tp)) with dimension
// names ("dp_replicate", "dp_shard", "cp", "tp"), the order Accelerate's ParallelismConfig and
// torchtitan's ParallelDims use: tp varies fastest, so a tp group is a run of consecutive ranks and
// stays inside a node whenever tp divides gpus_per_node.
//
//   rank = ((r * dp_shard + s) * cp + c) * tp + t      for coordinates (r, s, c, t)
//
// A group along an axis (or a flattened set of adjacent axes) holds the ranks that share every
// other coordinate; its members are ordered row-major over the grouped axes, which is the order
// DeviceMesh._flatten() gives. Both the workbench and meshtrain use this file; never re-derive it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace meshwork {

// The mesh axes, outermost first. Everything that lists axes (names, flags, JSON keys, metrics
// keys, UI rows) iterates kAxes and asks axis_name()/axis_flag(): a new axis (pp) is one entry
// here and one row in mesh.cpp's table, not a field in every file.
enum class Axis { dp_replicate = 0, dp_shard = 1, cp = 2, tp = 3 };
inline constexpr int kAxisCount = 4;
inline constexpr std::array<Axis, kAxisCount> kAxes = {Axis::dp_replicate, Axis::dp_shard,
                                                       Axis::cp, Axis::tp};

// The groups a rank belongs to: the four axes and the three flattened groups (docs/design.md).
enum class GroupKind {
  dp_replicate,  // gradient all-reduce across replicas
  dp_shard,      // FSDP sharding without cp
  cp,            // context-parallel ring
  tp,            // tensor parallel
  dp,            // dp_replicate x dp_shard: data loading (each member reads different samples)
  dp_shard_cp,   // dp_shard x cp: FSDP sharding when cp > 1
  dp_cp,         // dp_replicate x dp_shard x cp: loss / gradient averaging
};
inline constexpr std::array<GroupKind, 7> kGroupKinds = {
    GroupKind::dp_replicate, GroupKind::dp_shard, GroupKind::cp,         GroupKind::tp,
    GroupKind::dp,           GroupKind::dp_shard_cp, GroupKind::dp_cp};

std::string_view axis_name(Axis axis);                       // "dp_replicate": JSON, metrics, UI
std::string_view axis_flag(Axis axis);                       // "--dp-replicate": meshwork, meshtrain
std::optional<Axis> axis_from_name(std::string_view name);  // "dp_replicate", "dp-shard", ...
std::string_view group_name(GroupKind kind);
std::optional<GroupKind> group_from_name(std::string_view name);
// The mesh axes a group spans, in mesh order.
std::vector<Axis> group_axes(GroupKind kind);
GroupKind group_of_axis(Axis axis);

// One int per axis, indexed by Axis; braces list them in axis order ({dp_replicate, dp_shard,
// cp, tp}) and every axis is Fill by default. The base of MeshShape and MeshCoord.
template <int Fill>
struct PerAxis {
  std::array<int, kAxisCount> values{Fill, Fill, Fill, Fill};

  int operator[](Axis axis) const { return values[static_cast<size_t>(axis)]; }
  int& operator[](Axis axis) { return values[static_cast<size_t>(axis)]; }
  void set(Axis axis, int value) { (*this)[axis] = value; }
  bool operator==(const PerAxis&) const = default;
};

// Sizes of the axes, indexed by Axis. A size of -1 ("auto") may stand for one axis until
// resolve_shape() fills it. Serialized as a JSON object keyed by axis_name() (core/mesh_json.h);
// compact() is for display only and is never parsed back.
struct MeshShape : PerAxis<1> {
  int size(Axis axis) const { return (*this)[axis]; }
  int group_size(GroupKind kind) const;
  // Product of the sizes; only meaningful when no axis is -1.
  int64_t world_size() const;
  bool operator==(const MeshShape&) const = default;
  // "dp_replicate=2 dp_shard=4 cp=1 tp=2"
  std::string to_string() const;
  // "2x4x1x2" (display only)
  std::string compact() const;
};

// Fills the one axis given as -1 from the world size. Errors name the field and value: more than
// one -1, a size < 1 other than -1, or a world size the other axes do not divide / do not match.
Result<MeshShape> resolve_shape(MeshShape shape, int64_t world_size);

struct MeshCoord : PerAxis<0> {
  int get(Axis axis) const { return (*this)[axis]; }
  bool operator==(const MeshCoord&) const = default;
};

// A resolved shape placed on nodes: rank r lives on node r / gpus_per_node (local rank
// r % gpus_per_node), the placement torchrun gives with --nproc-per-node.
class DeviceMesh {
 public:
  // shape must be resolved (all sizes >= 1); gpus_per_node >= 1.
  static Result<DeviceMesh> create(const MeshShape& shape, int gpus_per_node);

  const MeshShape& shape() const { return shape_; }
  int world_size() const { return world_; }
  int gpus_per_node() const { return gpus_per_node_; }
  int num_nodes() const { return (world_ + gpus_per_node_ - 1) / gpus_per_node_; }

  MeshCoord coord_of(int rank) const;
  int rank_of(const MeshCoord& coord) const;
  int node_of(int rank) const { return rank / gpus_per_node_; }
  int local_rank_of(int rank) const { return rank % gpus_per_node_; }
  // The rank at `local` on `node` (the inverse of node_of/local_rank_of; may be >= world_size on
  // a last node that is not full).
  int rank_on_node(int node, int local) const { return node * gpus_per_node_ + local; }

  // The members of the `kind` group that contains `rank`, ordered by group-local rank.
  std::vector<int> group_members(int rank, GroupKind kind) const;
  // `rank`'s index inside its `kind` group (its rank in that process group).
  int group_rank(int rank, GroupKind kind) const;
  // Index of `rank`'s group among groups(kind): a stable id to name the process group.
  int group_index(int rank, GroupKind kind) const;
  // Every group of `kind`, ordered row-major over the axes outside the group.
  std::vector<std::vector<int>> groups(GroupKind kind) const;
  // True if the group containing `rank` spans more than one node.
  bool group_crosses_nodes(int rank, GroupKind kind) const;
  // True if any group of `kind` spans more than one node. From the strides and the ranks per
  // node alone (never lists a group): costs O(gpus_per_node x sum of axis sizes), the same at 8
  // ranks as at 8,192.
  bool any_group_crosses_nodes(GroupKind kind) const;

 private:
  DeviceMesh(const MeshShape& shape, int gpus_per_node);
  // Row-major strides of the four axes: stride(tp) = 1.
  int stride(Axis axis) const;

  MeshShape shape_;
  int world_ = 1;
  int gpus_per_node_ = 1;
};

}  // namespace meshwork
