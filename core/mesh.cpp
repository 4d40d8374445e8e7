#include "core/mesh.h"

#include <algorithm>
#include <stdexcept>

namespace meshwork {

namespace {

std::string normalize(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

}  // namespace

namespace {
struct AxisNames {
  std::string_view name;
  std::string_view flag;
};
// Indexed by Axis.
constexpr std::array<AxisNames, kAxisCount> kAxisNames = {{
    {"pp", "--pp"},
    {"dp_replicate", "--dp-replicate"},
    {"dp_shard", "--dp-shard"},
    {"cp", "--cp"},
    {"tp", "--tp"},
}};
}  // namespace

std::string_view axis_name(Axis axis) { return kAxisNames[static_cast<size_t>(axis)].name; }
std::string_view axis_flag(Axis axis) { return kAxisNames[static_cast<size_t>(axis)].flag; }

std::optional<Axis> axis_from_name(std::string_view name) {
  const std::string n = normalize(name);
  for (Axis a : kAxes)
    if (axis_name(a) == n) return a;
  return std::nullopt;
}

std::string_view group_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::dp_replicate: return "dp_replicate";
    case GroupKind::dp_shard: return "dp_shard";
    case GroupKind::cp: return "cp";
    case GroupKind::tp: return "tp";
    case GroupKind::dp: return "dp";
    case GroupKind::dp_shard_cp: return "dp_shard_cp";
    case GroupKind::dp_cp: return "dp_cp";
    case GroupKind::pp: return "pp";
  }
  return "?";
}

std::string_view expert_group_name(ExpertGroupKind kind) {
  return kind == ExpertGroupKind::ep ? "ep" : "efsdp";
}

std::optional<GroupKind> group_from_name(std::string_view name) {
  const std::string n = normalize(name);
  for (GroupKind k : kGroupKinds)
    if (group_name(k) == n) return k;
  return std::nullopt;
}

std::vector<Axis> group_axes(GroupKind kind) {
  switch (kind) {
    case GroupKind::dp_replicate: return {Axis::dp_replicate};
    case GroupKind::dp_shard: return {Axis::dp_shard};
    case GroupKind::cp: return {Axis::cp};
    case GroupKind::tp: return {Axis::tp};
    case GroupKind::dp: return {Axis::dp_replicate, Axis::dp_shard};
    case GroupKind::dp_shard_cp: return {Axis::dp_shard, Axis::cp};
    case GroupKind::dp_cp: return {Axis::dp_replicate, Axis::dp_shard, Axis::cp};
    case GroupKind::pp: return {Axis::pp};
  }
  return {};
}

GroupKind group_of_axis(Axis axis) {
  switch (axis) {
    case Axis::dp_replicate: return GroupKind::dp_replicate;
    case Axis::dp_shard: return GroupKind::dp_shard;
    case Axis::cp: return GroupKind::cp;
    case Axis::tp: return GroupKind::tp;
    case Axis::pp: return GroupKind::pp;
  }
  return GroupKind::tp;
}

int MeshShape::group_size(GroupKind kind) const {
  int n = 1;
  for (Axis a : group_axes(kind)) n *= size(a);
  return n;
}

int64_t MeshShape::world_size() const {
  int64_t n = 1;
  for (int s : values) n *= s;
  return n;
}

std::string MeshShape::to_string() const {
  std::string out;
  for (Axis a : kAxes) {
    if (a == Axis::pp && size(a) == 1) continue;
    if (!out.empty()) out += ' ';
    out += std::string(axis_name(a)) + "=" + std::to_string(size(a));
  }
  if (ep != 1) out += " ep=" + std::to_string(ep);
  return out;
}

std::string MeshShape::compact() const {
  std::string out = size(Axis::pp) == 1 ? "" : "pp" + std::to_string(size(Axis::pp)) + ":";
  bool first = true;
  for (Axis a : kAxes) {
    if (a == Axis::pp) continue;
    out += (first ? "" : "x") + std::to_string(size(a));
    first = false;
  }
  if (ep != 1) out += "/ep" + std::to_string(ep);
  return out;
}

Result<MeshShape> resolve_shape(MeshShape shape, int64_t world_size) {
  if (world_size < 1)
    return Error{"world_size", std::to_string(world_size), "must be at least 1"};
  std::optional<Axis> auto_axis;
  int64_t fixed = 1;
  for (Axis a : kAxes) {
    const int s = shape.size(a);
    if (s == -1) {
      if (auto_axis)
        return Error{std::string(axis_name(a)), "-1",
                     "only one axis may be -1 (auto); " + std::string(axis_name(*auto_axis)) +
                         " is already -1"};
      auto_axis = a;
    } else if (s < 1) {
      return Error{std::string(axis_name(a)), std::to_string(s),
                   "must be a whole number >= 1, or -1 to fill from the world size"};
    } else {
      fixed *= s;
    }
  }
  if (auto_axis) {
    if (world_size % fixed != 0)
      return Error{std::string(axis_name(*auto_axis)), "-1",
                   "cannot be filled: the other axes multiply to " + std::to_string(fixed) +
                       ", which does not divide the world size " + std::to_string(world_size)};
    shape.set(*auto_axis, static_cast<int>(world_size / fixed));
  } else if (fixed != world_size) {
    std::string product;
    for (Axis a : kAxes) {
      if (a == Axis::pp && shape.size(a) == 1) continue;
      product += (product.empty() ? "" : "*") + std::string(axis_name(a));
    }
    return Error{"mesh", shape.compact(),
                 product + " = " + std::to_string(fixed) + " must equal the world size " +
                     std::to_string(world_size)};
  }
  return shape;
}

Result<DeviceMesh> DeviceMesh::create(const MeshShape& shape, int gpus_per_node) {
  for (Axis a : kAxes)
    if (shape.size(a) < 1)
      return Error{std::string(axis_name(a)), std::to_string(shape.size(a)),
                   "must be >= 1 (resolve -1 first)"};
  if (gpus_per_node < 1)
    return Error{"gpus_per_node", std::to_string(gpus_per_node), "must be >= 1"};
  if (shape.ep < 1 || shape.expert_block_size() % shape.ep != 0)
    return Error{std::string(kEpName), std::to_string(shape.ep),
                 "must be >= 1 and divide dp_shard * cp * tp = " + std::to_string(shape.expert_block_size())};
  if (shape.world_size() > (1 << 24))
    return Error{"mesh", shape.compact(), "world size must be at most 16777216"};
  return DeviceMesh(shape, gpus_per_node);
}

DeviceMesh::DeviceMesh(const MeshShape& shape, int gpus_per_node)
    : shape_(shape), world_(static_cast<int>(shape.world_size())), gpus_per_node_(gpus_per_node) {}

int DeviceMesh::stride(Axis axis) const {
  int s = 1;
  for (int i = static_cast<int>(kAxes.size()) - 1; i > static_cast<int>(axis); --i)
    s *= shape_.size(kAxes[i]);
  return s;
}

MeshCoord DeviceMesh::coord_of(int rank) const {
  if (rank < 0 || rank >= world_) throw std::out_of_range("rank outside the mesh");
  MeshCoord c;
  for (Axis a : kAxes) c.set(a, (rank / stride(a)) % shape_.size(a));
  return c;
}

int DeviceMesh::rank_of(const MeshCoord& coord) const {
  int r = 0;
  for (Axis a : kAxes) {
    if (coord.get(a) < 0 || coord.get(a) >= shape_.size(a))
      throw std::out_of_range("coordinate outside the mesh");
    r += coord.get(a) * stride(a);
  }
  return r;
}

std::vector<int> DeviceMesh::group_members(int rank, GroupKind kind) const {
  const std::vector<Axis> axes = group_axes(kind);
  const MeshCoord base = coord_of(rank);
  const int n = shape_.group_size(kind);
  std::vector<int> members;
  members.reserve(n);
  // Enumerate the grouped axes row-major (last axis fastest), other coordinates fixed.
  for (int i = 0; i < n; ++i) {
    MeshCoord c = base;
    int rem = i;
    for (int k = static_cast<int>(axes.size()) - 1; k >= 0; --k) {
      const int sz = shape_.size(axes[k]);
      c.set(axes[k], rem % sz);
      rem /= sz;
    }
    members.push_back(rank_of(c));
  }
  return members;
}

int DeviceMesh::group_rank(int rank, GroupKind kind) const {
  const MeshCoord c = coord_of(rank);
  int idx = 0;
  for (Axis a : group_axes(kind)) idx = idx * shape_.size(a) + c.get(a);
  return idx;
}

int DeviceMesh::group_index(int rank, GroupKind kind) const {
  const std::vector<Axis> grouped = group_axes(kind);
  const MeshCoord c = coord_of(rank);
  int idx = 0;
  for (Axis a : kAxes) {
    if (std::find(grouped.begin(), grouped.end(), a) != grouped.end()) continue;
    idx = idx * shape_.size(a) + c.get(a);
  }
  return idx;
}

std::vector<std::vector<int>> DeviceMesh::groups(GroupKind kind) const {
  const int count = world_ / shape_.group_size(kind);
  std::vector<std::vector<int>> out(count);
  for (int r = 0; r < world_; ++r) {
    if (group_rank(r, kind) == 0) out[group_index(r, kind)] = group_members(r, kind);
  }
  return out;
}

// The members are rank plus multiples of the grouped axes' strides: the lowest has those
// coordinates at 0, the highest at size - 1. A node holds the contiguous ranks
// [node_start, node_start + gpus_per_node), so the group stays on rank's node iff both ends do.
// A group is its base rank b (every grouped coordinate 0) plus offsets up to its span
//   span = sum over grouped axes a of (size(a) - 1) * stride(a),
// and its members lie between b and b + span, so it stays on b's node iff
//   (b mod G) + span < G            (G = ranks per node).
// The bases are the sums of c * stride(a) over the other axes; only their residues mod G matter,
// and there are at most G of those: fold the axes in one by one, keeping the set of residues.
bool DeviceMesh::any_group_crosses_nodes(GroupKind kind) const {
  const std::vector<Axis> grouped = group_axes(kind);
  int64_t span = 0;
  for (Axis a : grouped) span += int64_t{shape_.size(a) - 1} * stride(a);
  const int g = gpus_per_node_;
  if (span >= g) return true;  // two members at least G apart
  std::vector<char> residue(static_cast<size_t>(g), 0);
  residue[0] = 1;
  for (Axis a : kAxes) {
    if (std::find(grouped.begin(), grouped.end(), a) != grouped.end()) continue;
    std::vector<char> next(static_cast<size_t>(g), 0);
    const int steps = std::min(shape_.size(a), g);  // c and c + G give the same residue
    for (int r = 0; r < g; ++r) {
      if (!residue[static_cast<size_t>(r)]) continue;
      for (int c = 0; c < steps; ++c)
        next[static_cast<size_t>((r + int64_t{c} * stride(a)) % g)] = 1;
    }
    residue.swap(next);
  }
  for (int r = 0; r < g; ++r)
    if (residue[static_cast<size_t>(r)] && r + span >= g) return true;
  return false;
}

bool DeviceMesh::group_crosses_nodes(int rank, GroupKind kind) const {
  const MeshCoord c = coord_of(rank);
  int lo = rank, hi = rank;
  for (Axis a : group_axes(kind)) {
    lo -= c.get(a) * stride(a);
    hi += (shape_.size(a) - 1 - c.get(a)) * stride(a);
  }
  const int node_start = node_of(rank) * gpus_per_node_;
  return lo < node_start || hi >= node_start + gpus_per_node_;
}

// The sparse mesh's formula (top of mesh.h): a rank's block starts at rank - b, b = rank mod B.
std::vector<int> DeviceMesh::expert_group_members(int rank, ExpertGroupKind kind) const {
  if (rank < 0 || rank >= world_) throw std::out_of_range("rank outside the mesh");
  const int block = shape_.expert_block_size(), ep = shape_.ep;
  const int b = rank % block, block_start = rank - b;
  std::vector<int> members;
  if (kind == ExpertGroupKind::ep) {
    for (int e = 0; e < ep; ++e) members.push_back(block_start + (b / ep) * ep + e);
  } else {
    for (int f = 0; f < block / ep; ++f) members.push_back(block_start + f * ep + b % ep);
  }
  return members;
}

int DeviceMesh::expert_group_rank(int rank, ExpertGroupKind kind) const {
  const int b = rank % shape_.expert_block_size();
  return kind == ExpertGroupKind::ep ? b % shape_.ep : b / shape_.ep;
}

std::vector<std::vector<int>> DeviceMesh::expert_groups(ExpertGroupKind kind) const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < world_; ++r)
    if (expert_group_rank(r, kind) == 0) out.push_back(expert_group_members(r, kind));
  return out;
}

// An ep group is ep consecutive ranks starting at a multiple of ep (blocks start at multiples of
// B, a multiple of ep); an efsdp group starts at block_start + o (o < ep) and spans B - ep. The
// starts' residues mod G repeat after G groups, so at most G starts (times ep offsets) are looked at.
bool DeviceMesh::any_expert_group_crosses_nodes(ExpertGroupKind kind) const {
  const int64_t g = gpus_per_node_, block = shape_.expert_block_size(), ep = shape_.ep;
  if (kind == ExpertGroupKind::ep) {
    const int64_t groups = std::min<int64_t>(world_ / ep, g);
    for (int64_t k = 0; k < groups; ++k)
      if ((k * ep) % g + ep > g) return true;
    return false;
  }
  const int64_t span = block - ep;
  if (span >= g) return true;
  const int64_t blocks = std::min<int64_t>(world_ / block, g);
  for (int64_t k = 0; k < blocks; ++k)
    for (int64_t o = 0; o < ep; ++o)
      if ((k * block + o) % g + span >= g) return true;
  return false;
}

}  // namespace meshwork
