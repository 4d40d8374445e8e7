#include "trainer/parallelize_cp.h"

#include <cmath>

#include <torch/torch.h>

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor cp_token_indices(int64_t seq_len, int cp, int rank) {
  const int64_t S = seq_len / (2 * cp);
  auto opts = at::TensorOptions().dtype(at::kLong);
  return at::cat({at::arange(rank * S, (rank + 1) * S, opts),
                  at::arange((2 * cp - 1 - rank) * S, (2 * cp - rank) * S, opts)});
}

namespace {

// Which part of the local queries meets which part of the arriving block (module comment).
struct BlockPlan {
  int64_t q0, qn, k0, kn;
  bool causal;  // the own block: lower-triangular mask
};

BlockPlan plan_step(int c, int src, int64_t Tl) {
  const int64_t S = Tl / 2;
  if (src == c) return {0, Tl, 0, Tl, true};
  if (src < c) return {0, Tl, 0, S, false};
  return {S, S, 0, Tl, false};
}

Tensor expand_kv(const Tensor& x, int64_t g) { return g == 1 ? x : x.repeat_interleave(g, 1); }
Tensor reduce_kv(const Tensor& x, int64_t g) {
  if (g == 1) return x;
  auto s = x.sizes();
  return x.view({s[0], s[1] / g, g, s[2], s[3]}).sum(2);
}

Tensor scores(const Tensor& q, const Tensor& k, const BlockPlan& p, double scale) {
  Tensor s = at::matmul(q, k.transpose(-2, -1)) * scale;
  if (p.causal) {
    Tensor keep = at::ones({p.qn, p.kn}, at::TensorOptions().dtype(at::kBool).device(q.device())).tril();
    s.masked_fill_(keep.logical_not(), -std::numeric_limits<float>::infinity());
  }
  return s;
}

struct RingAttention : public torch::autograd::Function<RingAttention> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q_in, const Tensor& k_in,
                        const Tensor& v_in, int64_t comm_ptr) {
    auto& comm = *reinterpret_cast<Communicator*>(comm_ptr);
    const Group& g = comm.group(GroupKind::cp);
    const int cp = g.size(), c = g.rank;
    const int next = (c + 1) % cp, prev = (c + cp - 1) % cp;
    const int64_t Tl = q_in.size(2), D = q_in.size(3), grp = q_in.size(1) / k_in.size(1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    // fp32 statistics and accumulation whatever the compute dtype.
    Tensor q = q_in.to(at::kFloat);
    Tensor kv = at::stack({k_in, v_in}).to(at::kFloat).contiguous();
    Tensor out = at::zeros_like(q);
    Tensor lse = at::full({q.size(0), q.size(1), Tl}, -std::numeric_limits<float>::infinity(),
                          q.options());
    Tensor incoming = at::empty_like(kv);
    for (int j = 0; j < cp; ++j) {
      const int src = (c - j + cp) % cp;
      Communicator::Pending pending;
      if (j + 1 < cp) pending = comm.send_recv_start(kv, next, incoming, prev, g, /*tag=*/0);
      const BlockPlan p = plan_step(c, src, Tl);
      Tensor qs = q.narrow(2, p.q0, p.qn);
      Tensor ks = expand_kv(kv[0].narrow(2, p.k0, p.kn), grp);
      Tensor vs = expand_kv(kv[1].narrow(2, p.k0, p.kn), grp);
      Tensor s = scores(qs, ks, p, scale);
      Tensor lse_b = s.logsumexp(-1);
      Tensor out_b = at::matmul((s - lse_b.unsqueeze(-1)).exp_(), vs);
      Tensor lse_a = lse.narrow(2, p.q0, p.qn), out_a = out.narrow(2, p.q0, p.qn);
      Tensor lse_n = at::logaddexp(lse_a, lse_b);
      out_a.copy_(out_a * (lse_a - lse_n).exp().unsqueeze(-1) +
                  out_b * (lse_b - lse_n).exp().unsqueeze(-1));
      lse_a.copy_(lse_n);
      if (j + 1 < cp) {
        comm.wait(pending);
        std::swap(kv, incoming);
      }
    }
    Tensor o = out.to(q_in.scalar_type());
    ctx->save_for_backward({q_in, k_in, v_in, o, lse});
    ctx->saved_data["comm"] = comm_ptr;
    return o;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto& comm = *reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
    const Group& g = comm.group(GroupKind::cp);
    const int cp = g.size(), c = g.rank;
    const int next = (c + 1) % cp, prev = (c + cp - 1) % cp;
    Tensor q = saved[0].to(at::kFloat), o = saved[3].to(at::kFloat), lse = saved[4];
    const int64_t Tl = q.size(2), D = q.size(3), grp = q.size(1) / saved[1].size(1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    Tensor dout = grads[0].to(at::kFloat);
    Tensor delta = (dout * o).sum(-1);  // rowsum(dO * O)
    Tensor dq = at::zeros_like(q);
    Tensor kv = at::stack({saved[1], saved[2]}).to(at::kFloat).contiguous();
    Tensor incoming = at::empty_like(kv);
    Tensor dkv = at::zeros_like(kv), dkv_in = at::empty_like(kv);
    for (int j = 0; j < cp; ++j) {
      const int src = (c - j + cp) % cp;
      Communicator::Pending pending;
      if (j + 1 < cp) pending = comm.send_recv_start(kv, next, incoming, prev, g, /*tag=*/0);
      const BlockPlan p = plan_step(c, src, Tl);
      Tensor qs = q.narrow(2, p.q0, p.qn);
      Tensor ks = expand_kv(kv[0].narrow(2, p.k0, p.kn), grp);
      Tensor vs = expand_kv(kv[1].narrow(2, p.k0, p.kn), grp);
      Tensor dos = dout.narrow(2, p.q0, p.qn);
      Tensor P = (scores(qs, ks, p, scale) - lse.narrow(2, p.q0, p.qn).unsqueeze(-1)).exp_();
      Tensor dv = at::matmul(P.transpose(-2, -1), dos);
      Tensor dS = P * (at::matmul(dos, vs.transpose(-2, -1)) - delta.narrow(2, p.q0, p.qn).unsqueeze(-1));
      dq.narrow(2, p.q0, p.qn).add_(at::matmul(dS, ks), scale);
      Tensor dk = at::matmul(dS.transpose(-2, -1), qs).mul_(scale);
      dkv[0].narrow(2, p.k0, p.kn).add_(reduce_kv(dk, grp));
      dkv[1].narrow(2, p.k0, p.kn).add_(reduce_kv(dv, grp));
      // The block's gradient moves on with the block (one hop per step; cp hops bring it home).
      if (cp > 1) {
        comm.send_recv(dkv, next, dkv_in, prev, g, /*tag=*/1);
        std::swap(dkv, dkv_in);
      }
      if (j + 1 < cp) {
        comm.wait(pending);
        std::swap(kv, incoming);
      }
    }
    const auto dt = saved[0].scalar_type();
    return {dq.to(dt), dkv[0].to(saved[1].scalar_type()), dkv[1].to(saved[2].scalar_type()),
            Tensor()};
  }
};

}  // namespace

at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          Communicator& comm) {
  TORCH_CHECK(q.size(2) % 2 == 0, "ring attention: local length ", q.size(2), " must be even");
  return RingAttention::apply(q, k, v, reinterpret_cast<int64_t>(&comm));
}

ContextParallel::ContextParallel(Model& model, Communicator& comm) {
  cp_ = comm.group_size(GroupKind::cp);
  rank_ = comm.group_rank(GroupKind::cp);
  if (cp_ == 1) return;
  Communicator* c = &comm;
  model.ops().attention = [c](const Tensor& q, const Tensor& k, const Tensor& v) {
    return ring_attention(q, k, v, *c);
  };
}

at::Tensor ContextParallel::shard(const at::Tensor& x) const {
  if (cp_ == 1) return x;
  return x.index_select(1, cp_token_indices(x.size(1), cp_, rank_).to(x.device()));
}

at::Tensor ContextParallel::positions(int64_t seq_len, at::Device device) const {
  if (cp_ == 1) return at::arange(seq_len, at::TensorOptions().dtype(at::kLong).device(device));
  return cp_token_indices(seq_len, cp_, rank_).to(device);
}

}  // namespace meshwork::trainer
