#include "trainer/parallelize_ep.h"

#include <numeric>

#include <torch/torch.h>

namespace meshwork::trainer {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

struct AllToAllRows : public torch::autograd::Function<AllToAllRows> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, int64_t comm_ptr, int64_t group_ptr,
                        std::vector<int64_t> out_splits, std::vector<int64_t> in_splits) {
    auto* comm = reinterpret_cast<Communicator*>(comm_ptr);
    const auto* g = reinterpret_cast<const Group*>(group_ptr);
    ctx->saved_data["comm"] = comm_ptr;
    ctx->saved_data["group"] = group_ptr;
    ctx->saved_data["out"] = out_splits;
    ctx->saved_data["in"] = in_splits;
    const int64_t rows = std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0});
    Tensor out = at::empty({rows, x.size(1)}, x.options());
    comm->all_to_all(out, x.contiguous(), out_splits, in_splits, *g);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* comm = reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
    const auto* g = reinterpret_cast<const Group*>(ctx->saved_data["group"].toInt());
    const std::vector<int64_t> out_splits = ctx->saved_data["out"].toIntVector();
    const std::vector<int64_t> in_splits = ctx->saved_data["in"].toIntVector();
    const int64_t rows = std::accumulate(in_splits.begin(), in_splits.end(), int64_t{0});
    Tensor back = at::empty({rows, grads[0].size(1)}, grads[0].options());
    comm->all_to_all(back, grads[0].contiguous(), in_splits, out_splits, *g);
    return {back, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all_rows(Communicator& comm, const Group& g, const at::Tensor& x,
                           const std::vector<int64_t>& out_splits, const std::vector<int64_t>& in_splits) {
  return AllToAllRows::apply(x, reinterpret_cast<int64_t>(&comm), reinterpret_cast<int64_t>(&g), out_splits,
                             in_splits);
}

at::Tensor expert_parallel_experts(Communicator& comm, const at::Tensor& rows, const std::vector<int64_t>& counts,
                                   const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down) {
  const Group& g = comm.expert_group(ExpertGroupKind::ep);
  const int ep = g.size();
  const int64_t local = gate.size(0), E = static_cast<int64_t>(counts.size());
  TORCH_CHECK(local * ep == E, "expert parallel: ", local, " local experts x ep ", ep, " != ", E, " experts");
  // 1. Counts: member d gets counts[d E/ep, (d+1) E/ep); received[s * local + j] is what member s
  // sends for local expert j.
  // On the rows' device (NCCL moves device tensors only), read back on the host.
  Tensor sent = at::tensor(counts, at::kLong).to(rows.device());
  Tensor received = at::empty({E}, sent.options());
  comm.all_to_all(received, sent, {}, {}, g);
  received = received.cpu();
  const int64_t* rc = received.data_ptr<int64_t>();
  std::vector<int64_t> send_splits(ep, 0), recv_splits(ep, 0), local_counts(local, 0);
  for (int d = 0; d < ep; ++d)
    for (int64_t j = 0; j < local; ++j) {
      send_splits[d] += counts[d * local + j];
      recv_splits[d] += rc[d * local + j];
      local_counts[j] += rc[d * local + j];
    }
  // 2. The rows, grouped by destination already (experts in order).
  Tensor arrived = all_to_all_rows(comm, g, rows, recv_splits, send_splits);
  // 3. By source then local expert -> by local expert then source.
  std::vector<int64_t> start(E);  // start[s * local + j]: first row of (source s, expert j) in `arrived`
  int64_t at_row = 0;
  for (int64_t k = 0; k < E; ++k) {
    start[k] = at_row;
    at_row += rc[k];
  }
  std::vector<int64_t> perm;
  perm.reserve(at_row);
  for (int64_t j = 0; j < local; ++j)
    for (int s = 0; s < ep; ++s)
      for (int64_t r = 0; r < rc[s * local + j]; ++r) perm.push_back(start[s * local + j] + r);
  Tensor by_expert_index = at::tensor(perm, at::kLong).to(rows.device());
  Tensor out = run_grouped_experts(arrived.index_select(0, by_expert_index), local_counts, gate, up, down);
  // 4. Back to by-source order (the inverse permutation), then home.
  Tensor by_source_index = at::empty_like(by_expert_index);
  by_source_index.index_copy_(0, by_expert_index, at::arange(at_row, by_expert_index.options()));
  return all_to_all_rows(comm, g, out.index_select(0, by_source_index), send_splits, recv_splits);
}

ExpertParallel::ExpertParallel(Model& model, Communicator& comm) {
  ep_ = comm.expert_group(ExpertGroupKind::ep).size();
  rank_ = comm.expert_group(ExpertGroupKind::ep).rank;
  if (ep_ == 1 || !model.spec().is_moe()) return;
  Communicator* c = &comm;
  model.ops().experts = [c](const Tensor& rows, const std::vector<int64_t>& counts, const Tensor& gate,
                            const Tensor& up, const Tensor& down) {
    return expert_parallel_experts(*c, rows, counts, gate, up, down);
  };
}

}  // namespace meshwork::trainer
