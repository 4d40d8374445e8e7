// Tensor and context parallel layers against one process's autograd, on random inputs, with
// real Gloo between threads: ring attention (outputs and q/k/v gradients), the TP region
// operators, whole models under tp (sequence parallel on and off, kv heads split and
// copied) and tp x cp, whose loss and every parameter gradient must equal the 1-process ones,
// and parallelize() (dp x cp x tp together), whose loss and global gradient norm must too.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "core/parallel_layout.h"
#include "run_ranks.h"
#include "trainer/comm.h"
#include "trainer/model.h"
#include "trainer/parallelize.h"
#include "trainer/parallelize_cp.h"
#include "trainer/parallelize_dp.h"
#include "trainer/parallelize_tp.h"

namespace meshwork::trainer {
namespace {

using at::Tensor;


double max_diff(const Tensor& a, const Tensor& b) { return (a - b).abs().max().item<double>(); }

// Ring attention on cp ranks == causal SDPA of the whole sequence (GQA: 4 q heads, 2 kv heads),
// for the output and for dq, dk, dv under a random output gradient.
void check_ring(int cp) {
  at::manual_seed(11);
  const int64_t T = 8 * cp;
  Tensor q = at::randn({2, 4, T, 8}), k = at::randn({2, 2, T, 8}), v = at::randn({2, 2, T, 8});
  Tensor dout = at::randn({2, 4, T, 8});
  Tensor qr = q.clone().requires_grad_(true), kr = k.clone().requires_grad_(true),
         vr = v.clone().requires_grad_(true);
  Tensor ref = at::scaled_dot_product_attention(qr, kr, vr, {}, 0.0, true, std::nullopt, true);
  ref.backward(dout);
  run_ranks(MeshShape{1, 1, cp, 1}, [&](Communicator& c) {
    Tensor idx = cp_token_indices(T, cp, c.group_rank(GroupKind::cp));
    auto local = [&](const Tensor& x) { return x.index_select(2, idx).contiguous(); };
    Tensor ql = local(q).requires_grad_(true), kl = local(k).requires_grad_(true),
           vl = local(v).requires_grad_(true);
    Tensor out = ring_attention(ql, kl, vl, c);
    out.backward(local(dout));
    const double e[4] = {max_diff(out, local(ref.detach())), max_diff(ql.grad(), local(qr.grad())),
                         max_diff(kl.grad(), local(kr.grad())), max_diff(vl.grad(), local(vr.grad()))};
    const char* names[4] = {"out", "dq", "dk", "dv"};
    for (int i = 0; i < 4; ++i)
      if (!(e[i] < 1e-5))
        throw std::runtime_error("cp " + std::to_string(cp) + " rank " + std::to_string(c.rank()) +
                                 ": " + names[i] + " differs by " + std::to_string(e[i]));
  });
}

TEST(RingAttention, EqualsCausalAttentionWithGradientsCp2) { check_ring(2); }
TEST(RingAttention, EqualsCausalAttentionWithGradientsCp4) { check_ring(4); }

// Region operators: g(f(x) W_col) composed as Megatron's MLP equals the unsplit product, and the
// sequence-parallel pair gathers/scatters in tp-rank order with matching backward.
TEST(TensorParallel, RegionOperatorsMatchOneProcess) {
  at::manual_seed(5);
  Tensor x = at::randn({2, 6, 4}), w1 = at::randn({8, 4}), w2 = at::randn({4, 8});
  Tensor xr = x.clone().requires_grad_(true);
  Tensor ref = at::linear(at::relu(at::linear(xr, w1)), w2);
  Tensor dy = at::randn_like(ref);
  ref.backward(dy);
  for (bool sp : {false, true}) {
    run_ranks(MeshShape{1, 1, 1, 2}, [&](Communicator& c) {
      const int r = c.group_rank(GroupKind::tp);
      Tensor w1l = w1.chunk(2, 0)[r], w2l = w2.chunk(2, 1)[r];
      Tensor xin = (sp ? x.chunk(2, 1)[r] : x).clone().requires_grad_(true);
      Tensor h = sp ? tp_gather_seq(xin, c) : tp_copy_to(xin, c);
      Tensor y = at::linear(at::relu(at::linear(h, w1l)), w2l);
      y = sp ? tp_reduce_scatter_seq(y, c) : tp_reduce_from(y, c);
      Tensor want = sp ? ref.detach().chunk(2, 1)[r] : ref.detach();
      y.backward(sp ? dy.chunk(2, 1)[r].contiguous() : dy);
      Tensor want_dx = sp ? xr.grad().chunk(2, 1)[r] : xr.grad();
      if (max_diff(y, want) > 1e-5 || max_diff(xin.grad(), want_dx) > 1e-5)
        throw std::runtime_error(std::string("region operators differ, sp=") + (sp ? "on" : "off"));
    });
  }
}

ModelSpec spec(int64_t kv_heads) {
  ModelSpec s;
  s.name = "tiny";
  s.architecture = "llama";
  s.hidden_size = 64;
  s.intermediate_size = 128;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 8;
  s.num_key_value_heads = kv_heads;
  s.head_dim = 8;
  s.vocab_size = 256;
  s.max_position_embeddings = 1024;
  return s;
}

struct PlainWeights : WeightSource {
  std::vector<Tensor> units;
  Tensor acquire(int u) override { return units[u]; }
};

// The whole model on a tp x cp mesh: loss equal to one process's, and after summing over cp
// (what FSDP's reduce-scatter over dp_shard_cp does) and TensorParallel::finish_gradients, every
// local gradient equals the tp piece of the 1-process gradient.
void check_model(MeshShape shape, int64_t kv_heads, bool sp) {
  const ModelSpec s = spec(kv_heads);
  at::manual_seed(3);
  const int64_t T = 32;
  Tensor tokens = at::randint(0, 256, {2, T}, at::kLong);
  Tensor targets = at::randint(0, 256, {2, T}, at::kLong);
  Model ref_model(s);
  PlainWeights ref;
  for (int u = 0; u < ref_model.num_units(); ++u)
    ref.units.push_back(ref_model.init_unit(u, 9).set_requires_grad(true));
  Tensor ref_loss = ref_model.loss_sum(tokens, targets, ref, {});
  ref_loss.backward();
  run_ranks(shape, [&](Communicator& c) {
    Model model(s);
    TpOptions o;
    o.sequence_parallel = sp;
    TensorParallel tp(model, c, o);
    ContextParallel cp(model, c);
    PlainWeights w;
    std::vector<FlatParam> params;
    for (int u = 0; u < model.num_units(); ++u) {
      w.units.push_back(tp.localize(u, model.init_unit(u, 9)).set_requires_grad(true));
      FlatParam fp;
      fp.unit = u;
      fp.param = w.units.back();
      params.push_back(fp);
    }
    ForwardOptions fo;
    fo.positions = cp.positions(T, at::kCPU);
    Tensor loss = model.loss_sum(cp.shard(tokens), cp.shard(targets), w, fo);
    loss.backward();
    Tensor total = loss.detach().clone();
    c.all_reduce(total, GroupKind::cp);
    if (std::abs(total.item<double>() - ref_loss.item<double>()) > 1e-4 * ref_loss.item<double>())
      throw std::runtime_error("loss " + std::to_string(total.item<double>()) + " vs " +
                               std::to_string(ref_loss.item<double>()));
    for (auto& fp : params) c.all_reduce(fp.param.mutable_grad(), GroupKind::cp);
    tp.finish_gradients(params);
    for (int u = 0; u < model.num_units(); ++u) {
      Tensor want = tp.localize(u, ref.units[u].grad());
      const double d = max_diff(w.units[u].grad(), want);
      if (!(d < 2e-5 * (1 + want.abs().max().item<double>())))
        throw std::runtime_error("unit " + std::to_string(u) + " gradient differs by " + std::to_string(d));
    }
  });
}

TEST(TensorParallel, ModelTp2SequenceParallel) { check_model({1, 1, 1, 2}, 4, true); }
TEST(TensorParallel, ModelTp2NoSequenceParallel) { check_model({1, 1, 1, 2}, 4, false); }
TEST(TensorParallel, ModelTp4KvHeadsCopied) { check_model({1, 1, 1, 4}, 2, true); }
TEST(ContextParallel, ModelCp2) { check_model({1, 1, 2, 1}, 4, true); }
TEST(ContextParallel, ModelCp2Tp2) { check_model({1, 1, 2, 2}, 4, true); }

// parallelize() on dp_shard x cp x tp: each dp rank takes one sequence; after finish_gradients()
// the loss (summed over dp_cp) and the global gradient norm (every element counted once) equal
// one process's over the whole batch, so dp's reductions, tp's sums of partial gradients and the
// annotation of tp's copies are all wired. kv_heads 2 on tp 4 copies kv heads.
void check_parallelized(MeshShape shape, int64_t kv_heads) {
  const ModelSpec s = spec(kv_heads);
  const int64_t dp = shape[Axis::dp_replicate] * shape[Axis::dp_shard], T = 32;
  const double tokens_total = static_cast<double>(dp * T);
  at::manual_seed(5);
  Tensor tokens = at::randint(0, 256, {dp, T}, at::kLong);
  Tensor targets = at::randint(0, 256, {dp, T}, at::kLong);
  Model ref_model(s);
  PlainWeights ref;
  for (int u = 0; u < ref_model.num_units(); ++u)
    ref.units.push_back(ref_model.init_unit(u, 9).set_requires_grad(true));
  Tensor ref_loss = ref_model.loss_sum(tokens, targets, ref, {}) / tokens_total;
  ref_loss.backward();
  double ref_sq = 0;
  for (auto& u : ref.units) ref_sq += u.grad().pow(2).sum().item<double>();
  const double ref_norm = std::sqrt(ref_sq);
  run_ranks(shape, [&](Communicator& c) {
    Model model(s);
    ParallelizeOptions po;
    po.seed = 9;
    RunConfig rc;
    rc.mesh = shape;
    const LayoutCheck layout = ParallelLayout::check(rc, nullptr, Placement::of(rc));
    EXPECT_TRUE(layout.ok());
    po.fsdp_group = layout.layout->fsdp_group();
    auto pm = parallelize(model, c, po);
    const int row = c.group(GroupKind::dp).rank;
    ForwardOptions fo;
    fo.positions = pm->positions(T, at::kCPU);
    pm->arm_gradient_sync();
    Tensor loss = pm->loss_sum(pm->shard_sequence(tokens.narrow(0, row, 1)),
                               pm->shard_sequence(targets.narrow(0, row, 1)), fo);
    (loss / tokens_total).backward();
    pm->finish_gradients();
    const double norm = pm->grad_norm();
    Tensor total = loss.detach().to(at::kDouble).reshape({1});
    c.all_reduce(total, GroupKind::dp_cp);
    const double got = total.item<double>() / tokens_total, want = ref_loss.item<double>();
    if (std::abs(got - want) > 1e-5 * want)
      throw std::runtime_error("loss " + std::to_string(got) + " vs " + std::to_string(want));
    // Tight: leaving out tp's sum of the norm weights' partial gradients under sequence
    // parallelism moves the norm by ~4e-5 of it; rounding moves it by < 1e-6.
    if (std::abs(norm - ref_norm) > 2e-6 * ref_norm)
      throw std::runtime_error("grad norm " + std::to_string(norm) + " vs " + std::to_string(ref_norm) +
                               " (relative " + std::to_string((norm - ref_norm) / ref_norm) + ")");
  });
}

TEST(Parallelize, DpShard2Tp2) { check_parallelized({1, 2, 1, 2}, 4); }
TEST(Parallelize, DpReplicate2Cp2Tp2) { check_parallelized({2, 1, 2, 2}, 4); }
TEST(Parallelize, DpShard2Tp4KvHeadsCopied) { check_parallelized({1, 2, 1, 4}, 2); }

// Reading a checkpoint (ParallelizeOptions::read_full) gives every rank exactly the parameters the
// seed path builds and cuts (localize, then the FSDP shard): TensorParallel::source_runs cuts as
// localize does, at the arbitrary offsets FSDP shards start at, and every read stays inside its
// tensor. kv_heads 2 on tp 4 copies kv heads; hidden 36 makes units of odd sizes (padding).
void check_read_equals_seed(MeshShape shape, int64_t kv_heads, int64_t hidden) {
  ModelSpec s = spec(kv_heads);
  s.hidden_size = hidden;  // need not be heads x head_dim
  s.intermediate_size = 100;
  s.attention_bias = true;  // the bias pieces too
  Model full_model(s);
  std::vector<Tensor> full;
  for (int u = 0; u < full_model.num_units(); ++u) full.push_back(full_model.init_unit(u, 9));
  run_ranks(shape, [&](Communicator& c) {
    RunConfig rc;
    rc.mesh = shape;
    rc.training.global_batch = 12;  // divisible by every dp size below
    const LayoutCheck layout = ParallelLayout::check(rc, nullptr, Placement::of(rc));
    if (!layout.ok()) throw std::runtime_error("layout: " + layout.error_texts().front());
    ParallelizeOptions po;
    po.seed = 9;
    po.fsdp_group = layout.layout->fsdp_group();
    Model seeded_model(s), read_model(s);
    auto seeded = parallelize(seeded_model, c, po);
    ParallelizeOptions pr = po;
    pr.seed = 0;  // a different seed: the numbers must come from the reads
    pr.read_full = [&](int unit, int param, int64_t offset, int64_t count, float* out) {
      const UnitLayout& lay = full_model.full_layout(unit);
      if (offset < 0 || count <= 0 || offset + count > lay.params[param].numel())
        throw std::runtime_error("read outside " + lay.params[param].name);
      const float* src = full[unit].data_ptr<float>() + lay.offset(param) + offset;
      std::copy(src, src + count, out);
    };
    auto read = parallelize(read_model, c, pr);
    for (size_t i = 0; i < seeded->params().size(); ++i)
      if (!at::equal(seeded->params()[i], read->params()[i]))
        throw std::runtime_error("unit " + std::to_string(i) + " differs");
  });
}

TEST(Parallelize, CheckpointReadsEqualSeedDpShard2Tp2) { check_read_equals_seed({1, 2, 1, 2}, 4, 36); }
TEST(Parallelize, CheckpointReadsEqualSeedDpShard2Tp4KvCopied) { check_read_equals_seed({1, 2, 1, 4}, 2, 32); }
TEST(Parallelize, CheckpointReadsEqualSeedDpShard3Cp2) { check_read_equals_seed({1, 3, 2, 1}, 4, 36); }
TEST(Parallelize, CheckpointReadsEqualSeedHsdpTp2) { check_read_equals_seed({2, 2, 1, 2}, 4, 36); }

}  // namespace
}  // namespace meshwork::trainer
