#include "trainer/parallelize.h"

#include <ATen/Parallel.h>

namespace meshwork::trainer {

using at::Tensor;

std::unique_ptr<ParallelModel> parallelize(Model& model, Communicator& comm,
                                           const ParallelizeOptions& options) {
  std::unique_ptr<ParallelModel> pm(new ParallelModel(model));
  TpOptions tpo;
  tpo.sequence_parallel = options.sequence_parallel;
  const Group& ep_group = comm.expert_group(ExpertGroupKind::ep);
  if (model.spec().is_moe()) {
    tpo.ep = ep_group.size();
    tpo.ep_rank = ep_group.rank;
  }
  pm->tp_ = std::make_unique<TensorParallel>(model, comm, tpo);
  pm->cp_ = std::make_unique<ContextParallel>(model, comm);
  pm->ep_ = std::make_unique<ExpertParallel>(model, comm);
  // A mixture of experts' aux loss spans a forward call's tokens: cp ranks hold other parts of
  // each sequence, and tp ranks under sequence parallelism other rows of it (docs/moe.md).
  const bool cp_split = pm->cp_->active(), tp_split = pm->tp_->sequence_parallel();
  if (model.spec().is_moe() && (cp_split || tp_split)) {
    Communicator* c = &comm;
    model.ops().sum_routing = [c, cp_split, tp_split](Tensor& t) {
      if (cp_split) c->all_reduce(t, GroupKind::cp);
      if (tp_split) c->all_reduce(t, GroupKind::tp);
    };
  }
  DataParallelOptions dpo;
  TensorParallel* tp = pm->tp_.get();
  dpo.localize = [tp](int unit, const Tensor& full) { return tp->localize(unit, full); };
  dpo.shard_group = options.fsdp_group;
  dpo.compute_dtype = options.compute_dtype;
  dpo.device = options.device;
  dpo.seed = options.seed;
  dpo.fsdp_grad_sync_per_step = options.fsdp_grad_sync_per_step;
  dpo.keep_root_gathered = model.pipelined();
  if (pm->ep_->active()) {
    // Each sparse block's stacked expert tensors are consecutive in its layout (router first).
    Model* m = &model;
    dpo.expert_range = [m](int unit) -> std::pair<int64_t, int64_t> {
      const UnitLayout& lay = m->layout(unit);
      const int first = lay.index("expert_gate"), last = lay.index("expert_down");
      if (unit == 0 || first < 0) return {0, 0};
      return {lay.offset(static_cast<size_t>(first)),
              lay.offset(static_cast<size_t>(last)) + lay.params[static_cast<size_t>(last)].numel()};
    };
    dpo.expert_shard_group = &comm.expert_group(ExpertGroupKind::efsdp);
  }
  if (options.read_full) {
    auto read_full = options.read_full;
    dpo.read_local = [tp, read_full](int unit, int64_t offset, int64_t count) {
      // Every element is written once: by a run, or zero for FSDP padding past the unit's end
      // (no zeros() pass first: a second write over the whole shard).
      Tensor out = at::empty({count}, at::kFloat);
      float* base = out.data_ptr<float>();
      int64_t covered = 0;
      // Runs are disjoint pieces of `out`: convert them on the intra-op threads, long runs (a
      // whole embedding piece) cut into 1 Mi-element chunks so every thread gets work.
      constexpr int64_t kChunk = 1 << 20;
      std::vector<TensorParallel::SourceRun> runs;
      for (auto r : tp->source_runs(unit, offset, count)) {
        covered = std::max(covered, r.dst + r.count);
        for (int64_t done = 0; done < r.count; done += kChunk)
          runs.push_back({r.param, r.src + done, r.dst + done, std::min(kChunk, r.count - done)});
      }
      at::parallel_for(0, static_cast<int64_t>(runs.size()), 1, [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const auto& r = runs[k];
          read_full(unit, r.param, r.src, r.count, base + r.dst);
        }
      });
      out.narrow(0, covered, count - covered).zero_();  // runs cover [0, covered) in order
      return out;
    };
  }
  pm->dp_ = std::make_unique<DataParallel>(model, comm, dpo);
  tp->annotate(pm->dp_->params());
  for (auto& fp : pm->dp_->params()) pm->params_.push_back(fp.param);
  return pm;
}

std::vector<TensorParallel::SourceRun> ParallelModel::flat_source_runs(const FlatParam& fp, int64_t offset,
                                                                      int64_t count) const {
  if (fp.expert_numel == 0) return tp_->source_runs(fp.unit, offset, count);
  if (fp.expert) return tp_->source_runs(fp.unit, fp.expert_lo + offset, count);
  // The dense part skips the expert range [expert_lo, expert_lo + expert_numel) of the layout.
  std::vector<TensorParallel::SourceRun> runs;
  const int64_t end = offset + count, lo = fp.expert_lo;
  if (offset < lo) runs = tp_->source_runs(fp.unit, offset, std::min(end, lo) - offset);
  if (end > lo) {
    const int64_t from = std::max(offset, lo);
    for (auto r : tp_->source_runs(fp.unit, from + fp.expert_numel, end - from)) {
      r.dst += from - offset;
      runs.push_back(r);
    }
  }
  return runs;
}

std::optional<Tensor> ParallelModel::positions(int64_t seq_len, at::Device device) const {
  if (!cp_->active()) return std::nullopt;
  return cp_->positions(seq_len, device);
}

at::Tensor ParallelModel::eval_loss_sum(const Tensor& inputs, const Tensor& targets,
                                        const ForwardOptions& options) const {
  at::NoGradGuard no_grad;
  Tensor loss = model_.loss_sum(inputs, targets, *dp_, options);
  dp_->end_forward_only();
  return loss;
}

void ParallelModel::finish_gradients() {
  dp_->finish_gradients();
  tp_->finish_gradients(dp_->params());
}

}  // namespace meshwork::trainer
