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

// The k/v blocks travelling the cp ring, stacked [2, B, Hkv, Tl, D] fp32. Step j holds the
// block of rank (c - j) mod cp; begin(j) posts the transfer of the next block (send to c+1,
// receive from c-1) before the caller computes on the current one, end(j) waits for it.
struct KvRing {
  KvRing(Communicator& comm, Tensor kv_blocks, int64_t q_per_kv)
      : comm(comm), g(comm.group(GroupKind::cp)), cp(g.size()), c(g.rank), next((c + 1) % cp),
        prev((c + cp - 1) % cp), grp(q_per_kv), kv(std::move(kv_blocks)), incoming(at::empty_like(kv)) {}

  // Which part of the local queries meets the block of step j (module comment).
  BlockPlan begin(int j) {
    if (j + 1 < cp) pending = comm.send_recv_start(kv, next, incoming, prev, g, /*tag=*/0);
    return plan_step(c, (c - j + cp) % cp, kv.size(3));
  }
  // The block's keys and values that plan p reads, expanded to the q heads.
  Tensor k(const BlockPlan& p) const { return expand_kv(kv[0].narrow(2, p.k0, p.kn), grp); }
  Tensor v(const BlockPlan& p) const { return expand_kv(kv[1].narrow(2, p.k0, p.kn), grp); }
  void end(int j) {
    if (j + 1 == cp) return;
    comm.wait(pending);
    pending = {};
    std::swap(kv, incoming);
  }

  Communicator& comm;
  const Group& g;
  const int cp, c, next, prev;
  const int64_t grp;
  Tensor kv, incoming;
  Communicator::Pending pending;
};

struct RingAttention : public torch::autograd::Function<RingAttention> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q_in, const Tensor& k_in,
                        const Tensor& v_in, int64_t comm_ptr) {
    auto& comm = *reinterpret_cast<Communicator*>(comm_ptr);
    const int64_t Tl = q_in.size(2), D = q_in.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    // fp32 statistics and accumulation whatever the compute dtype.
    Tensor q = q_in.to(at::kFloat);
    KvRing ring(comm, at::stack({k_in, v_in}).to(at::kFloat).contiguous(), q_in.size(1) / k_in.size(1));
    Tensor out = at::zeros_like(q);
    Tensor lse = at::full({q.size(0), q.size(1), Tl}, -std::numeric_limits<float>::infinity(),
                          q.options());
    for (int j = 0; j < ring.cp; ++j) {
      const BlockPlan p = ring.begin(j);
      Tensor qs = q.narrow(2, p.q0, p.qn);
      Tensor s = scores(qs, ring.k(p), p, scale);
      Tensor lse_b = s.logsumexp(-1);
      Tensor out_b = at::matmul((s - lse_b.unsqueeze(-1)).exp_(), ring.v(p));
      Tensor lse_a = lse.narrow(2, p.q0, p.qn), out_a = out.narrow(2, p.q0, p.qn);
      Tensor lse_n = at::logaddexp(lse_a, lse_b);
      out_a.copy_(out_a * (lse_a - lse_n).exp().unsqueeze(-1) +
                  out_b * (lse_b - lse_n).exp().unsqueeze(-1));
      lse_a.copy_(lse_n);
      ring.end(j);
    }
    Tensor o = out.to(q_in.scalar_type());
    ctx->save_for_backward({q_in, k_in, v_in, o, lse});
    ctx->saved_data["comm"] = comm_ptr;
    return o;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto& comm = *reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
    Tensor q = saved[0].to(at::kFloat), o = saved[3].to(at::kFloat), lse = saved[4];
    const int64_t D = q.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    Tensor dout = grads[0].to(at::kFloat);
    Tensor delta = (dout * o).sum(-1);  // rowsum(dO * O)
    Tensor dq = at::zeros_like(q);
    KvRing ring(comm, at::stack({saved[1], saved[2]}).to(at::kFloat).contiguous(),
                q.size(1) / saved[1].size(1));
    const int64_t grp = ring.grp;
    Tensor dkv = at::zeros_like(ring.kv), dkv_in = at::empty_like(ring.kv);
    for (int j = 0; j < ring.cp; ++j) {
      const BlockPlan p = ring.begin(j);
      Tensor qs = q.narrow(2, p.q0, p.qn);
      Tensor ks = ring.k(p), vs = ring.v(p);
      Tensor dos = dout.narrow(2, p.q0, p.qn);
      Tensor P = (scores(qs, ks, p, scale) - lse.narrow(2, p.q0, p.qn).unsqueeze(-1)).exp_();
      Tensor dv = at::matmul(P.transpose(-2, -1), dos);
      Tensor dS = P * (at::matmul(dos, vs.transpose(-2, -1)) - delta.narrow(2, p.q0, p.qn).unsqueeze(-1));
      dq.narrow(2, p.q0, p.qn).add_(at::matmul(dS, ks), scale);
      Tensor dk = at::matmul(dS.transpose(-2, -1), qs).mul_(scale);
      dkv[0].narrow(2, p.k0, p.kn).add_(reduce_kv(dk, grp));
      dkv[1].narrow(2, p.k0, p.kn).add_(reduce_kv(dv, grp));
      // The block's gradient moves on with the block (one hop per step; cp hops bring it home).
      if (ring.cp > 1) {
        comm.send_recv(dkv, ring.next, dkv_in, ring.prev, ring.g, /*tag=*/1);
        std::swap(dkv, dkv_in);
      }
      ring.end(j);
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
