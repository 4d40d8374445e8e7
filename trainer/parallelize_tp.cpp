#include "trainer/parallelize_tp.h"

#include <torch/torch.h>

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

const std::vector<TpPlanEntry>& tp_plan() {
  static const std::vector<TpPlanEntry> plan = {
      {"embed", TpStyle::vocab},         {"norm", TpStyle::replicate},
      {"head", TpStyle::vocab},          {"attn_norm", TpStyle::replicate},
      {"wq", TpStyle::colwise},          {"wk", TpStyle::colwise_kv},
      {"wv", TpStyle::colwise_kv},       {"wo", TpStyle::rowwise},
      {"mlp_norm", TpStyle::replicate},  {"w_gate", TpStyle::colwise},
      {"w_up", TpStyle::colwise},        {"w_down", TpStyle::rowwise},
      {"bq", TpStyle::colwise},          {"bk", TpStyle::colwise_kv},
      {"bv", TpStyle::colwise_kv},
      // Qwen3's per-head q/k norms: one [head_dim] weight every head shares, so every tp rank
      // holds it whole. (OLMoE's whole-projection norms are refused with tp > 1 by main.cpp.)
      {"q_norm", TpStyle::replicate},    {"k_norm", TpStyle::replicate},
      // Mixture of experts: router and experts whole on every tp rank, run on the rank's own rows
      // outside any tp region (docs/moe.md); partial gradients under SP like the norms'.
      {"router", TpStyle::replicate},    {"expert_gate", TpStyle::replicate},
      {"expert_up", TpStyle::replicate}, {"expert_down", TpStyle::replicate},
  };
  return plan;
}

namespace {

TpStyle style_of(const std::string& name) {
  for (const auto& e : tp_plan())
    if (name == e.param) return e.style;
  TORCH_CHECK(false, "tensor parallel plan: no entry for parameter '", name, "'");
}

Communicator* comm_of(AutogradContext* ctx) {
  return reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
}

int64_t ptr(Communicator& c) { return reinterpret_cast<int64_t>(&c); }

Tensor all_reduce_tp(const Tensor& x, Communicator& comm) {
  Tensor y = x.contiguous().clone();
  comm.all_reduce(y, GroupKind::tp);
  return y;
}

// [B, T/t, ...] per rank -> [B, T, ...]: gather the shards in tp-rank order along dim 1.
Tensor gather_seq(const Tensor& x, Communicator& comm) {
  const int t = comm.group_size(GroupKind::tp);
  Tensor in = x.contiguous();
  std::vector<int64_t> shape = {t};
  for (int64_t d : in.sizes()) shape.push_back(d);
  Tensor all = at::empty(shape, in.options());
  comm.all_gather(all, in, GroupKind::tp);
  // [t, B, Ts, ...] -> [B, t, Ts, ...] -> [B, t*Ts, ...]
  Tensor y = all.transpose(0, 1).contiguous();
  std::vector<int64_t> out = {in.size(0), t * in.size(1)};
  for (int64_t i = 2; i < in.dim(); ++i) out.push_back(in.size(i));
  return y.view(out);
}

// [B, T, ...] -> this rank's [B, T/t, ...] of the sum over the tp group.
Tensor reduce_scatter_seq(const Tensor& x, Communicator& comm) {
  const int t = comm.group_size(GroupKind::tp);
  TORCH_CHECK(x.size(1) % t == 0, "sequence parallel: length ", x.size(1), " not divisible by tp ", t);
  std::vector<int64_t> split = {x.size(0), t, x.size(1) / t};
  for (int64_t i = 2; i < x.dim(); ++i) split.push_back(x.size(i));
  Tensor chunks = x.reshape(split).transpose(0, 1).contiguous();  // [t, B, Ts, ...]
  std::vector<int64_t> out(split);
  out.erase(out.begin() + 1);
  Tensor y = at::empty(out, x.options());
  comm.reduce_scatter(y, chunks, GroupKind::tp);
  return y;
}

Tensor identity(const Tensor& x, Communicator&) { return x; }

// A region operator: Forward on the way in, Backward on the gradient (one collective each,
// or none for the identity). An input returned as is (identity) becomes a view with this node.
template <Tensor (*Forward)(const Tensor&, Communicator&), Tensor (*Backward)(const Tensor&, Communicator&)>
struct TpRegion : public torch::autograd::Function<TpRegion<Forward, Backward>> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return Forward(x, *reinterpret_cast<Communicator*>(comm));
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {Backward(g[0], *comm_of(ctx)), Tensor()};
  }
};

using CopyToTp = TpRegion<identity, all_reduce_tp>;                  // Megatron f
using ReduceFromTp = TpRegion<all_reduce_tp, identity>;              // Megatron g
using GatherSeq = TpRegion<gather_seq, reduce_scatter_seq>;          // SP entry
using ReduceScatterSeq = TpRegion<reduce_scatter_seq, gather_seq>;   // SP exit

// Megatron's vocabulary-parallel cross-entropy. With m = max_v z_v, S = sum_v exp(z_v - m) (both
// over the whole vocabulary: local max/sum, then tp all-reduces) and z_y the target's logit (from
// the rank whose range holds y, zero elsewhere, all-reduced):
//   loss = sum_tokens (log S + m - z_y),   d loss / d z_v = softmax_v - [v == y]
// so backward needs only the local softmax piece (saved) and the local target mask.
struct VocabParallelCE : public torch::autograd::Function<VocabParallelCE> {
  static Tensor forward(AutogradContext* ctx, const Tensor& logits, const Tensor& targets,
                        int64_t comm_ptr) {
    auto& comm = *reinterpret_cast<Communicator*>(comm_ptr);
    const int64_t v_loc = logits.size(1);
    const int64_t lo = comm.group_rank(GroupKind::tp) * v_loc;
    Tensor z = logits.to(at::kFloat);
    Tensor m = std::get<0>(z.max(1)).contiguous();  // max only shifts: any common value works
    comm.all_reduce(m, GroupKind::tp, /*max=*/true);
    Tensor e = (z - m.unsqueeze(1)).exp();
    Tensor s = e.sum(1);
    comm.all_reduce(s, GroupKind::tp);
    Tensor local_t = targets - lo;
    Tensor mine = (local_t >= 0).logical_and(local_t < v_loc);
    Tensor idx = local_t.clamp(0, v_loc - 1);
    Tensor zy = z.gather(1, idx.unsqueeze(1)).squeeze(1) * mine.to(at::kFloat);
    comm.all_reduce(zy, GroupKind::tp);
    Tensor loss = (s.log() + m - zy).sum();
    e.div_(s.unsqueeze(1));  // local softmax piece
    ctx->save_for_backward({e, idx, mine});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return loss;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    auto s = ctx->get_saved_variables();
    Tensor grad = s[0].clone();
    grad.scatter_add_(1, s[1].unsqueeze(1), -s[2].to(at::kFloat).unsqueeze(1));
    grad.mul_(g[0]);
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), Tensor(), Tensor()};
  }
};

}  // namespace

at::Tensor tp_copy_to(const at::Tensor& x, Communicator& comm) { return CopyToTp::apply(x, ptr(comm)); }
at::Tensor tp_reduce_from(const at::Tensor& x, Communicator& comm) {
  return ReduceFromTp::apply(x, ptr(comm));
}
at::Tensor tp_gather_seq(const at::Tensor& x, Communicator& comm) {
  return GatherSeq::apply(x, ptr(comm));
}
at::Tensor tp_reduce_scatter_seq(const at::Tensor& x, Communicator& comm) {
  return ReduceScatterSeq::apply(x, ptr(comm));
}
at::Tensor vocab_parallel_cross_entropy_sum(const at::Tensor& logits, const at::Tensor& targets,
                                            Communicator& comm) {
  return VocabParallelCE::apply(logits, targets, ptr(comm));
}

bool is_expert_param(const std::string& name) {
  return name == "expert_gate" || name == "expert_up" || name == "expert_down";
}

TensorParallel::TensorParallel(Model& model, Communicator& comm, TpOptions options)
    : model_(model), comm_(comm), options_(options) {
  t_ = comm_.group_size(GroupKind::tp);
  r_ = comm_.group_rank(GroupKind::tp);
  ep_ = options_.ep;
  ep_rank_ = options_.ep_rank;
  replicas_.resize(model_.num_units());
  if (t_ == 1 && ep_ == 1) return;
  const ModelSpec& m = model_.spec();
  const int64_t kv = m.num_key_value_heads;
  // kv heads: split when t divides them, else (t a multiple of kv, core's validation) each rank
  // holds head r / (t / kv), a copy shared with the other t / kv ranks of that head.
  const bool kv_copied = t_ > kv;
  const int kv_per_head = kv_copied ? static_cast<int>(t_ / kv) : 1;
  for (int unit = 0; unit < model_.num_units(); ++unit) {
    const UnitLayout& full = model_.full_layout(unit);
    UnitLayout local;
    int64_t offset = 0;
    for (const ParamInfo& p : full.params) {
      ParamInfo q = tp_local_param(p, m, t_);
      if (ep_ > 1 && is_expert_param(p.name)) {
        q.shape[0] /= ep_;  // this ep rank's experts; in their own flat parameter (TpOptions)
        local.params.push_back(q);
        continue;
      }
      Replica rep;
      rep.offset = offset;
      switch (t_ == 1 ? TpStyle::replicate : style_of(p.name)) {
        case TpStyle::replicate:
          rep.copies = t_;
          rep.partial = sequence_parallel();
          break;
        case TpStyle::colwise:
        case TpStyle::vocab:
          rep.copies = 1;
          break;
        case TpStyle::colwise_kv:
          rep.copies = kv_per_head;
          rep.groups = kv_copied ? static_cast<int>(kv) : 1;
          rep.group = kv_copied ? r_ / kv_per_head : 0;
          rep.partial = kv_copied;
          break;
        case TpStyle::rowwise:
          rep.copies = 1;
          break;
      }
      rep.numel = q.numel();
      offset += q.numel();
      if (rep.copies > 1) replicas_[unit].push_back(rep);
      local.params.push_back(q);
    }
    model_.set_layout(unit, local);
  }
  if (t_ == 1) return;

  BlockOps& ops = model_.ops();
  Communicator* c = &comm_;
  const bool sp = sequence_parallel();
  ops.enter_column = [c, sp](const Tensor& x) { return sp ? tp_gather_seq(x, *c) : tp_copy_to(x, *c); };
  ops.exit_row = [c, sp](const Tensor& x) {
    return sp ? tp_reduce_scatter_seq(x, *c) : tp_reduce_from(x, *c);
  };
  const int64_t v_loc = m.vocab_size / t_, lo = r_ * v_loc;
  auto exit = ops.exit_row;
  ops.embed = [v_loc, lo, exit](const Tensor& w, const Tensor& tokens) {
    // Tokens outside [lo, lo + V/t) look up row 0 and are zeroed; the exit operator sums the
    // tp pieces (each token's row lives on exactly one rank).
    Tensor local = tokens - lo;
    Tensor mine = (local >= 0).logical_and(local < v_loc);
    Tensor x = at::embedding(w, local.clamp(0, v_loc - 1)) * mine.unsqueeze(-1).to(w.scalar_type());
    return exit(x);
  };
  auto enter = ops.enter_column;
  ops.head_loss_sum = [c, enter](const Tensor& h, const Tensor& head, const Tensor& targets) {
    Tensor logits = at::linear(enter(h), head);
    return vocab_parallel_cross_entropy_sum(logits.reshape({-1, logits.size(-1)}),
                                            targets.reshape(-1), *c);
  };
}

ParamInfo tp_local_param(const ParamInfo& full, const ModelSpec& spec, int t) {
  ParamInfo q = full;
  if (t == 1) return q;
  switch (style_of(full.name)) {
    case TpStyle::replicate:
      break;
    case TpStyle::colwise:
    case TpStyle::vocab:
      q.shape[0] /= t;
      break;
    case TpStyle::colwise_kv:
      // kv heads: split when t divides them, else one (copied) head per rank.
      q.shape[0] = t > spec.num_key_value_heads ? spec.head_dim : q.shape[0] / t;
      break;
    case TpStyle::rowwise:
      q.shape[1] /= t;
      break;
  }
  return q;
}

at::Tensor tp_unsplit(const ParamInfo& full, const ModelSpec& spec, const std::vector<Tensor>& pieces) {
  const int t = static_cast<int>(pieces.size());
  const ParamInfo local = tp_local_param(full, spec, t);
  std::vector<Tensor> parts;
  for (const Tensor& p : pieces) parts.push_back(p.reshape(local.shape));
  if (t == 1) return parts[0].contiguous();
  switch (style_of(full.name)) {
    case TpStyle::replicate:
      return parts[0].contiguous();
    case TpStyle::colwise:
    case TpStyle::vocab:
      return at::cat(parts, 0);
    case TpStyle::colwise_kv: {
      const int64_t kv = spec.num_key_value_heads;
      if (t <= kv) return at::cat(parts, 0);
      std::vector<Tensor> heads;  // head h lives on ranks h * (t / kv) ...
      for (int64_t h = 0; h < kv; ++h) heads.push_back(parts[h * (t / kv)]);
      return at::cat(heads, 0);
    }
    case TpStyle::rowwise:
      return at::cat(parts, 1);
  }
  return {};
}

at::Tensor TensorParallel::localize(int unit, const at::Tensor& full) const {
  if (t_ == 1 && ep_ == 1) return full;
  const UnitLayout& fl = model_.full_layout(unit);
  const ModelSpec& m = model_.spec();
  const int64_t D = m.head_dim, kv = m.num_key_value_heads;
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < fl.params.size(); ++i) {
    const ParamInfo& p = fl.params[i];
    Tensor w = full.narrow(0, fl.offset(i), p.numel()).view(p.shape);
    switch (t_ == 1 ? TpStyle::replicate : style_of(p.name)) {
      case TpStyle::replicate:
        if (ep_ > 1 && is_expert_param(p.name)) w = w.chunk(ep_, 0)[ep_rank_];
        break;
      case TpStyle::colwise:
      case TpStyle::vocab:
        w = w.chunk(t_, 0)[r_];
        break;
      case TpStyle::colwise_kv:
        w = t_ > kv ? w.narrow(0, (r_ / (t_ / kv)) * D, D) : w.chunk(t_, 0)[r_];
        break;
      case TpStyle::rowwise:
        w = w.chunk(t_, 1)[r_];
        break;
    }
    pieces.push_back(w.contiguous().view(-1));
  }
  return at::cat(pieces);
}

std::vector<TensorParallel::SourceRun> TensorParallel::source_runs(int unit, int64_t offset,
                                                                   int64_t count) const {
  const UnitLayout& local = model_.layout(unit);
  const UnitLayout& full = model_.full_layout(unit);
  const int64_t D = model_.spec().head_dim, kv = model_.spec().num_key_value_heads;
  std::vector<SourceRun> runs;
  int64_t lo = 0;
  for (size_t i = 0; i < local.params.size(); ++i) {
    const ParamInfo& p = local.params[i];
    const int64_t n = p.numel();
    const int64_t a = std::max(offset, lo), b = std::min(offset + count, lo + n);
    if (a < b) {
      // [a, b) in the unit's local flat layout is [ea, eb) of this parameter's local piece.
      const int64_t ea = a - lo, eb = b - lo;
      const int64_t row = p.shape.size() > 1 ? n / p.shape[0] : 1;  // elements per row (1: a bias)
      int64_t first_row = 0;  // the full tensor's row where a row-split piece starts
      const TpStyle style = t_ == 1 ? TpStyle::replicate : style_of(p.name);
      switch (style) {
        case TpStyle::replicate:
          if (ep_ > 1 && is_expert_param(p.name)) first_row = ep_rank_ * p.shape[0];  // [E/ep, ...] slices
          break;
        case TpStyle::colwise:
        case TpStyle::vocab:
          first_row = r_ * p.shape[0];
          break;
        case TpStyle::colwise_kv:
          first_row = t_ > kv ? (r_ / (t_ / kv)) * D : r_ * p.shape[0];
          break;
        case TpStyle::rowwise: {
          // Local [R, C/t] of full [R, C]: local element e is row e / (C/t), column r C/t + e % (C/t).
          const int64_t cl = p.shape[1], c = full.params[i].shape[1];
          for (int64_t e = ea; e < eb;) {
            const int64_t rr = e / cl, col = e % cl, len = std::min(eb - e, cl - col);
            runs.push_back({static_cast<int>(i), rr * c + r_ * cl + col, lo + e - offset, len});
            e += len;
          }
          break;
        }
      }
      if (style != TpStyle::rowwise)
        runs.push_back({static_cast<int>(i), first_row * row + ea, a - offset, eb - ea});
    }
    lo += n;
  }
  return runs;
}

void TensorParallel::annotate(std::vector<FlatParam>& params) const {
  for (FlatParam& fp : params) {
    fp.tp_copies.clear();
    if (fp.expert) continue;  // different experts on each ep rank, not tp copies
    const int64_t lo = fp.shard_offset, hi = lo + fp.param.numel();
    for (const Replica& r : replicas_[fp.unit]) {
      const int64_t a = std::max(lo, r.offset), b = std::min(hi, r.offset + r.numel);
      if (a < b) fp.tp_copies.push_back({a - lo, b - a, r.copies});
    }
  }
}

void TensorParallel::finish_gradients(std::vector<FlatParam>& params) {
  if (t_ == 1) return;
  // Every rank of the tp group walks the same units and ranges (equal local layouts and
  // shards), so the all-reduces line up. One all-reduce per unit: the partial ranges of the
  // shard, each placed in its copy set's row of a [groups, len] buffer.
  for (FlatParam& fp : params) {
    Tensor g = fp.param.mutable_grad();
    if (!g.defined() || fp.expert) continue;
    const int64_t lo = fp.shard_offset, hi = lo + fp.param.numel();
    struct Cut { int64_t at, len, buf; int groups, group; };
    std::vector<Cut> cuts;
    int64_t total = 0;
    for (const Replica& r : replicas_[fp.unit]) {
      if (!r.partial) continue;
      const int64_t a = std::max(lo, r.offset), b = std::min(hi, r.offset + r.numel);
      if (a >= b) continue;
      cuts.push_back({a - lo, b - a, total, r.groups, r.group});
      total += (b - a) * r.groups;
    }
    if (cuts.empty()) continue;
    Tensor buf = at::zeros({total}, g.options());
    for (const Cut& c : cuts)
      buf.narrow(0, c.buf + c.group * c.len, c.len).copy_(g.narrow(0, c.at, c.len));
    comm_.all_reduce(buf, GroupKind::tp);
    for (const Cut& c : cuts) g.narrow(0, c.at, c.len).copy_(buf.narrow(0, c.buf + c.group * c.len, c.len));
  }
}

at::Tensor TensorParallel::sequence_shard(const at::Tensor& x) const {
  if (t_ == 1) return x;
  return x.chunk(t_, 1)[r_].contiguous();
}

}  // namespace meshwork::trainer
