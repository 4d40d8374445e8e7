#include "trainer/comm.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

#include <torch/cuda.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
// The CPU flavour of the runtime bundle (meshtrain_cpu, docs/remote.md) links libtorch_cpu only:
// no NCCL (it lives in libtorch_cuda, with the CUDA math libraries, GBs a CPU node never needs).
#if defined(USE_C10D_NCCL) && !defined(MESHWORK_CPU_FLAVOUR)
#define MESHWORK_HAVE_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "trainer/store.h"

namespace meshwork::trainer {
namespace {

using Clock = std::chrono::steady_clock;

// The flat-buffer collectives were renamed in torch 2.15 (the old names stay as deprecated
// forwarders there). Older wheels, such as the 2.11 of the GPU machines bench/gpu.sh runs on,
// have only the old names.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 15)
c10::intrusive_ptr<c10d::Work> gather_flat(c10d::Backend& b, at::Tensor& out, at::Tensor& in) {
  return b.all_gather_single(out, in);
}
c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(c10d::Backend& b, at::Tensor& out, at::Tensor& in) {
  return b.reduce_scatter_single(out, in);
}
c10::intrusive_ptr<c10d::Work> all_to_all_flat(c10d::Backend& b, at::Tensor& out, at::Tensor& in) {
  std::vector<int64_t> counts;  // empty: equal splits
  return b.all_to_all_single(out, in, counts, counts);
}
c10::intrusive_ptr<c10d::Work> all_to_all_split(c10d::Backend& b, at::Tensor& out, at::Tensor& in,
                                                std::vector<int64_t>& out_splits, std::vector<int64_t>& in_splits) {
  return b.all_to_all_single(out, in, out_splits, in_splits);
}
#else
c10::intrusive_ptr<c10d::Work> gather_flat(c10d::Backend& b, at::Tensor& out, at::Tensor& in) {
  return b._allgather_base(out, in);
}
c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(c10d::Backend& b, at::Tensor& out, at::Tensor& in) {
  return b._reduce_scatter_base(out, in);
}
c10::intrusive_ptr<c10d::Work> all_to_all_flat(c10d::Backend& b, at::Tensor& out, at::Tensor& in) {
  std::vector<int64_t> counts;  // empty: equal splits
  return b.alltoall_base(out, in, counts, counts);
}
c10::intrusive_ptr<c10d::Work> all_to_all_split(c10d::Backend& b, at::Tensor& out, at::Tensor& in,
                                                std::vector<int64_t>& out_splits, std::vector<int64_t>& in_splits) {
  return b.alltoall_base(out, in, out_splits, in_splits);
}
#endif

std::shared_ptr<::gloo::transport::Device> new_gloo_device(const std::string& where) {
  if (where.rfind("if:", 0) == 0) return c10d::ProcessGroupGloo::createDeviceForInterface(where.substr(3));
  if (where.rfind("host:", 0) == 0) return c10d::ProcessGroupGloo::createDeviceForHostname(where.substr(5));
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// The Gloo device every process group of this process uses, one per address while any group
// holds it. A TCP device is an event loop thread (and a listening socket) that wakes every 10 ms
// even when idle (gloo/transport/tcp/loop.cc: epoll_wait(..., 10)). torch.distributed makes one
// per group: 4-7 for a training rank of 8 (its groups of more than one rank, and the world), 20
// for a rank of `meshtrain calibrate` (its probes' layouts and the split's), 100 wake-ups a second
// each. On the 2-core VM's 8 ranks those took 3.5 % of a core per calibrating rank, and its split
// steps ran 10-16 % slower than runs of the very same configuration (docs/estimator.md, "Split
// steps"). Groups share a device safely: every pair has its own connection, matched by the
// sequence number the device hands out (Comm.EveryGroupSharesOneGlooDevice).
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  // As torch.distributed does: GLOO_SOCKET_IFNAME picks the interface. MESHWORK_GLOO_HOSTNAME
  // picks an address. A loopback master means a single node: bind to loopback so a hostname
  // that does not resolve cannot break a local run.
  std::string where = "default";
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    where = std::string("if:") + ifname;
  else if (const char* host = std::getenv("MESHWORK_GLOO_HOSTNAME"); host && *host)
    where = std::string("host:") + host;
  else if (master_addr == "127.0.0.1" || master_addr == "localhost")
    where = "host:127.0.0.1";
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<::gloo::transport::Device>> shared;
  std::lock_guard<std::mutex> lock(mu);
  if (auto device = shared[where].lock()) return device;
  auto device = new_gloo_device(where);
  shared[where] = device;
  return device;
}

}  // namespace

Result<std::unique_ptr<Communicator>> Communicator::create(const CommOptions& options) {
  auto mesh = DeviceMesh::create(options.shape, options.ranks_per_node);
  if (!mesh.ok()) return mesh.error();
  if (mesh->world_size() != options.world_size)
    return Error{"world size", std::to_string(options.world_size),
                 "must equal the mesh product " + options.shape.to_string()};
  std::unique_ptr<Communicator> comm(new Communicator(options, std::move(mesh).value()));
  if (Status s = comm->connect(); !s.ok()) return s.error();
  return comm;
}

Communicator::Communicator(CommOptions options, DeviceMesh mesh)
    : options_(std::move(options)), mesh_(std::move(mesh)) {
  if (const char* m = std::getenv("MESHTRAIN_TEST_MISMATCH")) {
    int rank = -1;
    long long step = -1;
    if (std::sscanf(m, "%d:%lld", &rank, &step) == 2 && rank == options_.rank) test_mismatch_step_ = step;
  }
}

bool Communicator::test_mismatch_now() {
  if (test_mismatch_step_ < 0 || !flight_ || flight_->layout().step != test_mismatch_step_) return false;
  test_mismatch_step_ = -1;
  return true;
}

Communicator::~Communicator() = default;

c10::intrusive_ptr<c10d::Backend> Communicator::make_backend(const std::string& prefix, int rank,
                                                             int size) {
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
  if (options_.device == DeviceKind::cuda) {
#ifdef MESHWORK_HAVE_NCCL
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = options_.timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
#else
    throw std::runtime_error(
        "this meshtrain has no NCCL (the CPU flavour of the runtime bundle, or a LibTorch built without "
        "USE_C10D_NCCL): deploy the cuda flavour for --device cuda");
#endif
  }
  auto opts = c10d::ProcessGroupGloo::Options::create(options_.timeout);
  opts->devices.push_back(gloo_device(options_.master_addr));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
}

Status Communicator::connect() {
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(options_.master_port);
    so.isServer = options_.host_store;
    so.waitWorkers = false;
    so.timeout = options_.timeout;
    store_ = c10::make_intrusive<c10d::TCPStore>(options_.master_addr, so);
    // Every rank creates the groups of kind k at the k-th step, and belongs to exactly one
    // group of each kind, so the members of a group always construct it together.
    for (size_t k = 0; k < kGroupKinds.size(); ++k) {
      GroupKind kind = kGroupKinds[k];
      Group& g = groups_[k];
      g.kind = kind;
      g.members = mesh_.group_members(options_.rank, kind);
      g.rank = mesh_.group_rank(options_.rank, kind);
      if (g.size() > 1)
        g.backend = make_backend(options_.group_prefix + "/" + std::string(group_name(kind)) + "/" +
                                     std::to_string(mesh_.group_index(options_.rank, kind)),
                                 g.rank, g.size());
    }
    // The sparse mesh: created by every rank in the same order (ep, then efsdp), each rank in
    // exactly one group of each, as the dense groups above.
    for (ExpertGroupKind kind : kExpertGroupKinds) {
      Group& g = expert_groups_[static_cast<size_t>(kind)];
      g.expert = kind;
      g.kind = kind == ExpertGroupKind::ep ? GroupKind::tp : GroupKind::dp_shard;  // unused: charge() reads `expert`
      g.members = mesh_.expert_group_members(options_.rank, kind);
      g.rank = mesh_.expert_group_rank(options_.rank, kind);
      if (options_.shape.ep > 1 && g.size() > 1)
        g.backend = make_backend(options_.group_prefix + "/" + std::string(expert_group_name(kind)) + "/" +
                                     std::to_string(g.members.front()),
                                 g.rank, g.size());
    }
    world_.world = true;
    for (int r = 0; r < options_.world_size; ++r) world_.members.push_back(r);
    world_.rank = options_.rank;
    if (world_.size() > 1) world_.backend = make_backend(options_.group_prefix + "/world/0", world_.rank, world_.size());
  } catch (const std::exception& e) {
    return Error{"rendezvous", options_.master_addr + ":" + std::to_string(options_.master_port),
                 std::string("could not connect the process groups: ") + e.what()};
  }
  return Status::Ok();
}

const Group& Communicator::group(GroupKind kind) const {
  return groups_[static_cast<size_t>(kind)];
}

c10::intrusive_ptr<c10d::Store> Communicator::store() const { return store_; }

void Communicator::charge(const Group& g, double seconds) {
  const MeshShape& shape = options_.shape;
  if (g.expert) {
    if (*g.expert == ExpertGroupKind::ep)
      times_.ep += seconds;
    else
      times_.seconds[Axis::dp_shard] += seconds;
    return;
  }
  std::vector<Axis> axes = g.world ? std::vector<Axis>(kAxes.begin(), kAxes.end())
                                   : group_axes(g.kind);
  // Weight (size - 1) per axis: the peers a ring member talks to along it (header comment).
  double total = 0;
  for (Axis a : axes) total += shape.size(a) - 1;
  if (total <= 0) return;
  for (Axis a : axes)
    times_.seconds[a] += seconds * (shape.size(a) - 1) / total;
}

void Communicator::finish(const Group& g, Clock::time_point start) {
  if (options_.device == DeviceKind::cuda) torch::cuda::synchronize();
  charge(g, std::chrono::duration<double>(Clock::now() - start).count());
}

void Communicator::all_reduce(at::Tensor& t, const Group& g, bool max) {
  if (g.size() == 1) return;
  if (test_mismatch_now()) {
    at::Tensor out = at::empty({g.size() * t.numel()}, t.options());
    all_gather(out, t, g);
    return;
  }
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::all_reduce, static_cast<int64_t>(t.nbytes()));
  std::vector<at::Tensor> ts{t};
  c10d::AllreduceOptions o;
  o.reduceOp = max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  g.backend->allreduce(ts, o)->wait();
  flight_exit(g);
  finish(g, start);
}

Communicator::Pending Communicator::all_reduce_start(at::Tensor& t, const Group& g) {
  Pending p;
  p.group = &g;
  if (g.size() == 1) return p;
  p.flight = flight_start(g, FlightOpKind::all_reduce, static_cast<int64_t>(t.nbytes()));
  std::vector<at::Tensor> ts{t};
  p.work = g.backend->allreduce(ts);
  return p;
}

void Communicator::wait(Pending& p) {
  if (!p.work) return;
  auto start = Clock::now();
  if (flight_ && p.flight.group >= 0) flight_->wait(p.flight);
  p.work->wait();
  p.work.reset();
  if (p.work2) {
    p.work2->wait();
    p.work2.reset();
  }
  if (p.flight.group >= 0) flight_exit(*p.group);
  finish(*p.group, start);
}

Communicator::Pending Communicator::send_recv_start(const at::Tensor& send_t, int dst,
                                                    at::Tensor& recv_t, int src, const Group& g,
                                                    int tag) {
  TORCH_CHECK(send_t.is_contiguous() && recv_t.is_contiguous(),
              "send_recv_start: both buffers must be contiguous");
  Pending p;
  p.group = &g;
  p.flight = flight_start(g, FlightOpKind::send_recv, static_cast<int64_t>(send_t.nbytes()));
  std::vector<at::Tensor> s{send_t};
  std::vector<at::Tensor> r{recv_t};
  p.work = g.backend->send(s, dst, tag);
  p.work2 = g.backend->recv(r, src, tag);
  return p;
}

Communicator::Pending Communicator::send_start(const at::Tensor& t, int dst, const Group& g, int tag) {
  TORCH_CHECK(t.is_contiguous(), "send_start: the buffer must be contiguous");
  Pending p;
  p.group = &g;
  p.flight = flight_start(g, FlightOpKind::send, static_cast<int64_t>(t.nbytes()));
  std::vector<at::Tensor> s{t};
  p.work = g.backend->send(s, dst, tag);
  return p;
}

Communicator::Pending Communicator::all_gather_start(at::Tensor& out, const at::Tensor& in,
                                                    const Group& g) {
  TORCH_CHECK(out.numel() == in.numel() * g.size(), "all_gather_start: output size mismatch");
  Pending p;
  p.group = &g;
  if (g.size() == 1) {
    out.view(-1).copy_(in.reshape(-1));
    return p;
  }
  TORCH_CHECK(out.is_contiguous() && in.is_contiguous(),
              "all_gather_start: both buffers must be contiguous");
  at::Tensor input = in.view(-1);
  at::Tensor output = out.view(-1);
  p.flight = flight_start(g, FlightOpKind::all_gather, static_cast<int64_t>(in.nbytes()));
  p.work = gather_flat(*g.backend, output, input);
  return p;
}

void Communicator::all_gather(at::Tensor& out, const at::Tensor& in, const Group& g) {
  TORCH_CHECK(out.numel() == in.numel() * g.size(), "all_gather: output size mismatch");
  if (g.size() == 1) {
    out.view(-1).copy_(in.reshape(-1));
    return;
  }
  TORCH_CHECK(out.is_contiguous(), "all_gather: the output must be contiguous");
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::all_gather, static_cast<int64_t>(in.nbytes()));
  // Gloo wants output dim 0 = n x input dim 0: gather flat views, whatever the shapes.
  at::Tensor input = in.contiguous().view(-1);
  at::Tensor output = out.view(-1);
  gather_flat(*g.backend, output, input)->wait();
  flight_exit(g);
  finish(g, start);
}

void Communicator::reduce_scatter(at::Tensor& out, const at::Tensor& in, const Group& g) {
  const int64_t n = g.size();
  TORCH_CHECK(in.numel() == out.numel() * n, "reduce_scatter: input size mismatch");
  if (n == 1) {
    out.view(-1).copy_(in.reshape(-1));
    return;
  }
  TORCH_CHECK(out.is_contiguous(), "reduce_scatter: the output must be contiguous");
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::reduce_scatter, static_cast<int64_t>(in.nbytes()));
  // Flat views: chunk i of the input is member i's block, whatever the shapes.
  at::Tensor input = in.contiguous().view(-1);
  if (options_.device == DeviceKind::cuda || options_.reduce_scatter == ReduceScatterImpl::native) {
    at::Tensor output = out.view(-1);
    reduce_scatter_flat(*g.backend, output, input)->wait();
  } else {
    // All-to-all: member j receives chunk j of every member's input, block i from member i;
    // then sums the n blocks in member order. Each member sends and receives (n-1)/n of the
    // input, the minimum for a reduce-scatter (a ring reduce-scatter moves the same).
    at::Tensor blocks = at::empty_like(input);
    all_to_all_flat(*g.backend, blocks, input)->wait();
    at::Tensor view = blocks.view({n, -1});
    at::Tensor acc = out.view(-1);
    acc.copy_(view[0]);
    for (int64_t i = 1; i < n; ++i) acc.add_(view[i]);
  }
  flight_exit(g);
  finish(g, start);
}

void Communicator::broadcast(at::Tensor& t, int root, const Group& g) {
  if (g.size() == 1) return;
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::broadcast, static_cast<int64_t>(t.nbytes()));
  std::vector<at::Tensor> ts{t};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  g.backend->broadcast(ts, o)->wait();
  flight_exit(g);
  finish(g, start);
}

void Communicator::send(const at::Tensor& t, int peer, const Group& g, int tag) {
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::send, static_cast<int64_t>(t.nbytes()));
  std::vector<at::Tensor> ts{t.contiguous()};
  g.backend->send(ts, peer, tag)->wait();
  flight_exit(g);
  finish(g, start);
}

void Communicator::recv(at::Tensor& t, int peer, const Group& g, int tag) {
  TORCH_CHECK(t.is_contiguous(), "recv: the buffer must be contiguous");
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::recv, static_cast<int64_t>(t.nbytes()));
  std::vector<at::Tensor> ts{t};
  g.backend->recv(ts, peer, tag)->wait();
  flight_exit(g);
  finish(g, start);
}

void Communicator::send_recv(const at::Tensor& send_t, int dst, at::Tensor& recv_t, int src,
                             const Group& g, int tag) {
  TORCH_CHECK(recv_t.is_contiguous(), "send_recv: the receive buffer must be contiguous");
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::send_recv, static_cast<int64_t>(send_t.nbytes()));
  std::vector<at::Tensor> s{send_t.contiguous()};
  std::vector<at::Tensor> r{recv_t};
  // Post both before waiting: in a ring every member sends and receives at once, so blocking
  // on the send first would deadlock.
  auto ws = g.backend->send(s, dst, tag);
  auto wr = g.backend->recv(r, src, tag);
  ws->wait();
  wr->wait();
  flight_exit(g);
  finish(g, start);
}

void Communicator::all_to_all(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_splits,
                              const std::vector<int64_t>& in_splits, const Group& g) {
  TORCH_CHECK(out.is_contiguous(), "all_to_all: the output must be contiguous");
  if (g.size() == 1) {
    out.copy_(in.view(out.sizes()));
    return;
  }
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::all_to_all, static_cast<int64_t>(in.nbytes()));
  at::Tensor input = in.contiguous();
  std::vector<int64_t> os = out_splits, is = in_splits;
  all_to_all_split(*g.backend, out, input, os, is)->wait();
  flight_exit(g);
  finish(g, start);
}

void Communicator::barrier(const Group& g) {
  if (g.size() == 1) return;
  auto start = Clock::now();
  flight_enter(g, FlightOpKind::barrier, 0);
  if (options_.device == DeviceKind::cuda) {
    // NCCL's barrier needs a device guess; an all-reduce of one element is the same fence.
    at::Tensor one = at::ones({1}, at::TensorOptions().device(at::kCUDA));
    std::vector<at::Tensor> ts{one};
    g.backend->allreduce(ts)->wait();
  } else {
    g.backend->barrier()->wait();
  }
  flight_exit(g);
  finish(g, start);
}

// ---- StoreHandle (store.h) ----

struct StoreHandle::Impl {
  c10::intrusive_ptr<c10d::Store> store;
};

StoreHandle::StoreHandle(const std::string& host, int port, bool is_server,
                         std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.isServer = is_server;
  so.waitWorkers = false;
  so.timeout = timeout;
  impl_->store = c10::make_intrusive<c10d::TCPStore>(host, so);
}

StoreHandle::~StoreHandle() = default;

void StoreHandle::set(const std::string& key, const std::string& value) {
  impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::optional<std::string> StoreHandle::try_get(const std::string& key) {
  if (!impl_->store->check({key})) return std::nullopt;
  auto v = impl_->store->get(key);
  return std::string(v.begin(), v.end());
}

int64_t StoreHandle::add(const std::string& key, int64_t delta) {
  return impl_->store->add(key, delta);
}

}  // namespace meshwork::trainer
