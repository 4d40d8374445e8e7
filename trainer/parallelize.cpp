#include "trainer/parallelize.h"

#include <ATen/Parallel.h>

#include "trainer/cpu_memory.h"
#include "trainer/hf/param_arena.h"

namespace meshwork::trainer {

using at::Tensor;

namespace {

// The arena's memory, counted with the allocator's (cpu_memory.h) while it is mapped, and the
// element offset of each unit's piece in it.
class ArenaPieces : public std::enable_shared_from_this<ArenaPieces> {
 public:
  static std::shared_ptr<ArenaPieces> create(const Model& model, int shard_group_size) {
    auto a = std::make_shared<ArenaPieces>();
    int64_t total = 0;
    for (int i = 0; i < model.num_units(); ++i) {
      const int64_t numel = model.layout(i).numel();
      const int64_t count = shard_group_size > 1 ? (numel + shard_group_size - 1) / shard_group_size : numel;
      a->offset_.push_back(total);
      a->count_.push_back(count);
      total += (count + 15) / 16 * 16;  // 64-byte aligned pieces, as LibTorch's allocator gives
    }
    a->arena_ = hf::ParamArena::create(static_cast<size_t>(total) * sizeof(float));
    if (!a->arena_) return nullptr;
    count_external_cpu_bytes(static_cast<int64_t>(a->arena_->size()));
    return a;
  }
  ~ArenaPieces() {
    if (arena_) count_external_cpu_bytes(-static_cast<int64_t>(arena_->size()));
  }

  // Unit `unit`'s piece as a tensor that keeps the arena mapped; undefined when the size asked
  // for is not the one planned (then the caller allocates it on its own).
  Tensor piece(int unit, int64_t count) {
    if (unit < 0 || unit >= static_cast<int>(count_.size()) || count_[unit] != count) return Tensor();
    float* p = reinterpret_cast<float*>(arena_->data()) + offset_[unit];
    std::shared_ptr<ArenaPieces> self = shared_from_this();
    return at::from_blob(p, {count}, [self](void*) {}, at::TensorOptions().dtype(at::kFloat));
  }

 private:
  std::shared_ptr<hf::ParamArena> arena_;
  std::vector<int64_t> offset_, count_;
};

}  // namespace

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
  if (options.read_full) {
    auto read_full = options.read_full;
    // On CPU every unit's piece of this rank lives in one huge-page arena (hf/param_arena.h). The
    // pieces' sizes are DataParallel's: the unit's local (tp) numel, cut into equal FSDP shards.
    // Each piece keeps the arena alive; the last one freed unmaps it.
    std::shared_ptr<ArenaPieces> arena;
    if (options.device.is_cpu()) arena = ArenaPieces::create(model, comm.group(options.fsdp_group).size());
    dpo.read_local = [tp, read_full, arena](int unit, int64_t offset, int64_t count) {
      // Every element is written once: by a run, or zero for FSDP padding past the unit's end
      // (no zeros() pass first: a second write over the whole shard).
      Tensor out = arena ? arena->piece(unit, count) : Tensor();
      if (!out.defined()) out = at::empty({count}, at::kFloat);
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
