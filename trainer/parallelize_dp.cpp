#include "trainer/parallelize_dp.h"

#include <torch/torch.h>

#include "trainer/fused_ops.h"

namespace meshwork::trainer {

using at::Tensor;

struct DataParallel::Unit {
  int index = 0;  // the model's unit number
  int slot = 0;   // its index in units_
  int param = 0;  // its (dense) flat parameter's index in params_
  // Expert parallelism: the experts' flat parameter (index in params_, -1: none) and where its
  // range [expert_lo, expert_hi) sits in the unit's local flat layout.
  int expert_param = -1;
  int64_t expert_lo = 0, expert_hi = 0;
  bool split() const { return expert_param >= 0; }
  bool sharded = false;
  int64_t numel = 0;
  int64_t padded = 0;
  int64_t shard_numel = 0;
  // Storage of the gathered (full, padded) parameters. Its data is dropped when freed and put
  // back when gathered again; the tensors autograd saved (views the block's ops keep for
  // backward) share this storage, so they see the data again when the backward needs it, as in
  // FSDP's storage resize trick.
  c10::Storage storage;
  bool resident = false;
  // Prefetch (FSDP2's implicit prefetch of one unit): an all-gather started while the unit
  // before it (forward) or after it (backward) computes; gather() waits for it.
  bool prefetching = false;
  Communicator::Pending pending;
  Tensor prefetch_src, prefetch_buf;
  // The unit's full fp32 gradient summed over the micro-batches before the last one (padded).
  Tensor grad_accum;
};

// shard (fp32 leaf) -> the unit's full parameters in the compute dtype. Forward all-gathers (or
// reuses what the pre-backward hook gathered); backward reduce-scatters the full gradient in
// fp32 into the shard's gradient and frees the gathered parameters.
struct UnshardFunction : public torch::autograd::Function<UnshardFunction> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& shard,
                        int64_t dp_ptr, int64_t unit) {
    auto* dp = reinterpret_cast<DataParallel*>(dp_ptr);
    DataParallel::Unit& u = dp->unit(static_cast<int>(unit));
    ctx->saved_data["dp"] = dp_ptr;
    ctx->saved_data["unit"] = unit;
    if (!u.resident) dp->gather(u);
    // A fresh (non-view) tensor on the gathered storage: only the first numel elements.
    Tensor full = at::empty({0}, at::TensorOptions()
                                     .dtype(dp->options_.compute_dtype)
                                     .device(dp->options_.device));
    full.set_(u.storage, 0, {u.numel}, {1});
    return full;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* dp = reinterpret_cast<DataParallel*>(ctx->saved_data["dp"].toInt());
    DataParallel::Unit& u = dp->unit(static_cast<int>(ctx->saved_data["unit"].toInt()));
    if (!(u.index == 0 && dp->options_.keep_root_gathered)) dp->free(u);
    // Reduce in fp32 (FSDP2 reduce_dtype), over the padded length the shards tile.
    Tensor g = grads[0].to(at::kFloat).reshape(-1);
    if (u.padded > u.numel) g = at::constant_pad_nd(g, {0, u.padded - u.numel});
    // --fsdp-grad-sync step: as FSDP2's set_requires_gradient_sync(False) on every micro-batch
    // but the last, the full gradient is summed locally and reduce-scattered once per step
    // (core's estimates with fsdp_reduce_once_per_step count one reduce-scatter and the
    // unsharded fp32 gradients held between micro-batches). Otherwise every backward
    // reduce-scatters and the shard gradients accumulate.
    if (u.grad_accum.defined()) {
      u.grad_accum.add_(g);
      g = std::move(u.grad_accum);
      u.grad_accum = Tensor();
    }
    if (!dp->armed_[u.slot] && dp->options_.fsdp_grad_sync_per_step) {
      // Owned here and summed into in place: never alias the incoming gradient.
      u.grad_accum = g.is_alias_of(grads[0]) ? g.clone() : g;  // g is flat and contiguous
      return {Tensor(), Tensor(), Tensor()};
    }
    Tensor out = at::empty({u.shard_numel}, g.options());
    dp->comm_.reduce_scatter(out, g.contiguous(), dp->options_.shard_group);
    return {out, Tensor(), Tensor()};
  }
};

// The same for a unit whose expert slices have their own flat parameter (expert parallelism):
// (dense shard, expert shard) -> the unit's full local parameters; backward cuts the gradient
// into its dense part, reduce-scattered over the shard group, and its expert part,
// reduce-scattered over efsdp.
struct UnshardSplitFunction : public torch::autograd::Function<UnshardSplitFunction> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& dense, const Tensor& experts,
                        int64_t dp_ptr, int64_t unit) {
    auto* dp = reinterpret_cast<DataParallel*>(dp_ptr);
    DataParallel::Unit& u = dp->unit(static_cast<int>(unit));
    ctx->saved_data["dp"] = dp_ptr;
    ctx->saved_data["unit"] = unit;
    if (!u.resident) dp->gather(u);
    Tensor full = at::empty({0}, at::TensorOptions().dtype(dp->options_.compute_dtype).device(dp->options_.device));
    full.set_(u.storage, 0, {u.numel}, {1});
    return full;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* dp = reinterpret_cast<DataParallel*>(ctx->saved_data["dp"].toInt());
    DataParallel::Unit& u = dp->unit(static_cast<int>(ctx->saved_data["unit"].toInt()));
    dp->free(u);
    Tensor g = grads[0].to(at::kFloat).reshape(-1);
    if (u.grad_accum.defined()) {
      u.grad_accum.add_(g);
      g = std::move(u.grad_accum);
      u.grad_accum = Tensor();
    }
    if (!dp->armed_[u.slot] && dp->options_.fsdp_grad_sync_per_step) {
      u.grad_accum = g.is_alias_of(grads[0]) ? g.clone() : g;
      return {Tensor(), Tensor(), Tensor(), Tensor()};
    }
    const FlatParam& dense = dp->params_[u.param];
    const FlatParam& experts = dp->params_[u.expert_param];
    Tensor dense_g = at::cat({g.narrow(0, 0, u.expert_lo), g.narrow(0, u.expert_hi, u.numel - u.expert_hi)});
    dense_g = at::constant_pad_nd(dense_g, {0, dense.padded - dense.numel});
    Tensor expert_g = at::constant_pad_nd(g.narrow(0, u.expert_lo, experts.numel), {0, experts.padded - experts.numel});
    Tensor dense_out = at::empty({dense.param.numel()}, g.options());
    Tensor expert_out = at::empty({experts.param.numel()}, g.options());
    dp->comm_.reduce_scatter(dense_out, dense_g, dp->options_.shard_group);
    dp->comm_.reduce_scatter(expert_out, expert_g, *dp->options_.expert_shard_group);
    return {dense_out, expert_out, Tensor(), Tensor()};
  }
};

struct DataParallel::AllReduceWhenAccumulated : torch::autograd::PostAccumulateGradHook {
  AllReduceWhenAccumulated(DataParallel* dp, int unit) : dp(dp), unit(unit) {}
  void operator()(const torch::autograd::Variable& param) override {
    if (!dp->armed_[dp->slot_[unit]]) return;
    InFlight f{unit, param.grad(), {}};
    f.pending = dp->comm_.all_reduce_start(f.buffer, dp->comm_.group(GroupKind::dp_replicate));
    dp->in_flight_.push_back(std::move(f));
  }
  DataParallel* dp;
  int unit;
};

DataParallel::DataParallel(Model& model, Communicator& comm, DataParallelOptions options)
    : model_(model), comm_(comm), options_(std::move(options)) {
  const Group& sg = comm_.group(options_.shard_group);
  const int n = sg.size();
  slot_.assign(model_.num_units(), -1);
  for (int i = 0; i < model_.num_units(); ++i) {
    if (!model_.holds(i)) continue;  // another pipeline stage's
    slot_[i] = static_cast<int>(units_.size());
    const bool read = static_cast<bool>(options_.read_local);
    Tensor local;
    if (!read) {
      Tensor full = model_.init_unit(i, options_.seed);
      local = options_.localize ? options_.localize(i, full) : full;
      TORCH_CHECK(local.numel() == model_.layout(i).numel(), "unit ", i, ": localized size ",
                  local.numel(), " does not match the model layout ", model_.layout(i).numel());
    }
    auto u = std::make_unique<Unit>();
    u->index = i;
    u->slot = slot_[i];
    u->numel = model_.layout(i).numel();
    u->param = static_cast<int>(params_.size());
    const auto [expert_lo, expert_hi] =
        options_.expert_range ? options_.expert_range(i) : std::pair<int64_t, int64_t>{0, 0};
    if (expert_hi > expert_lo) {
      add_split_unit(*u, local, expert_lo, expert_hi);
      units_.push_back(std::move(u));
      continue;
    }
    u->sharded = n > 1;
    u->numel = model_.layout(i).numel();
    // Pad to a multiple of n so every member holds an equal shard: shard_numel = ceil(numel/n).
    u->shard_numel = (u->numel + n - 1) / n;
    u->padded = u->shard_numel * n;
    FlatParam fp;
    fp.unit = i;
    fp.numel = u->numel;
    fp.padded = u->padded;
    fp.sharded = u->sharded;
    if (u->sharded) fp.shard_offset = sg.rank * u->shard_numel;
    if (read) {
      local = options_.read_local(i, fp.shard_offset, u->sharded ? u->shard_numel : u->numel);
    } else if (u->sharded) {
      Tensor padded = at::constant_pad_nd(local, {0, u->padded - u->numel});
      local = padded.narrow(0, sg.rank * u->shard_numel, u->shard_numel);
    }
    // tp ranks hold different pieces (their replicated ranges are recorded in tp_copies).
    // Pipeline stages hold different units: the copies are among one stage's ranks.
    fp.copies = comm_.world_size() / (n * comm_.group_size(GroupKind::tp) * comm_.group_size(GroupKind::pp));
    // A read piece is already this rank's own fresh tensor: no copy (the loader's peak memory).
    fp.param = (read ? local.to(options_.device) : local.to(options_.device).clone()).set_requires_grad(true);
    if (!u->sharded && comm_.group(GroupKind::dp_replicate).size() > 1) {
      // DDP overlap: once the unit's gradient of the armed (last) micro-batch has been
      // accumulated into .grad (the pieces' gradients are concatenated by split's backward
      // first), all-reduce .grad in place right away; finish_gradients() waits for it. A
      // post-accumulate hook, as PyTorch's DDP/FSDP2 use: a plain tensor hook runs before the
      // accumulation, so it would need its own sum buffer and the accumulation after it would
      // be wasted (~2 passes over every gradient per step).
      torch::autograd::impl::set_post_acc_grad_hooks(
          fp.param, std::make_unique<AllReduceWhenAccumulated>(this, i));
    }
    params_.push_back(std::move(fp));
    units_.push_back(std::move(u));
  }
  armed_.assign(units_.size(), false);
}

void DataParallel::add_split_unit(Unit& u, const Tensor& local, int64_t lo, int64_t hi) {
  const Group& sg = comm_.group(options_.shard_group);
  const Group& eg = *options_.expert_shard_group;
  const bool read = static_cast<bool>(options_.read_local);
  const int i = u.index;
  const int64_t ne = hi - lo, nd = u.numel - ne;
  u.expert_lo = lo;
  u.expert_hi = hi;
  u.sharded = true;  // always through UnshardSplitFunction (it gathers, frees and reduces both parts)
  const int stages = comm_.group_size(GroupKind::pp);
  auto flat = [&](int64_t numel, const Group& g, bool expert) {
    FlatParam fp;
    fp.unit = i;
    fp.expert = expert;
    fp.expert_lo = lo;
    fp.expert_numel = ne;
    fp.numel = numel;
    const int64_t shard = (numel + g.size() - 1) / g.size();
    fp.padded = shard * g.size();
    fp.sharded = g.size() > 1;
    fp.shard_offset = g.rank * shard;
    // Dense: as any unit. Experts: the ranks holding the same slice and shard are the replicas.
    fp.copies = expert ? comm_.world_size() / (g.size() * comm_.mesh().shape().ep * stages)
                       : comm_.world_size() / (g.size() * comm_.group_size(GroupKind::tp) * stages);
    return fp;
  };
  FlatParam dense = flat(nd, sg, false), experts = flat(ne, eg, true);
  const int64_t dense_shard = dense.padded / sg.size(), expert_shard = experts.padded / eg.size();
  Tensor dense_part, expert_part;
  if (read) {
    // The dense flat's element x is the local layout's x below the experts, x + ne above them.
    dense_part = at::zeros({dense_shard}, at::kFloat);
    const int64_t a = dense.shard_offset, b = std::min(a + dense_shard, nd);
    if (std::min(b, lo) > a) dense_part.narrow(0, 0, std::min(b, lo) - a).copy_(options_.read_local(i, a, std::min(b, lo) - a));
    if (b > std::max(a, lo)) {
      const int64_t from = std::max(a, lo);
      dense_part.narrow(0, from - a, b - from).copy_(options_.read_local(i, from + ne, b - from));
    }
    expert_part = at::zeros({expert_shard}, at::kFloat);
    const int64_t ea = experts.shard_offset, eb = std::min(ea + expert_shard, ne);
    if (eb > ea) expert_part.narrow(0, 0, eb - ea).copy_(options_.read_local(i, lo + ea, eb - ea));
  } else {
    Tensor d = at::cat({local.narrow(0, 0, lo), local.narrow(0, hi, u.numel - hi)});
    dense_part = at::constant_pad_nd(d, {0, dense.padded - nd}).narrow(0, dense.shard_offset, dense_shard);
    expert_part = at::constant_pad_nd(local.narrow(0, lo, ne), {0, experts.padded - ne})
                      .narrow(0, experts.shard_offset, expert_shard);
  }
  dense.param = dense_part.to(options_.device).clone().set_requires_grad(true);
  experts.param = expert_part.to(options_.device).clone().set_requires_grad(true);
  u.param = static_cast<int>(params_.size());
  params_.push_back(std::move(dense));
  u.expert_param = static_cast<int>(params_.size());
  params_.push_back(std::move(experts));
}

Tensor DataParallel::gather_split(Unit& u) {
  auto opts = at::TensorOptions().dtype(options_.compute_dtype).device(options_.device);
  const FlatParam& dense = params_[u.param];
  const FlatParam& experts = params_[u.expert_param];
  Tensor d = at::empty({dense.padded}, opts), e = at::empty({experts.padded}, opts);
  comm_.all_gather(d, dense.param.detach().to(options_.compute_dtype).contiguous(), options_.shard_group);
  comm_.all_gather(e, experts.param.detach().to(options_.compute_dtype).contiguous(), *options_.expert_shard_group);
  return at::cat({d.narrow(0, 0, u.expert_lo), e.narrow(0, 0, experts.numel),
                  d.narrow(0, u.expert_lo, dense.numel - u.expert_lo)});
}

DataParallel::~DataParallel() = default;

void DataParallel::gather(Unit& u) {
  Tensor tmp;
  if (u.split()) {
    tmp = gather_split(u);
  } else if (u.prefetching) {
    comm_.wait(u.pending);
    tmp = std::move(u.prefetch_buf);
    u.prefetch_buf = Tensor();
    u.prefetch_src = Tensor();
    u.prefetching = false;
  } else {
    auto opts = at::TensorOptions().dtype(options_.compute_dtype).device(options_.device);
    Tensor shard = params_[u.param].param.detach().to(options_.compute_dtype).contiguous();
    tmp = at::empty({u.padded}, opts);
    comm_.all_gather(tmp, shard, options_.shard_group);
  }
  if (!u.storage) {
    u.storage = tmp.storage();
  } else {
    // Move the freshly gathered bytes into the unit's storage (the one saved tensors share).
    at::DataPtr data = tmp.storage().unsafeGetStorageImpl()->set_data_ptr(
        at::DataPtr(nullptr, tmp.device()));
    u.storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(data));
    u.storage.unsafeGetStorageImpl()->set_nbytes(tmp.nbytes());
  }
  u.resident = true;
}

void DataParallel::prefetch(int unit) {
  // Decoder blocks only: the root stays gathered from its forward to the end of its backward.
  if (unit < 1 || !held(unit)) return;
  Unit& u = this->unit(unit);
  if (!u.sharded || u.split() || u.resident || u.prefetching) return;
  auto opts = at::TensorOptions().dtype(options_.compute_dtype).device(options_.device);
  u.prefetch_src = params_[u.param].param.detach().to(options_.compute_dtype).contiguous();
  u.prefetch_buf = at::empty({u.padded}, opts);
  u.pending = comm_.all_gather_start(u.prefetch_buf, u.prefetch_src, comm_.group(options_.shard_group));
  u.prefetching = true;
}

void DataParallel::free(Unit& u) {
  if (!u.resident) return;
  u.storage.unsafeGetStorageImpl()->set_data_ptr_noswap(at::DataPtr(nullptr, options_.device));
  u.storage.unsafeGetStorageImpl()->set_nbytes(0);
  u.resident = false;
}

at::Tensor DataParallel::acquire(int unit) {
  Unit& u = this->unit(unit);
  Tensor& p = params_[u.param].param;
  if (u.split()) {
    last_acquired_ = unit;
    return UnshardSplitFunction::apply(p, params_[u.expert_param].param, reinterpret_cast<int64_t>(this),
                                       static_cast<int64_t>(unit));
  }
  if (!u.sharded) return options_.compute_dtype == at::kFloat ? p : p.to(options_.compute_dtype);
  Tensor full =
      UnshardFunction::apply(p, reinterpret_cast<int64_t>(this), static_cast<int64_t>(unit));
  // Prefetch the unit that runs next: the following block in forward (and after the root),
  // the previous one when blocks are acquired in reverse (activation checkpointing recomputes
  // them in backward, last block first).
  const int next = unit == 0 || unit > last_acquired_ ? unit + 1 : unit - 1;
  last_acquired_ = unit;
  prefetch(next);
  return full;
}

at::Tensor DataParallel::release(int unit, at::Tensor output) {
  Unit& u = this->unit(unit);
  // The root unit stays gathered until its backward is done (it is needed at both ends).
  if (!u.sharded || unit == 0) return output;
  free(u);
  if (output.requires_grad()) {
    // Pre-backward: when the gradient of the block's output is ready, the block's backward is
    // next; gather its parameters back into the storage its saved tensors share.
    output.register_hook([this, &u](const Tensor&) {
      if (!u.resident) gather(u);
      // The block before this one runs its backward next: gather it meanwhile.
      prefetch(u.index - 1);
    });
  }
  return output;
}

void DataParallel::arm_gradient_sync() { armed_.assign(units_.size(), true); }

void DataParallel::arm_gradient_sync(const std::vector<int>& units) {
  for (int u : units)
    if (held(u)) armed_[slot_[u]] = true;
}

void DataParallel::end_forward_only() {
  for (auto& u : units_) {
    if (u->prefetching) gather(*u);  // wait for it: its buffer must not be freed under the collective
    free(*u);
  }
  last_acquired_ = -1;
}

void DataParallel::finish_gradients() {
  for (auto& u : units_) {
    if (u->prefetching) gather(*u);  // none is left in flight normally; never leave one
    free(*u);
  }
  last_acquired_ = -1;
  for (auto& u : units_) u->grad_accum = Tensor();  // reduce-scattered in the last backward
  std::vector<bool> reduced(params_.size(), false);
  for (auto& f : in_flight_) {
    comm_.wait(f.pending);
    const int p = unit(f.unit).param;
    params_[p].param.mutable_grad() = f.buffer;
    reduced[p] = true;
  }
  in_flight_.clear();
  armed_.assign(units_.size(), false);
  for (auto& fp : params_)
    if (!fp.param.grad().defined()) fp.param.mutable_grad() = at::zeros_like(fp.param);
  const Group& rg = comm_.group(GroupKind::dp_replicate);
  if (rg.size() == 1) return;
  // DDP buckets: walk units in backward order (last block first), fill up to bucket_bytes,
  // all-reduce each bucket as one flat tensor (fewer, larger messages), copy back.
  std::vector<Tensor> bucket;
  int64_t bytes = 0;
  auto flush = [&] {
    if (bucket.empty()) return;
    std::vector<Tensor> flat_views;
    for (auto& g : bucket) flat_views.push_back(g.reshape(-1));
    Tensor flat = at::cat(flat_views);
    comm_.all_reduce(flat, rg);
    int64_t off = 0;
    for (auto& g : bucket) {
      g.view(-1).copy_(flat.narrow(0, off, g.numel()));
      off += g.numel();
    }
    bucket.clear();
    bytes = 0;
  };
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    if (reduced[static_cast<size_t>(params_.rend() - it - 1)]) continue;  // already all-reduced during backward
    Tensor g = it->param.grad();
    bucket.push_back(g);
    bytes += g.nbytes();
    if (bytes >= options_.bucket_bytes) flush();
  }
  flush();
}

double DataParallel::grad_norm() {
  // ||g||^2 over the mesh = sum over ranks of sum_p ||g_p||^2 / copies_p: a parameter that
  // `copies` ranks hold identically is counted once.
  // Profiled on `small`: the composite pow(2).sum(kDouble) took ~5 % of a step (it writes the
  // squares, then a double copy of them); on CPU one fused pass over the fp32 gradient.
  double local = 0;  // fused CPU sums
  Tensor on_device;  // other devices/dtypes: composite sums, kept on the device (no sync)
  // CUDA fp32: one multi-tensor norm launch over all of them (one read of each gradient; the
  // composite pow(2).sum(kDouble) also writes the squares and a double copy), as
  // torch.nn.utils.clip_grad_norm_ does; per-tensor norms in fp32, their weighted squares summed
  // in double.
  std::vector<Tensor> cuda_grads;
  std::vector<double> cuda_weights;
  auto add = [&](const Tensor& g, double weight) {
    if (fused_ops_apply(g) && g.is_contiguous()) {
      local += fused_sum_squares(g) * weight;
    } else if (g.is_cuda() && g.scalar_type() == at::kFloat) {
      cuda_grads.push_back(g);
      cuda_weights.push_back(weight);
    } else {
      Tensor s = g.pow(2).sum(at::kDouble).reshape({1}) * weight;
      on_device = on_device.defined() ? on_device + s : s;
    }
  };
  for (auto& fp : params_) {
    if (!fp.param.grad().defined()) continue;
    const Tensor& g = fp.param.grad();
    add(g, 1.0 / static_cast<double>(fp.copies));
    // A tp-replicated range is held by copies * tp_copies ranks: replace its 1/copies weight.
    for (const auto& c : fp.tp_copies)
      add(g.narrow(0, c.offset, c.numel), 1.0 / (fp.copies * c.tp_copies) - 1.0 / fp.copies);
  }
  Tensor sq = at::full({1}, local, at::TensorOptions().dtype(at::kDouble)).to(options_.device);
  if (on_device.defined()) sq += on_device;
  if (!cuda_grads.empty()) {
    Tensor norms = at::stack(at::_foreach_norm(cuda_grads, 2)).to(at::kDouble);
    Tensor w = at::tensor(cuda_weights, at::kDouble).to(norms.device());
    sq += (norms * norms * w).sum().reshape({1});
  }
  comm_.all_reduce(sq, comm_.world());
  return std::sqrt(sq.item<double>());
}

void DataParallel::scale_gradients(double factor) {
  for (auto& fp : params_)
    if (fp.param.grad().defined()) fp.param.mutable_grad().mul_(factor);
}

void DataParallel::zero_grad() {
  for (auto& fp : params_) fp.param.mutable_grad() = Tensor();
}

int64_t DataParallel::local_param_numel() const {
  int64_t n = 0;
  for (const auto& fp : params_) n += fp.param.numel();
  return n;
}

}  // namespace meshwork::trainer
