// Expert parallelism (ep) for mixtures of experts, torchtitan's split: the ep group (ranks
// borrowed from dp_shard x cp x tp, core/mesh.h) shares out each sparse layer's experts, ep rank
// r holding experts [r E/ep, (r+1) E/ep) (the stacked expert tensors cut on dim 0 by the local
// layouts, TpOptions::ep), FSDP-sharded over efsdp (DataParallelOptions::expert_range).
//
// Dispatch and combine (BlockOps::experts, called by moe_mlp with its rows sorted by expert):
//   1. c[e] rows go to expert e: one all-to-all of the counts (E/ep per peer) tells each rank
//      how many rows each peer sends for each of its experts;
//   2. the rows, already grouped by destination (experts of rank d are [d E/ep, (d+1) E/ep)),
//      travel in one all-to-all with uneven splits (send d: sum of c over d's experts);
//   3. the arrived rows (by source, then by local expert) are permuted to be by local expert and
//      the local experts run their grouped GEMMs (run_grouped_experts);
//   4. the outputs are permuted back and a second all-to-all with the splits swapped brings them
//      home, in the order moe_mlp sent them, for the weighting and index_add.
// Backward: an autograd Function around each all-to-all runs the reverse all-to-all of the
// gradients. The router, its top-k, the aux loss and the routing metrics are computed before
// dispatch on each rank's own tokens, so they are unchanged (docs/moe.md).
#pragma once

#include <vector>

#include <ATen/ATen.h>

#include "trainer/comm.h"
#include "trainer/model.h"

namespace meshwork::trainer {

class ExpertParallel {
 public:
  // With ep > 1 (the communicator's shape) installs the dispatch/combine as model.ops().experts.
  ExpertParallel(Model& model, Communicator& comm);
  bool active() const { return ep_ > 1; }
  int size() const { return ep_; }
  int rank() const { return rank_; }

 private:
  int ep_ = 1, rank_ = 0;
};

// Dispatch, the local experts, combine (module comment) over `comm`'s ep group: rows [M, H]
// sorted by global expert, counts[e] rows for each of E experts; gate/up/down this rank's E/ep
// experts. Exposed for tests.
at::Tensor expert_parallel_experts(Communicator& comm, const at::Tensor& rows, const std::vector<int64_t>& counts,
                                   const at::Tensor& gate, const at::Tensor& up, const at::Tensor& down);

// All-to-all of rows over a group with autograd: forward sends in_splits[j] rows to member j and
// receives out_splits[j] from it; backward the reverse with the splits swapped.
at::Tensor all_to_all_rows(Communicator& comm, const Group& g, const at::Tensor& x,
                           const std::vector<int64_t>& out_splits, const std::vector<int64_t>& in_splits);

}  // namespace meshwork::trainer
