#include "trainer/parallelize.h"

namespace meshwork::trainer {

using at::Tensor;

std::unique_ptr<ParallelModel> parallelize(Model& model, Communicator& comm,
                                           const ParallelizeOptions& options) {
  std::unique_ptr<ParallelModel> pm(new ParallelModel(model));
  TpOptions tpo;
  tpo.sequence_parallel = options.sequence_parallel;
  pm->tp_ = std::make_unique<TensorParallel>(model, comm, tpo);
  pm->cp_ = std::make_unique<ContextParallel>(model, comm);
  DataParallelOptions dpo;
  TensorParallel* tp = pm->tp_.get();
  dpo.localize = [tp](int unit, const Tensor& full) { return tp->localize(unit, full); };
  dpo.shard_group = options.fsdp_group;
  dpo.compute_dtype = options.compute_dtype;
  dpo.device = options.device;
  dpo.seed = options.seed;
  dpo.fsdp_grad_sync_per_step = options.fsdp_grad_sync_per_step;
  pm->dp_ = std::make_unique<DataParallel>(model, comm, dpo);
  tp->annotate(pm->dp_->params());
  for (auto& fp : pm->dp_->params()) pm->params_.push_back(fp.param);
  return pm;
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
