// Communicators: one c10d process group per mesh group, every collective timed and charged to
// its mesh axis.
//
// The groups come from core's DeviceMesh (groups(), group_members(), group_rank(),
// group_index()); this file never computes a rank or a group itself. Rendezvous goes through
// one c10d::TCPStore (hosted by the supervisor of node 0, or by rank 0 when launched by
// torchrun-style environment variables); each group gets its own PrefixStore
// "meshwork/pg/<group>/<index>" so several groups can connect at once without clashing.
//
// Backends: ProcessGroupGloo on CPU, ProcessGroupNCCL on CUDA (compiled when LibTorch has
// USE_C10D_NCCL). Every collective here is synchronous: it waits for completion (and, on
// CUDA, for the device) before returning, so the time it took is known and charged.
//
// Charging (docs/metrics.md): a collective on a single-axis group (dp_replicate, dp_shard, cp,
// tp) is charged to that axis. A collective on a flattened group (dp, dp_shard_cp, dp_cp) or on
// the world is split over the group's axes whose size is > 1, in proportion to (size - 1):
// (size - 1) is the number of peers a member exchanges data with along that axis in a ring, so
// the split follows where the bytes go. Axes of size 1 are never charged.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "core/error.h"
#include "core/mesh.h"
#include "core/run_config.h"
#include "trainer/flight_recorder.h"

namespace c10d {
class Store;
class Backend;
}  // namespace c10d

namespace meshwork::trainer {

// Seconds spent in collectives per axis (indexed by Axis), since the last reset().
struct CommTimes {
  AxisArray<double> seconds;
  double ep = 0;  // the experts' all-to-alls over the ep group ("comm_s.ep")
  void reset() {
    seconds = {};
    ep = 0;
  }
  double total() const {
    double t = ep;
    for (double s : seconds) t += s;
    return t;
  }
};

// How Gloo reduce-scatters (CUDA always uses NCCL's native reduce_scatter):
//   alltoall: all-to-all of the chunks + a local sum in member order. Moves the minimum
//             ((n-1)/n of the input per member) and sums in a fixed order (deterministic).
//   native:   Gloo's reduce_scatter_single, which LibTorch 2.x emulates with an all-reduce of the
//             whole input (about twice the bytes). Kept to measure against (bench/, tests).
enum class ReduceScatterImpl { alltoall, native };

struct CommOptions {
  int rank = 0;
  int world_size = 1;
  int ranks_per_node = 1;          // LOCAL_WORLD_SIZE: where core places ranks on nodes
  MeshShape shape;                 // resolved (no -1)
  DeviceKind device = DeviceKind::cpu;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool host_store = false;         // this process hosts the TCPStore (rank 0 without supervisor)
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  ReduceScatterImpl reduce_scatter = ReduceScatterImpl::alltoall;
  // Store key prefix of the process groups: several communicators of one run (meshtrain
  // calibrate builds one per group layout it measures) need their own.
  std::string group_prefix = "meshwork/pg";
};

// One process group of one mesh group (or of the world), as seen by one member.
struct Group {
  GroupKind kind = GroupKind::dp;
  bool world = false;              // the whole world (not a mesh group)
  // A group of the sparse (expert) mesh (ep > 1): ep is charged to "comm_s.ep"; efsdp, the FSDP
  // of one expert set over ranks borrowed from dp_shard x cp x tp, to dp_shard.
  std::optional<ExpertGroupKind> expert;
  std::vector<int> members;        // global ranks, in group-rank order
  int rank = 0;                    // this process's rank in the group
  c10::intrusive_ptr<c10d::Backend> backend;  // null when the group has one member
  int size() const { return static_cast<int>(members.size()); }
};

class Communicator {
 public:
  // Connects to the store and builds every group this rank belongs to (collective over the
  // world: every rank must call it). Errors (store unreachable, bad shape) come back as values.
  static Result<std::unique_ptr<Communicator>> create(const CommOptions& options);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  const DeviceMesh& mesh() const { return mesh_; }
  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }
  DeviceKind device() const { return options_.device; }
  const Group& group(GroupKind kind) const;
  const Group& world() const { return world_; }
  int group_size(GroupKind kind) const { return group(kind).size(); }
  // The sparse mesh's groups (core/mesh.h): built when the shape's ep > 1; with ep = 1 the ep
  // group is this rank alone and efsdp is the dp_shard x cp x tp block.
  const Group& expert_group(ExpertGroupKind kind) const { return expert_groups_[static_cast<size_t>(kind)]; }
  int group_rank(GroupKind kind) const { return group(kind).rank; }

  // --- collectives (synchronous, timed, charged). `g` is a GroupKind or world(). ---
  // In place: t = sum (or max) over the group's members.
  void all_reduce(at::Tensor& t, const Group& g, bool max = false);
  // out (n * in.numel() elements, contiguous) = concatenation of every member's `in`, in
  // group-rank order.
  void all_gather(at::Tensor& out, const at::Tensor& in, const Group& g);
  // out (in.numel() / n elements) = chunk `g.rank` of the element-wise sum of every member's
  // `in` (contiguous; numel divisible by n).
  void reduce_scatter(at::Tensor& out, const at::Tensor& in, const Group& g);
  void broadcast(at::Tensor& t, int root_group_rank, const Group& g);
  // Point to point inside a group (peers are group ranks). send_recv posts both, then waits:
  // the building block of a ring (each member sends to rank+1 and receives from rank-1).
  void send(const at::Tensor& t, int peer, const Group& g, int tag = 0);
  void recv(at::Tensor& t, int peer, const Group& g, int tag = 0);
  void send_recv(const at::Tensor& send_t, int dst, at::Tensor& recv_t, int src, const Group& g,
                 int tag = 0);
  void barrier(const Group& g);
  // All-to-all with uneven splits along dim 0 (Gloo alltoall_base): member i's rows
  // [sum in_splits[<j], + in_splits[j]) of `in` go to member j, and `out` (contiguous, sum of
  // out_splits rows) gets member j's rows for this member at rows [sum out_splits[<j], ...).
  // Every member's in_splits[j] must equal member j's out_splits[i]. Empty splits: equal chunks.
  void all_to_all(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_splits,
                  const std::vector<int64_t>& in_splits, const Group& g);

  // Asynchronous all-reduce (sum), for overlapping gradient reduction with backward. The time
  // charged is the time wait() blocks (the communication the step could not hide).
  struct Pending {
    c10::intrusive_ptr<c10d::Work> work;
    c10::intrusive_ptr<c10d::Work> work2;  // send_recv_start: the receive
    const Group* group = nullptr;
    FlightRecorder::Ticket flight;  // entered at the start, waited in at wait()
  };
  Pending all_reduce_start(at::Tensor& t, const Group& g);
  // Asynchronous all_gather (same contract as all_gather); `in` and `out` must stay alive and
  // untouched until wait().
  Pending all_gather_start(at::Tensor& out, const at::Tensor& in, const Group& g);
  // Posts a send to `dst` and a receive from `src` (group ranks) and returns at once, so a ring
  // step can compute while the next block travels; wait() charges the time it still blocks.
  // Both tensors must stay alive and untouched until wait().
  Pending send_recv_start(const at::Tensor& send_t, int dst, at::Tensor& recv_t, int src,
                          const Group& g, int tag = 0);
  // Posts a send to `dst` (group rank) and returns at once: a pipeline stage goes on computing
  // while its activation travels. `t` (contiguous) must stay alive and untouched until wait().
  Pending send_start(const at::Tensor& t, int dst, const Group& g, int tag = 0);
  void wait(Pending& p);

  // Convenience overloads by group kind.
  void all_reduce(at::Tensor& t, GroupKind k, bool max = false) { all_reduce(t, group(k), max); }
  void all_gather(at::Tensor& out, const at::Tensor& in, GroupKind k) { all_gather(out, in, group(k)); }
  void reduce_scatter(at::Tensor& out, const at::Tensor& in, GroupKind k) {
    reduce_scatter(out, in, group(k));
  }

  CommTimes& times() { return times_; }
  // Charges `seconds` spent communicating in `g` to its axes (the rule in the header comment).
  void charge(const Group& g, double seconds);
  c10::intrusive_ptr<c10d::Store> store() const;
  ReduceScatterImpl reduce_scatter_impl() const { return options_.reduce_scatter; }
  void set_reduce_scatter_impl(ReduceScatterImpl impl) { options_.reduce_scatter = impl; }
  // The flight recorder every collective is marked in (null: none). Not owned.
  void set_flight(FlightRecorder* flight) { flight_ = flight; }
  FlightRecorder* flight() const { return flight_; }

 private:
  Communicator(CommOptions options, DeviceMesh mesh);
  Status connect();
  c10::intrusive_ptr<c10d::Backend> make_backend(const std::string& prefix, int rank, int size);
  void finish(const Group& g, std::chrono::steady_clock::time_point start);
  // The flight recorder's marks (no-ops without one), in the group's slot (core/flight_layout.h):
  // a dense kind, the world, or the sparse mesh's ep / efsdp.
  static int flight_slot(const Group& g) {
    if (g.expert) return kFlightExpertSlot + static_cast<int>(*g.expert);
    return g.world ? kFlightWorldSlot : static_cast<int>(g.kind);
  }
  void flight_enter(const Group& g, FlightOpKind op, int64_t bytes) {
    if (flight_) flight_->enter(flight_slot(g), op, bytes);
  }
  FlightRecorder::Ticket flight_start(const Group& g, FlightOpKind op, int64_t bytes) {
    return flight_ ? flight_->start(flight_slot(g), op, bytes) : FlightRecorder::Ticket{};
  }
  void flight_exit(const Group&) {
    if (flight_) flight_->exit();
  }
  // MESHTRAIN_TEST_MISMATCH=<rank>:<step> (tests only): true once, at that rank's first
  // all-reduce of that step, which then runs an all-gather instead: a program bug to diagnose.
  bool test_mismatch_now();

  CommOptions options_;
  DeviceMesh mesh_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::array<Group, kGroupKinds.size()> groups_;
  std::array<Group, kExpertGroupKinds.size()> expert_groups_;
  Group world_;
  CommTimes times_;
  FlightRecorder* flight_ = nullptr;
  int64_t test_mismatch_step_ = -1;  // MESHTRAIN_TEST_MISMATCH's step for this rank, -1: none
};

}  // namespace meshwork::trainer
