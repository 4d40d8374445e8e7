// The one place for Meshwork's mesh math: rank <-> coordinates and axis groups.
//
// A mesh of world size N = pp * dp_replicate * dp_shard * cp * tp is laid out exactly as
// torch.distributed.DeviceMesh(arange(N).reshape(pp, dp_replicate, dp_shard, cp, tp)) with
// dimension names ("pp", "dp_replicate", "dp_shard", "cp", "tp"), torchtitan's ParallelDims order
// (Accelerate's ParallelismConfig has the last four in the same order and no pp): tp varies
// fastest, so a tp group is a run of consecutive ranks and stays inside a node whenever tp divides
// gpus_per_node; pp varies slowest, so a pipeline stage is a block of world / pp consecutive ranks
// (whole nodes when gpus_per_node divides it) and the stage-to-stage sends cross nodes.
//
//   rank = ((((p * dp_replicate + r) * dp_shard + s) * cp + c) * tp + t   for (p, r, s, c, t)
//
// A group along an axis (or a flattened set of adjacent axes) holds the ranks that share every
// other coordinate; its members are ordered row-major over the grouped axes, which is the order
// DeviceMesh._flatten() gives. Every group but pp's lies inside one stage, so with pp = 1 the
// four-axis mesh is unchanged. Both the workbench and meshtrain use this file; never re-derive it.
//
// Expert parallel (ep, mixture-of-experts models only) is not a factor of the world size: as in
// torchtitan it borrows its ranks from the block of B = dp_shard * cp * tp consecutive ranks that
// share (pp, dp_replicate), and ep divides B. That block is unflattened again as (efsdp, ep),
// ep fastest, which is torchtitan's sparse mesh [pp, dp_replicate, efsdp, ep] made from the same
// world (expert tensor parallel is 1, as torchtitan keeps it):
//
//   b = ((s * cp) + c) * tp + t         the rank's place in its block (rank = block_start + b)
//   ep coordinate    = b mod ep         ep group:    the ep consecutive ranks with the same b / ep
//   efsdp coordinate = b / ep           efsdp group: the B / ep ranks with the same b mod ep
//
// Each ep rank holds num_experts / ep experts; the ranks of an efsdp group hold the same experts
// and FSDP-shard them, as dp_shard (x cp) shards the dense weights.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace meshwork {

// The mesh axes, outermost first; an Axis' value is its position in kAxes (and in every array
// indexed by Axis). Everything that lists axes (names, flags, JSON keys, metrics keys, UI rows)
// iterates kAxes and asks axis_name()/axis_flag().
enum class Axis { pp = 0, dp_replicate = 1, dp_shard = 2, cp = 3, tp = 4 };
inline constexpr int kAxisCount = 5;
inline constexpr std::array<Axis, kAxisCount> kAxes = {Axis::pp, Axis::dp_replicate,
                                                       Axis::dp_shard, Axis::cp, Axis::tp};
inline constexpr size_t axis_index(Axis axis) { return static_cast<size_t>(axis); }

// The groups a rank belongs to: the five axes and the three flattened groups (docs/design.md).
// pp is listed last so that the four-axis groups keep their indices.
enum class GroupKind {
  dp_replicate,  // gradient all-reduce across replicas
  dp_shard,      // FSDP sharding without cp
  cp,            // context-parallel ring
  tp,            // tensor parallel
  dp,            // dp_replicate x dp_shard: data loading (each member reads different samples)
  dp_shard_cp,   // dp_shard x cp: FSDP sharding when cp > 1
  dp_cp,         // dp_replicate x dp_shard x cp: loss / gradient averaging (inside a stage)
  pp,            // pipeline: the stages, in order; activations and their gradients hop along it
};
inline constexpr std::array<GroupKind, 8> kGroupKinds = {
    GroupKind::dp_replicate, GroupKind::dp_shard,    GroupKind::cp,    GroupKind::tp,
    GroupKind::dp,           GroupKind::dp_shard_cp, GroupKind::dp_cp, GroupKind::pp};

// The groups of the sparse (expert) mesh: ep, over which tokens are dispatched to the experts
// that hold them (all-to-all), and efsdp, over which one expert set is FSDP-sharded. Kept apart
// from GroupKind: they exist only with ep > 1 and do not tile the dense mesh's axes.
enum class ExpertGroupKind { ep, efsdp };
inline constexpr std::array<ExpertGroupKind, 2> kExpertGroupKinds = {ExpertGroupKind::ep, ExpertGroupKind::efsdp};
std::string_view expert_group_name(ExpertGroupKind kind);  // "ep", "efsdp"
// The expert-parallel degree's names, beside axis_name()/axis_flag(): "ep" (JSON key in "mesh",
// metrics "comm_s.ep", UI) and "--ep" (meshwork and meshtrain).
inline constexpr std::string_view kEpName = "ep";
inline constexpr std::string_view kEpFlag = "--ep";

std::string_view axis_name(Axis axis);                       // "dp_replicate": JSON, metrics, UI
std::string_view axis_flag(Axis axis);                       // "--dp-replicate": meshwork, meshtrain
std::optional<Axis> axis_from_name(std::string_view name);  // "dp_replicate", "dp-shard", ...
std::string_view group_name(GroupKind kind);
std::optional<GroupKind> group_from_name(std::string_view name);
// The mesh axes a group spans, in mesh order.
std::vector<Axis> group_axes(GroupKind kind);
GroupKind group_of_axis(Axis axis);

// One value per axis, indexed only by Axis (an int index does not compile, so no code can assume
// which position an axis has). Iterates in kAxes order.
template <class T>
struct AxisArray {
  AxisArray() = default;  // declared: not an aggregate, so {a, b, c, d} cannot fill it by position
  std::array<T, kAxisCount> values{};

  T& operator[](Axis axis) { return values[axis_index(axis)]; }
  const T& operator[](Axis axis) const { return values[axis_index(axis)]; }
  auto begin() { return values.begin(); }
  auto end() { return values.end(); }
  auto begin() const { return values.begin(); }
  auto end() const { return values.end(); }
  static constexpr size_t size() { return kAxisCount; }
  bool operator==(const AxisArray&) const = default;
  // By name, in MeshShape's argument order: the four axes of a stage, then pp.
  static AxisArray of(T dp_replicate, T dp_shard, T cp, T tp, T pp = T{}) {
    AxisArray a;
    a[Axis::dp_replicate] = dp_replicate;
    a[Axis::dp_shard] = dp_shard;
    a[Axis::cp] = cp;
    a[Axis::tp] = tp;
    a[Axis::pp] = pp;
    return a;
  }
};

// One int per axis, indexed by Axis (values[] is in kAxes order, pp first); every axis is Fill
// by default. The base of MeshShape and MeshCoord.
template <int Fill>
struct PerAxis {
  std::array<int, kAxisCount> values{Fill, Fill, Fill, Fill, Fill};

  int operator[](Axis axis) const { return values[axis_index(axis)]; }
  int& operator[](Axis axis) { return values[axis_index(axis)]; }
  void set(Axis axis, int value) { (*this)[axis] = value; }
  bool operator==(const PerAxis&) const = default;
};

// Sizes of the axes, indexed by Axis. A size of -1 ("auto") may stand for one axis until
// resolve_shape() fills it. Serialized as a JSON object keyed by axis_name() (core/mesh_json.h);
// compact() is for display only and is never parsed back.
struct MeshShape : PerAxis<1> {
  MeshShape() = default;
  // The four axes of a stage in Accelerate's order, then the number of stages: MeshShape{2, 4, 1,
  // 2} is dp_replicate 2, dp_shard 4, cp 1, tp 2 and one stage, as before pp existed.
  MeshShape(int dp_replicate, int dp_shard, int cp, int tp, int pp = 1) {
    set(Axis::dp_replicate, dp_replicate);
    set(Axis::dp_shard, dp_shard);
    set(Axis::cp, cp);
    set(Axis::tp, tp);
    set(Axis::pp, pp);
  }
  // Expert-parallel degree (MoE only): not one of the axes and not a factor of world_size(); it
  // divides expert_block_size() (see the top of this file). 1: no expert parallelism.
  int ep = 1;

  int size(Axis axis) const { return (*this)[axis]; }
  int group_size(GroupKind kind) const;
  // The ranks ep borrows from: dp_shard * cp * tp.
  int expert_block_size() const { return size(Axis::dp_shard) * size(Axis::cp) * size(Axis::tp); }
  // Ranks that FSDP-shard one expert set: expert_block_size() / ep.
  int efsdp_size() const { return ep >= 1 ? expert_block_size() / ep : 0; }
  int expert_group_size(ExpertGroupKind kind) const { return kind == ExpertGroupKind::ep ? ep : efsdp_size(); }
  // Product of the sizes; only meaningful when no axis is -1.
  int64_t world_size() const;
  bool operator==(const MeshShape&) const = default;
  // "dp_replicate=2 dp_shard=4 cp=1 tp=2"; "pp=2 dp_replicate=2 ..." when pp is not 1; " ep=4"
  // at the end when ep is not 1.
  std::string to_string() const;
  // "2x4x1x2"; "pp2:2x4x1x2" when pp is not 1; "2x4x1x2/ep4" when ep is not 1 (display only).
  std::string compact() const;
};

// Fills the one axis given as -1 from the world size. Errors name the field and value: more than
// one -1, a size < 1 other than -1, or a world size the other axes do not divide / do not match.
Result<MeshShape> resolve_shape(MeshShape shape, int64_t world_size);

struct MeshCoord : PerAxis<0> {
  MeshCoord() = default;
  // As MeshShape's: the four coordinates inside a stage, then the stage.
  MeshCoord(int dp_replicate, int dp_shard, int cp, int tp, int pp = 0) {
    set(Axis::dp_replicate, dp_replicate);
    set(Axis::dp_shard, dp_shard);
    set(Axis::cp, cp);
    set(Axis::tp, tp);
    set(Axis::pp, pp);
  }
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

  // The sparse mesh (shape().ep > 1; with ep = 1 an ep group is the rank alone and the efsdp
  // group its whole block). Members in group-rank order; see the top of this file.
  std::vector<int> expert_group_members(int rank, ExpertGroupKind kind) const;
  int expert_group_rank(int rank, ExpertGroupKind kind) const;
  // Every group of `kind`, ordered by their lowest rank.
  std::vector<std::vector<int>> expert_groups(ExpertGroupKind kind) const;
  // True if any group of `kind` spans more than one node; O(gpus_per_node x ep), never lists a
  // group.
  bool any_expert_group_crosses_nodes(ExpertGroupKind kind) const;

 private:
  DeviceMesh(const MeshShape& shape, int gpus_per_node);
  // Row-major strides of the axes: stride(tp) = 1.
  int stride(Axis axis) const;

  MeshShape shape_;
  int world_ = 1;
  int gpus_per_node_ = 1;
};

}  // namespace meshwork
