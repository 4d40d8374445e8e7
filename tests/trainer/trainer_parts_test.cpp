// The trainer's parts on their own: llm.c shards, the batch order, flags, the LR schedule,
// AdamW on shards, the model at init, and FSDP gradients against one process (real Gloo between
// threads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "trainer/free_port.h"
#include "trainer/calibrate.h"
#include "trainer/comm.h"
#include "trainer/data.h"
#include "trainer/lr_schedule.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"
#include "trainer/options.h"
#include "trainer/parallelize_dp.h"
#include "tests/scratch_dirs.h"

namespace fs = std::filesystem;

namespace meshwork::trainer {
namespace {

fs::path tmp(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("meshtrain-parts-" + std::to_string(getpid()));
  if (!fs::exists(d)) ::meshwork::test::fresh_scratch_dir(d, d);
  return d / name;
}

void write_shard(const fs::path& p, int32_t magic, const std::vector<uint32_t>& tokens,
                 int32_t claimed = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = 1;
  header[2] = claimed >= 0 ? claimed : static_cast<int32_t>(tokens.size());
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), 1024);
  for (uint32_t t : tokens) {
    if (magic == 20240520) {
      uint16_t v = static_cast<uint16_t>(t);
      out.write(reinterpret_cast<const char*>(&v), 2);
    } else {
      out.write(reinterpret_cast<const char*>(&t), 4);
    }
  }
}

TEST(TokenData, ReadsBothWidthsAndDirectoriesInOrder) {
  fs::path dir = tmp("shards");
  fs::create_directories(dir);
  write_shard(dir / "a.bin", 20240520, {1, 2, 3, 4, 5});
  write_shard(dir / "b.bin", 20240801, {6, 7, 8, 9, 10});
  auto d = TokenData::open(dir, 256);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ((*d)->num_tokens(), 10);
  EXPECT_EQ((*d)->num_sequences(3), 3);  // (10 - 1) / 3
  std::vector<int64_t> seq(4);
  (*d)->sequence(1, 3, seq.data());  // tokens 3..6 of the stream: 4 5 6 7
  EXPECT_EQ(seq, (std::vector<int64_t>{4, 5, 6, 7}));
  (*d)->sequence(4, 3, seq.data());  // wraps to sequence 1
  EXPECT_EQ(seq, (std::vector<int64_t>{4, 5, 6, 7}));
}

TEST(TokenData, RefusesBadShardsNamingData) {
  write_shard(tmp("bad_magic.bin"), 12345, {1, 2, 3});
  auto a = TokenData::open(tmp("bad_magic.bin"), 256);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().field, "--data");
  EXPECT_NE(a.error().allowed.find("magic"), std::string::npos);
  write_shard(tmp("short.bin"), 20240520, {1, 2, 3}, /*claimed=*/9);
  EXPECT_FALSE(TokenData::open(tmp("short.bin"), 256).ok());
  write_shard(tmp("vocab.bin"), 20240801, {1, 300, 3});
  auto v = TokenData::open(tmp("vocab.bin"), 256);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.error().allowed.find("vocab_size 256"), std::string::npos);
  EXPECT_FALSE(TokenData::open(tmp("missing.bin"), 256).ok());
}

TEST(TokenData, GlobalBatchIsTheSameSetForEveryShape) {
  const int64_t G = 8;
  for (int64_t step : {0, 3}) {
    std::set<int64_t> one;
    for (int64_t m = 0; m < 8; ++m)
      for (int64_t i : TokenData::batch_indices(step, G, 0, 1, m, 1)) one.insert(i);
    for (int64_t dp : {2, 4, 8}) {
      std::set<int64_t> many;
      for (int64_t r = 0; r < dp; ++r)
        for (int64_t m = 0; m < G / dp / 1; ++m)
          for (int64_t i : TokenData::batch_indices(step, G, r, dp, m, 1)) many.insert(i);
      EXPECT_EQ(many, one) << "dp " << dp;
    }
    EXPECT_EQ(*one.begin(), step * G);
    EXPECT_EQ(one.size(), 8u);
  }
}

TEST(Options, ParsesAndRefusesNamingTheFlag) {
  auto o = parse_options({"--steps=20", "--dp-shard", "2", "--precision", "bf16", "--resume"});
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->run.training.steps, 20);
  EXPECT_EQ(o->run.mesh[Axis::dp_shard], 2);
  EXPECT_EQ(o->run.training.precision, Precision::bf16);
  EXPECT_TRUE(o->resume);
  auto back = parse_options(to_args(*o));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->run.training, o->run.training);
  EXPECT_EQ(back->run.mesh, o->run.mesh);
  for (auto [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--steps", "0"}, "--steps"},
           {{"--lr", "-1"}, "--lr"},
           {{"--tp", "x"}, "--tp"},
           {{"--device", "tpu"}, "--device"},
           {{"--master-port", "70000"}, "--master-port"},
           {{"--seq-len"}, "--seq-len"},
           {{"--bogus"}, "--bogus"},
           {{"--resume=yes"}, "--resume"},
           {{"--steps", "5", "stray"}, "argument"}}) {
    auto r = parse_options(args);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_EQ(r.error().field, flag);
    EXPECT_EQ(r.error().kind, ErrorKind::invalid_input) << flag;
  }
  // core/cli_args.h's words, and the last of a repeated flag wins.
  EXPECT_EQ(parse_options({"--master-port", "70000"}).error().message(),
            "--master-port: 70000: a port number >= 1 (at most 65535)");
  EXPECT_EQ(parse_options({"--bogus"}).error().message(), "--bogus: not an option of meshtrain (see --help)");
  EXPECT_EQ(parse_options({"--run-dir"}).error().message(), "--run-dir: needs a value: DIR");
  auto last = parse_options({"--steps", "3", "--help", "--steps=7"});
  ASSERT_TRUE(last.ok()) << last.error().message();
  EXPECT_EQ(last->run.training.steps, 7);
  EXPECT_TRUE(last->help);
  // A config file that cannot be read is an I/O error (exit 1), named through --config.
  auto missing = parse_options({"--config", "/nonexistent/run_config.json"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().field, "--config");
  EXPECT_EQ(missing.error().kind, ErrorKind::io);
}

TEST(Schedule, WarmupThenCosineToATenth) {
  TrainingConfig t;
  t.lr = 1.0;
  t.warmup_steps = 4;
  t.steps = 14;
  EXPECT_DOUBLE_EQ(learning_rate(t, 0), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate(t, 3), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(t, 4), 1.0);
  EXPECT_NEAR(learning_rate(t, 13), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(t, 8), 0.1 + 0.9 * (1 + std::cos(M_PI * 4.0 / 9.0)) / 2, 1e-12);
}

TEST(AdamW, ShardsUpdateExactlyAsTheFullTensor) {
  at::manual_seed(0);
  at::Tensor full = at::randn({10}).set_requires_grad(true);
  at::Tensor a = full.detach().narrow(0, 0, 5).clone().set_requires_grad(true);
  at::Tensor b = full.detach().narrow(0, 5, 5).clone().set_requires_grad(true);
  AdamW one, two;
  std::vector<at::Tensor> p1{full}, p2{a, b};
  one.init(p1);
  two.init(p2);
  for (int s = 0; s < 3; ++s) {
    at::Tensor g = at::randn({10});
    full.mutable_grad() = g.clone();
    a.mutable_grad() = g.narrow(0, 0, 5).clone();
    b.mutable_grad() = g.narrow(0, 5, 5).clone();
    one.update(p1, 1e-2);
    two.update(p2, 1e-2);
  }
  EXPECT_TRUE(at::equal(full.detach(), at::cat({a.detach(), b.detach()})));
}

// update() sends CUDA fp32 parameters through torch's fused multi-tensor kernel
// (torch_fused_step); its argument mapping (step counts, decoupled decay, the clipping
// coefficient as AMP's grad_scale) is checked here on the kernel's CPU version against the
// CPU update, over three steps with clipping on.
TEST(AdamW, TorchFusedStepIsTheSameUpdate) {
  at::manual_seed(3);
  std::vector<at::Tensor> p1{at::randn({7, 5}), at::randn({33})};
  std::vector<at::Tensor> p2{p1[0].clone(), p1[1].clone()};
  const at::Tensor start = p1[0].clone();
  AdamW own, torch_fused;
  own.init(p1);
  torch_fused.init(p2);
  std::vector<at::Tensor> steps{at::zeros({}), at::zeros({})};
  for (int s = 1; s <= 3; ++s) {
    const double lr = 1e-2 * s, clip = 0.25 * s;
    std::vector<at::Tensor> grads;
    for (size_t i = 0; i < p1.size(); ++i) {
      at::Tensor g = at::randn(p1[i].sizes());
      p1[i].mutable_grad() = g.clone();
      grads.push_back(g.clone());
      steps[i].fill_(s);
    }
    own.update(p1, lr, clip);
    torch_fused.torch_fused_step(p2, grads, torch_fused.exp_avg, torch_fused.exp_avg_sq, steps, lr, clip);
  }
  for (size_t i = 0; i < p1.size(); ++i) {
    EXPECT_TRUE(at::allclose(p1[i], p2[i], 1e-6, 1e-7)) << i << ": " << (p1[i] - p2[i]).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(own.exp_avg[i], torch_fused.exp_avg[i], 1e-6, 1e-7)) << i;
    EXPECT_TRUE(at::allclose(own.exp_avg_sq[i], torch_fused.exp_avg_sq[i], 1e-6, 1e-9)) << i;
  }
  // Both moved the parameters: agreeing by both doing nothing would not pass.
  EXPECT_GT((p2[0] - start).abs().max().item<double>(), 1e-3);
}

ModelSpec tiny_spec() {
  ModelSpec s;
  s.name = "tiny";
  s.architecture = "llama";
  s.hidden_size = 64;
  s.intermediate_size = 128;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 8;
  s.num_key_value_heads = 4;
  s.head_dim = 8;
  s.vocab_size = 256;
  s.max_position_embeddings = 1024;
  return s;
}

// Hands the model plain full parameters (what DataParallel does with one rank).
struct PlainWeights : WeightSource {
  std::vector<at::Tensor> units;
  at::Tensor acquire(int u) override { return units[u]; }
};

TEST(Model, StartsNearUniformAndCountsItsParameters) {
  Model m(tiny_spec());
  PlainWeights w;
  int64_t total = 0;
  for (int u = 0; u < m.num_units(); ++u) {
    w.units.push_back(m.init_unit(u, 7).set_requires_grad(true));
    total += w.units.back().numel();
  }
  EXPECT_EQ(total, tiny_spec().parameter_count());
  EXPECT_TRUE(at::equal(m.init_unit(1, 7), m.init_unit(1, 7)));
  EXPECT_FALSE(at::equal(m.init_unit(1, 7), m.init_unit(2, 7)));
  // Seeded, and 512 tokens: with 32 unseeded tokens the sample mean itself strayed past 0.05.
  at::manual_seed(17);
  at::Tensor tokens = at::randint(0, 256, {8, 64}, at::kLong);
  at::Tensor targets = at::randint(0, 256, {8, 64}, at::kLong);
  at::Tensor loss = m.loss_sum(tokens, targets, w, {}) / 512.0;
  EXPECT_NEAR(loss.item<double>(), std::log(256.0), 0.05);
  loss.backward();
  for (auto& u : w.units) EXPECT_GT(u.grad().abs().sum().item<double>(), 0.0);
}

// Off the fused CPU kernels (here: fp64 weights; on a GPU: CUDA) the block runs ATen's
// composite ops with gate and up as two GEMMs; loss and gradients equal the fused fp32 path.
TEST(Model, CompositePathWithTwoMlpGemmsGivesTheFusedLossAndGradients) {
  Model m(tiny_spec());
  PlainWeights f32, f64;
  for (int u = 0; u < m.num_units(); ++u) {
    at::Tensor w = m.init_unit(u, 11);
    f32.units.push_back(w.clone().set_requires_grad(true));
    f64.units.push_back(w.to(at::kDouble).set_requires_grad(true));
  }
  at::manual_seed(5);
  at::Tensor tokens = at::randint(0, 256, {2, 32}, at::kLong);
  at::Tensor targets = at::randint(0, 256, {2, 32}, at::kLong);
  ForwardOptions o64;
  o64.compute_dtype = at::kDouble;
  at::Tensor l32 = m.loss_sum(tokens, targets, f32, {});
  at::Tensor l64 = m.loss_sum(tokens, targets, f64, o64);
  EXPECT_NEAR(l64.item<double>() / l32.item<double>(), 1.0, 1e-5);
  l32.backward();
  l64.backward();
  for (size_t u = 0; u < f32.units.size(); ++u) {
    at::Tensor g32 = f32.units[u].grad().to(at::kDouble), g64 = f64.units[u].grad();
    EXPECT_LT((g32 - g64).norm().item<double>() / g64.norm().item<double>(), 1e-4) << "unit " << u;
  }
}

// FSDP over 2 ranks (threads, real Gloo) gives each rank exactly its slice of the gradient one
// process computes for the same global batch, with and without activation checkpointing, when
// each rank accumulates two micro-batches (reduce-scattered in each backward, or summed locally
// and reduce-scattered in the last one: --fsdp-grad-sync step).
TEST(DataParallel, FsdpGradientsAreTheSingleProcessGradientSharded) {
  for (auto [ckpt, per_step] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    const ModelSpec spec = tiny_spec();
    at::manual_seed(1);
    at::Tensor tokens = at::randint(0, 256, {4, 16}, at::kLong);
    at::Tensor targets = at::randint(0, 256, {4, 16}, at::kLong);
    // One process, both sequences.
    Model m(spec);
    PlainWeights w;
    for (int u = 0; u < m.num_units(); ++u) w.units.push_back(m.init_unit(u, 3).set_requires_grad(true));
    (m.loss_sum(tokens, targets, w, {}) / 64.0).backward();

    const int p = free_tcp_port();
    std::vector<std::vector<at::Tensor>> shard_grads(2);
    std::vector<std::thread> threads;
    std::vector<std::string> errors(2);
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        try {
          CommOptions o;
          o.rank = r;
          o.world_size = 2;
          o.ranks_per_node = 2;
          o.shape = MeshShape{1, 2, 1, 1};
          o.master_port = p;
          o.host_store = r == 0;
          auto comm = Communicator::create(o);
          if (!comm.ok()) throw std::runtime_error(comm.error().message());
          Model model(spec);
          DataParallelOptions dpo;
          dpo.seed = 3;
          dpo.fsdp_grad_sync_per_step = per_step;
          DataParallel dp(model, **comm, dpo);
          ForwardOptions fo;
          fo.activation_checkpointing = ckpt;
          for (int micro = 0; micro < 2; ++micro) {
            if (micro == 1) dp.arm_gradient_sync();
            const int64_t row = 2 * r + micro;
            at::Tensor loss = model.loss_sum(tokens.narrow(0, row, 1), targets.narrow(0, row, 1), dp, fo);
            (loss / 64.0).backward();
          }
          dp.finish_gradients();
          for (auto& fp : dp.params()) shard_grads[r].push_back(fp.param.grad().clone());
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_EQ(errors[0] + errors[1], "");
    for (int u = 0; u < m.num_units(); ++u) {
      at::Tensor got = at::cat({shard_grads[0][u], shard_grads[1][u]}).narrow(0, 0, w.units[u].numel());
      EXPECT_TRUE(at::allclose(got, w.units[u].grad(), 1e-4, 1e-6))
          << "unit " << u << (ckpt ? " (checkpointed)" : "") << (per_step ? " (sync per step)" : "")
          << " max diff "
          << (got - w.units[u].grad()).abs().max().item<double>();
    }
  }
}

// The calibration's group layouts: every group of a probe lies on the link it is fitted for, and
// across nodes there is a layout for every count of ranks per node a group can have, so an efsdp
// or ep group of 4 over two nodes of 4 ranks (2 on each) has a fit of its own size.
TEST(CalibrationProbes, EveryRanksPerNodeAGroupAcrossNodesCanHaveIsMeasured) {
  for (const auto& [world, per_node] : std::vector<std::pair<int, int>>{{8, 4}, {16, 8}, {4, 1}, {4, 4}}) {
    std::set<std::pair<int, int>> inter;  // (group size, ranks of it on each node)
    std::set<int> intra;
    for (const CalibrationProbe& p : calibration_probes(world, per_node)) {
      auto mesh = DeviceMesh::create(p.shape, per_node);
      ASSERT_TRUE(mesh.ok()) << mesh.error().message();
      for (const std::vector<int>& g : mesh->groups(p.kind)) {
        std::map<int, int> on_node;
        for (int r : g) ++on_node[r / per_node];
        EXPECT_EQ(on_node.size() > 1, p.link == LinkKind::inter_node) << p.shape.to_string();
        for (const auto& [node, k] : on_node) EXPECT_EQ(k, on_node.begin()->second) << p.shape.to_string();
        if (p.link == LinkKind::inter_node) inter.insert({static_cast<int>(g.size()), on_node.begin()->second});
        else intra.insert(static_cast<int>(g.size()));
      }
    }
    const int nodes = world / per_node;
    for (int k = 1; k <= per_node; ++k) {
      if (per_node % k != 0) continue;
      if (k >= 2) EXPECT_TRUE(intra.count(k)) << world << " ranks, " << per_node << " per node: " << k << " inside";
      if (nodes > 1) EXPECT_TRUE(inter.count({nodes * k, k})) << world << " ranks, " << per_node << " per node: " << k << " on each";
    }
    EXPECT_EQ(inter.empty(), nodes == 1);
  }
}

}  // namespace
}  // namespace meshwork::trainer
