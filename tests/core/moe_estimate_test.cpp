// Memory and step time of mixture-of-experts models: experts split over ep and FSDP-sharded over
// efsdp, the dispatch buffers, the all-to-all on its link, MFU on active parameters; each number
// checked against its formula (docs/estimator.md) worked by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <tuple>

#include "core/memory_estimate.h"
#include "core/param_layout.h"
#include "core/parallel_layout.h"
#include "core/routing_imbalance.h"
#include "core/time_estimate.h"

using namespace meshwork;

namespace {

ModelSpec preset(const std::string& name) {
  auto spec = load_model_spec(name);
  EXPECT_TRUE(spec.ok()) << name;
  return *spec;
}

MemoryQuery memory_query(const ModelSpec& m, MeshShape shape, int ep) {
  shape.ep = ep;
  MemoryQuery q;
  q.model = m;
  q.shape = shape;
  q.training.seq_len = 4096;
  q.training.micro_batch = 1;
  return q;
}

TimeQuery time_query(const ModelSpec& m, MeshShape shape, int ep, int gpus_per_node = 8) {
  shape.ep = ep;
  TimeQuery q;
  q.model = m;
  q.shape = shape;
  q.gpus_per_node = gpus_per_node;
  q.training.seq_len = 4096;
  q.training.micro_batch = 1;
  q.hardware = HardwareModel::h100();
  return q;
}

const MemoryTerm* term(const MemoryBreakdown& b, const std::string& name) {
  for (const MemoryTerm& t : b.terms)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

TEST(MoeEstimate, ParameterLayoutCountsEveryExpertOnce) {
  for (const char* name : {"qwen3-30b-a3b", "qwen3-235b-a22b", "mixtral-8x7b", "olmoe-1b-7b", "qwen3-8b"}) {
    const ModelSpec m = preset(name);
    EXPECT_EQ(tp_param_layout(m, 1).total_numel(), m.parameter_count()) << name;
    if (!m.is_moe()) continue;
    // ep ranks hold the experts between them: each 1/ep of them.
    const ParamLayout one = tp_param_layout(m, 1), eight = tp_param_layout(m, 1, true, 8);
    EXPECT_EQ(eight.expert_numel() * 8, one.expert_numel()) << name;
    EXPECT_EQ(one.expert_numel(), m.sparse_layer_count() * m.moe.num_experts * m.expert_parameter_count()) << name;
    EXPECT_EQ(eight.expert_shards(16), 2) << name;  // efsdp = n x tp / ep
  }
}

// qwen3-30b-a3b on dp_shard 8: with ep 8 each rank keeps 16 whole experts per layer (efsdp 1),
// with ep 1 an eighth of all 128: the same state per rank, but FSDP gathers 16 experts per layer
// instead of 128, and the dispatch buffers appear.
TEST(MoeEstimate, ExpertParallelShrinksTheGatheredLayer) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  const MemoryBreakdown ep1 = estimate_memory(memory_query(m, MeshShape{1, 8, 1, 1}, 1));
  const MemoryBreakdown ep8 = estimate_memory(memory_query(m, MeshShape{1, 8, 1, 1}, 8));
  EXPECT_EQ(ep8.expert_shards, 1);
  EXPECT_EQ(ep1.expert_shards, 8);
  EXPECT_NEAR(static_cast<double>(ep8.owned_params), static_cast<double>(ep1.owned_params),
              1e-3 * static_cast<double>(ep1.owned_params));
  // One layer gathered: attention, router and 16 experts (94.6 M) instead of 128 experts (623 M).
  EXPECT_LT(tp_param_layout(m, 1, true, 8).layer_numel() * 6, tp_param_layout(m, 1).layer_numel());
  EXPECT_LT(term(ep8, "fsdp.gathered_params")->bytes * 2, term(ep1, "fsdp.gathered_params")->bytes);
  EXPECT_LT(ep8.gather_buffers, ep1.gather_buffers);
  EXPECT_LT(ep8.total(), ep1.total());
  // R = top-k 8 x T 4096 routed copies; 2 x 2 B x R x h 2048.
  EXPECT_EQ(ep8.routed_tokens, 8 * 4096);
  const MemoryTerm* a2a = term(ep8, "ep.all_to_all");
  ASSERT_NE(a2a, nullptr);
  EXPECT_EQ(a2a->bytes, 2 * 2 * int64_t{8 * 4096} * 2048);
  EXPECT_EQ(term(ep1, "ep.all_to_all"), nullptr);
  // The experts' activations: per sparse layer 2 B x (2h + 4 I_e) x R, 48 layers.
  const MemoryTerm* experts = term(ep8, "activations.experts");
  ASSERT_NE(experts, nullptr);
  EXPECT_EQ(experts->bytes, 48 * 2 * (2 * 2048 + 4 * 768) * int64_t{8 * 4096});
  EXPECT_EQ(term(ep8, "activations.mlp"), nullptr);  // every layer of qwen3-30b-a3b is sparse
}

// With ep > 1 meshtrain keeps each sparse block as two flat parameters (dense part over n, experts
// over efsdp), never prefetches it, and frees the gathered block before cutting its gradient into
// the two padded parts. One block is gathered; the peak is the largest of three moments of the
// last block's backward, each on top of the saved activations and the gathered block:
//   its gather (the two all-gathered parts, before the concatenation);
//   its layer's backward (the transient, or the loss if larger, and the all-to-all buffers);
//   its reduction, after its own layer's saved activations are freed (the two padded fp32
//   parts, the two shards and Gloo's receive buffer of a part whose group has more than one rank).
TEST(MoeEstimate, ExpertParallelBlocksPeakAtTheLargestMomentOfTheirBackward) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  auto sum = [](const std::vector<ParamTensor>& ts) {
    int64_t n = 0;
    for (const ParamTensor& t : ts) n += t.numel();
    return n;
  };
  for (const int64_t seq : {4096, 64}) {
    for (const MeshShape shape : {MeshShape{1, 8, 1, 1}, MeshShape{1, 1, 1, 8}}) {
      SCOPED_TRACE("seq " + std::to_string(seq) + ", tp " + std::to_string(shape[Axis::tp]));
      MemoryQuery q = memory_query(m, shape, 8);
      q.training.seq_len = seq;
      q.training.device = DeviceKind::cpu;
      q.training.precision = Precision::fp32;
      const MemoryBreakdown b = estimate_memory(q);
      const ParamLayout layout = tp_param_layout(m, shape[Axis::tp], true, 8);
      const int64_t n = shape[Axis::dp_shard];  // efsdp = n x tp / ep = 1 in both shapes
      const int64_t experts = sum(layout.experts), block = sum(layout.layer) + sum(layout.router) + experts;
      ASSERT_EQ(experts, 16 * 3 * 768 * 2048);  // 16 whole experts, efsdp 1: no padding
      const int64_t dense_padded = (block - experts + n - 1) / n * n;
      const int64_t root = n > 1 ? layout.root_numel() : 0;
      ASSERT_NE(term(b, "fsdp.gathered_params"), nullptr);
      EXPECT_EQ(term(b, "fsdp.gathered_params")->bytes, 4 * (block + root));
      EXPECT_EQ(term(b, "fsdp.reduce_scatter_recv"), nullptr);
      // Every layer of qwen3-30b-a3b is sparse: one layer's saved activations are 1/48 of them.
      ASSERT_EQ(b.activations % 48, 0);
      const int64_t layer_saved = b.activations / 48;
      const int64_t recv = n > 1 ? dense_padded : 0;  // the experts' group is one rank: no receive
      const int64_t gather = 4 * (dense_padded + experts);
      const int64_t reduce = 4 * (dense_padded + experts + dense_padded / n + experts + recv);
      const int64_t layer_backward = std::max(b.logits, b.backward_transient) + term(b, "ep.all_to_all")->bytes;
      const int64_t largest = std::max({layer_backward, gather, reduce - layer_saved});
      EXPECT_EQ(b.backward_phase(), b.params + b.grads_at_backward_peak + b.optimizer + b.activations +
                                        4 * (block + root) + largest);
      EXPECT_EQ(term(b, "fsdp.unsharded_grad")->bytes, largest - layer_backward);
      // Long sequences peak in the layer's backward; short ones in the reduction.
      if (seq == 4096) EXPECT_EQ(largest, layer_backward);
      else EXPECT_EQ(largest, reduce - layer_saved);
    }
  }
}

// With ep > 1 the experts' FSDP collectives are their own, over efsdp and on efsdp's link.
// qwen3-30b-a3b on 2 nodes x 4 GPUs, tp 8 with ep 2: no dense FSDP (dp_shard x cp = 1), but
// efsdp = 8 / 2 = 4 strides over the tp ranks, {0, 2, 4, 6}: across the nodes. Per sparse
// layer and micro-batch two all-gathers of the rank's experts (forward, backward) and one
// reduce-scatter of their fp32 gradients, at the inter-node link.
TEST(MoeEstimate, ExpertShardsAreGatheredOnTheirOwnGroupsLink) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  TimeQuery q = time_query(m, MeshShape{1, 1, 1, 8}, 2, 4);
  const TimeEstimate e = estimate_time(q);
  const AxisComm& fsdp = e.comm[Axis::dp_shard];
  EXPECT_TRUE(fsdp.crosses_nodes);
  const double E = static_cast<double>(tp_param_layout(m, 8, q.trainer.vocab_parallel, 2).expert_numel());
  const double L = static_cast<double>(m.sparse_layer_count());
  const HardwareModel& hw = q.hardware;
  // `passes` over every sparse layer's experts (E: all layers'), one collective per layer each.
  auto t = [&](Collective op, double passes, double bytes_per_param) {
    return passes * L * static_cast<double>(ring_steps(op, 4)) * hw.latency_s +
           passes * ring_bytes_sent(op, E * bytes_per_param, 4) / hw.inter_node_bytes_per_s;
  };
  const double want = t(Collective::all_gather, 2, 2) + t(Collective::reduce_scatter, 1, 4);
  EXPECT_NEAR(fsdp.seconds, want, 1e-9 * want);
  EXPECT_EQ(fsdp.collectives, static_cast<int>(3 * L));
  // The same shape on one node of 8: the same collectives, inside the node (faster).
  const TimeEstimate one = estimate_time(time_query(m, MeshShape{1, 1, 1, 8}, 2, 8));
  EXPECT_FALSE(one.comm[Axis::dp_shard].crosses_nodes);
  EXPECT_LT(one.comm[Axis::dp_shard].seconds, fsdp.seconds);
}

TEST(MoeEstimate, ImbalanceLoadsTheBusiestRank) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  MemoryQuery q = memory_query(m, MeshShape{1, 8, 1, 1}, 8);
  q.knobs.moe_imbalance = 1.5;
  EXPECT_EQ(estimate_memory(q).routed_tokens, 12 * 4096);
  // The dispatch buffers: the rank sends its own 8 x 4096 copies, receives the busiest 12 x 4096.
  EXPECT_EQ(term(estimate_memory(q), "ep.all_to_all")->bytes, 2 * int64_t{(8 + 12) * 4096} * 2048);
  TimeQuery balanced = time_query(m, MeshShape{1, 8, 1, 1}, 8);
  TimeQuery skewed = balanced;
  skewed.moe_imbalance = 1.5;
  const TimeEstimate b = estimate_time(balanced), s = estimate_time(skewed);
  EXPECT_NEAR(s.comm_ep.bytes, 1.5 * b.comm_ep.bytes, 1e-5 * b.comm_ep.bytes);  // the counts are not imbalanced
  EXPECT_GT(s.compute_s, b.compute_s);
  EXPECT_DOUBLE_EQ(s.model_flops_per_token, b.model_flops_per_token);  // MFU counts the model's work
}

// CPU ranks sharing cores (4 ranks of 1 thread on 2 cores, as a calibration of such a node
// records): the waiting ranks free their cores for the busiest, so only imbalance beyond the
// sharing of 2 adds compute, and all-to-all bytes (the cores copy them); on GPUs (and without
// known cores) all of it does.
TEST(MoeEstimate, CpuRanksSharingCoresPayOnlyTheImbalanceBeyondTheSharing) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  Calibration cal;
  cal.fingerprint.device = DeviceKind::cpu;
  cal.fingerprint.nodes = {ClusterFingerprint::Node{"vm", 4, "cpu", 2}};
  cal.matmul = {MatmulRate{Precision::fp32, 1, 4, 4e10, 1}};
  EXPECT_DOUBLE_EQ(cal.cpu_sharing(4), 2.0);
  EXPECT_DOUBLE_EQ(cal.cpu_sharing(1), 1.0);
  auto cpu_query = [&](double gamma) {
    TimeQuery q = time_query(m, MeshShape{1, 4, 1, 1}, 4, 4);
    q.training.device = DeviceKind::cpu;
    q.training.precision = Precision::fp32;
    q.calibration = cal;
    q.moe_imbalance = gamma;
    return estimate_time(q);
  };
  const TimeEstimate even = cpu_query(1.0), within = cpu_query(1.8), beyond = cpu_query(3.0);
  EXPECT_DOUBLE_EQ(within.compute_s, even.compute_s);
  EXPECT_DOUBLE_EQ(within.comm_ep.bytes, even.comm_ep.bytes);
  const double counts_bytes = 3.0 / 4.0 * 48 * 8 * 128;  // the counts' all-to-all, no imbalance
  EXPECT_NEAR(beyond.comm_ep.bytes - counts_bytes, 1.5 * (even.comm_ep.bytes - counts_bytes), 1e-6 * beyond.comm_ep.bytes);
  const double expert_flops = 6.0 * static_cast<double>(m.moe.experts_per_token * m.expert_parameter_count() *
                                                        m.sparse_layer_count());
  EXPECT_NEAR(beyond.hardware_flops_per_token - even.hardware_flops_per_token, 0.5 * expert_flops, 1e-6 * expert_flops);
  // Without the node's cores nothing says the ranks share them: all of gamma is paid.
  cal.fingerprint.nodes[0].cores = 0;
  EXPECT_NEAR(cpu_query(3.0).hardware_flops_per_token - even.hardware_flops_per_token, 2.0 * expert_flops,
              1e-6 * expert_flops);
  EXPECT_NEAR(cpu_query(3.0).comm_ep.bytes - counts_bytes, 3.0 * (even.comm_ep.bytes - counts_bytes),
              1e-6 * beyond.comm_ep.bytes);
}

// An ep group across nodes of CPU ranks: the node's link carries the copies bound for its
// experts, so the bytes grow with the imbalance of the group cut into its nodes' expert blocks
// (the layout takes it from the routing at ep / ranks per node), not with the busiest rank's;
// on GPUs, each rank with a link of its own, with the busiest rank's.
TEST(MoeEstimate, AnEpGroupAcrossNodesOfCpuRanksCarriesItsBusiestNodesCopies) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  Calibration cal;
  cal.fingerprint.device = DeviceKind::cpu;
  cal.fingerprint.nodes = {ClusterFingerprint::Node{"a", 4, "cpu", 2}, ClusterFingerprint::Node{"b", 4, "cpu", 2}};
  cal.matmul = {MatmulRate{Precision::fp32, 1, 4, 4e10, 1}};
  auto query = [&](DeviceKind device, double gamma, double node_gamma) {
    TimeQuery q = time_query(m, MeshShape{1, 8, 1, 1}, 8, 4);
    q.training.device = device;
    q.training.precision = Precision::fp32;
    if (device == DeviceKind::cpu) q.calibration = cal;
    q.moe_imbalance = gamma;
    q.moe_node_imbalance = node_gamma;
    return estimate_time(q);
  };
  const double counts_bytes = 7.0 / 8.0 * 48 * 8 * 128;
  const TimeEstimate even = query(DeviceKind::cpu, 1.0, 1.0);
  ASSERT_TRUE(even.comm_ep.crosses_nodes);
  const double rows = even.comm_ep.bytes - counts_bytes;
  // sigma 2: the busiest rank's 3.0 / 2 is below its node's 1.7; 4.0 / 2 is above it.
  EXPECT_NEAR(query(DeviceKind::cpu, 3.0, 1.7).comm_ep.bytes - counts_bytes, 1.7 * rows, 1e-9 * rows);
  EXPECT_NEAR(query(DeviceKind::cpu, 4.0, 1.7).comm_ep.bytes - counts_bytes, 2.0 * rows, 1e-9 * rows);
  const TimeEstimate gpu_even = query(DeviceKind::cuda, 1.0, 1.0);
  EXPECT_NEAR(query(DeviceKind::cuda, 3.0, 1.7).comm_ep.bytes - counts_bytes, 3.0 * (gpu_even.comm_ep.bytes - counts_bytes),
              1e-9 * rows);

  // The layout reads the node's imbalance from the routing at ep / ranks per node.
  std::vector<RoutedStep> steps(1);
  steps[0].layers.assign(static_cast<size_t>(m.sparse_layer_count()), std::vector<double>(128, 1.0));
  for (auto& layer : steps[0].layers)
    for (int e = 0; e < 16; ++e) layer[static_cast<size_t>(e)] = 9.0;  // the first 16 experts: ep 8's rank 0
  auto routing = MeasuredRouting::make(steps, "test");
  ASSERT_TRUE(routing.ok());
  RunConfig run;
  run.mesh = MeshShape{1, 8, 1, 1};
  run.mesh.ep = 8;
  run.training.seq_len = 4096;
  run.training.micro_batch = 1;
  Placement placement;
  placement.world_size = 8;
  placement.ranks_per_node = 4;
  LayoutCheck checked = ParallelLayout::check(run, &m, placement);
  ASSERT_TRUE(checked.ok());
  EstimateOptions options;
  options.routing = std::make_shared<const MeasuredRouting>(*routing);
  const TimeQuery q = checked.layout->time_query(m, options);
  EXPECT_DOUBLE_EQ(q.moe_imbalance, routing->step_imbalance(8));
  EXPECT_DOUBLE_EQ(q.moe_node_imbalance, routing->step_imbalance(2));
  EXPECT_LT(q.moe_node_imbalance, q.moe_imbalance);
}

// Network namespaces (or containers) that name the same host are one machine: 2 nodes of 4 CPU
// ranks on one host of 2 cores share them 4 ways, not 2; nodes on hosts of their own do not.
TEST(MoeEstimate, NodesOnOneHostShareItsCores) {
  Calibration cal;
  cal.fingerprint.device = DeviceKind::cpu;
  cal.fingerprint.nodes = {ClusterFingerprint::Node{"vm", 4, "cpu", 2}, ClusterFingerprint::Node{"vm", 4, "cpu", 2}};
  cal.matmul = {MatmulRate{Precision::fp32, 1, 4, 4e10, 1}};
  EXPECT_DOUBLE_EQ(cal.cpu_sharing(4), 4.0);
  cal.fingerprint.nodes[1].host = "other";
  EXPECT_DOUBLE_EQ(cal.cpu_sharing(4), 2.0);
  cal.fingerprint.nodes[1].cores = 1;  // the busiest machine decides
  EXPECT_DOUBLE_EQ(cal.cpu_sharing(4), 4.0);
  cal.fingerprint.nodes[0].host = cal.fingerprint.nodes[1].host = "";  // unnamed: each its own
  EXPECT_DOUBLE_EQ(cal.cpu_sharing(4), 4.0);
  cal.fingerprint.nodes[1].cores = 2;
  EXPECT_DOUBLE_EQ(cal.cpu_sharing(4), 2.0);
}

// With the experts' block calibrated, a step's compute is its experts' FLOPs at the block's rate
// for the shape's ep and split, and the rest at the matmul rate x step efficiency: ep 4's four
// times the rows per expert, measured faster, make the same FLOPs cheaper; without a block's
// rate every FLOP goes at the matmul rate, as before.
TEST(MoeEstimate, ExpertsComputeAtTheirBlocksRateForTheShapesEp) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  Calibration cal;
  cal.fingerprint.device = DeviceKind::cpu;
  cal.fingerprint.nodes = {ClusterFingerprint::Node{"a", 4, "cpu", 4}};
  cal.step_efficiency = 0.5;
  cal.matmul = {MatmulRate{Precision::fp32, 1, 4, 4e10, 1}, MatmulRate{Precision::fp32, 1, 4, 1e10, 1, 1},
                MatmulRate{Precision::fp32, 1, 4, 3e10, 1, 4}, MatmulRate{Precision::fp32, 1, 4, 2e10, 2, 4}};
  auto query = [&](MeshShape shape, int ep) {
    TimeQuery q = time_query(m, shape, ep, 4);
    q.training.device = DeviceKind::cpu;
    q.training.precision = Precision::fp32;
    q.training.global_batch = 4;
    q.calibration = cal;
    q.moe_imbalance = 1.0;
    return q;
  };
  const double experts = 6.0 * static_cast<double>(m.moe.experts_per_token * m.expert_parameter_count() *
                                                   m.sparse_layer_count());
  for (auto [ep, tp, rate] : {std::tuple{1, 1, 1e10}, std::tuple{4, 1, 3e10}, std::tuple{4, 2, 2e10}, std::tuple{2, 1, 1e10}}) {
    const TimeQuery q = query(MeshShape{1, 4 / tp, 1, tp}, ep);
    const TimeEstimate t = estimate_time(q);
    const double tokens = 4.0 * 4096 / 4;  // per rank
    const double dense_rate = *cal.matmul_flops(Precision::fp32, 4, tp);
    EXPECT_NEAR(t.compute_s, tokens * ((t.hardware_flops_per_token - experts) / (dense_rate * 0.5) + experts / rate),
                1e-9 * t.compute_s)
        << "ep " << ep << ", tp " << tp;  // ep 2: the nearest block measured (ep 1 before ep 4)
  }
  EXPECT_LT(estimate_time(query(MeshShape{1, 4, 1, 1}, 4)).compute_s,
            estimate_time(query(MeshShape{1, 4, 1, 1}, 1)).compute_s);
  TimeQuery q = query(MeshShape{1, 4, 1, 1}, 4);
  q.calibration->matmul.resize(1);  // no block measured
  const TimeEstimate plain = estimate_time(q);
  EXPECT_NEAR(plain.compute_s, 4.0 * 4096 / 4 * plain.hardware_flops_per_token / (4e10 * 0.5), 1e-9 * plain.compute_s);
  EXPECT_FALSE(q.calibration->expert_flops(Precision::fp32, 4, 1, 4));
  EXPECT_DOUBLE_EQ(*cal.matmul_flops(Precision::fp32, 4, 1), 4e10);  // the blocks are never a matmul rate
}

// One all-to-all of the rows sends (ep - 1) / ep x R x h x c; 4 per sparse layer per
// micro-batch, and 1 of the E int64 counts before them.
TEST(MoeEstimate, AllToAllOnItsLink) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  const TimeEstimate intra = estimate_time(time_query(m, MeshShape{1, 16, 1, 1}, 8));
  const TimeEstimate inter = estimate_time(time_query(m, MeshShape{1, 16, 1, 1}, 16));
  const double R = 8.0 * 4096;
  EXPECT_EQ(intra.comm_ep.collectives, 5 * 48);
  EXPECT_NEAR(intra.comm_ep.bytes, 4 * 48 * (7.0 / 8.0) * R * 2048 * 2 + 48 * (7.0 / 8.0) * 128 * 8, 1.0);
  EXPECT_FALSE(intra.comm_ep.crosses_nodes);
  EXPECT_TRUE(inter.comm_ep.crosses_nodes);
  const HardwareModel hw = HardwareModel::h100();
  EXPECT_NEAR(intra.comm_ep.seconds,
              5 * 48 * 7 * hw.latency_s + intra.comm_ep.bytes / hw.intra_node_bytes_per_s, 1e-9);
  EXPECT_NEAR(inter.comm_ep.seconds,
              5 * 48 * 15 * hw.latency_s + inter.comm_ep.bytes / hw.inter_node_bytes_per_s, 1e-9);
  EXPECT_DOUBLE_EQ(estimate_time(time_query(m, MeshShape{1, 16, 1, 1}, 1)).comm_ep.seconds, 0.0);
  EXPECT_NEAR(intra.step_s, intra.compute_s + intra.comm_s - intra.hidden_comm_s, 1e-12);
}

// MFU counts 6 x active parameters per token (plus attention), not every expert.
TEST(MoeEstimate, FlopsCountActiveParameters) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  EXPECT_EQ(flop_parameter_count(m), m.active_parameter_count() - m.embedding_parameter_count());
  EXPECT_LT(flop_parameter_count(m), m.parameter_count() / 5);
}

TEST(MoeEstimate, LayoutPassesImbalanceToTheTimeQuery) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  RunConfig config;
  config.mesh = MeshShape{1, 8, 1, 1};
  config.mesh.ep = 8;
  auto checked = ParallelLayout::check(config, &m, Placement::of(config));
  ASSERT_TRUE(checked.ok());
  EstimateOptions options;
  options.memory.moe_imbalance = 1.25;
  EXPECT_DOUBLE_EQ(checked.layout->time_query(m, options).moe_imbalance, 1.25);
  EXPECT_GT(estimate_time(*checked.layout, m, options).comm_ep.seconds, 0.0);
}

// Under sequence parallelism each tp rank routes its own rows, so what every tp rank holds whole
// has partial gradients that meshtrain all-reduces over tp after the step, one all-reduce per
// unit of the rank's FSDP shard (fp32). qwen3-30b-a3b on dp_shard 2 x tp 2: per layer the two
// norms (2 x 2048), the q/k norms (2 x 128) and the router (128 x 2048) = 266,496 elements,
// 48 layers and the final norm (2048): 12,793,856; with ep = 1 each layer adds its 128 whole
// experts (3 x 128 x 768 x 2048). With ep 2 the experts are summed over efsdp by FSDP, not over tp.
TEST(MoeEstimate, TensorParallelSumsPartialGradientsUnderSequenceParallelism) {
  const ModelSpec m = preset("qwen3-30b-a3b");
  const HardwareModel hw = HardwareModel::h100();
  for (int ep : {2, 1}) {
    TimeQuery sp = time_query(m, MeshShape{1, 2, 1, 2}, ep);
    TimeQuery no_sp = sp;
    no_sp.training.sequence_parallel = false;
    const AxisComm with = estimate_time(sp).axis(Axis::tp), without = estimate_time(no_sp).axis(Axis::tp);
    const double elements = 48.0 * (266'496.0 + (ep == 1 ? 3.0 * 128 * 768 * 2048 : 0.0)) + 2048.0;
    // 4 B x elements / dp_shard 2 per rank; a ring all-reduce over 2 sends 2 x 1/2 of it.
    const double bytes = 4.0 * elements / 2.0;
    EXPECT_DOUBLE_EQ(with.bytes - without.bytes, bytes) << "ep " << ep;
    EXPECT_EQ(with.collectives - without.collectives, 49) << "ep " << ep;
    EXPECT_NEAR(with.seconds - without.seconds, 49 * 2 * hw.latency_s + bytes / hw.intra_node_bytes_per_s, 1e-12)
        << "ep " << ep;
  }
  // tp 8 over 4 kv heads: each rank's k/v head is a copy shared with another rank, partial with
  // or without sequence parallelism: a [4, len] buffer of k_proj and v_proj (128 x 2048 each).
  TimeQuery copied = time_query(m, MeshShape{1, 1, 1, 8}, 8);
  copied.training.sequence_parallel = false;
  const AxisComm kv = estimate_time(copied).axis(Axis::tp);
  TimeQuery plain = copied;
  plain.model.num_key_value_heads = 8;  // one kv head per rank: nothing copied
  const double kv_bytes = 4.0 * 48 * 2 * 4 * 128 * 2048;
  EXPECT_NEAR(kv.bytes - estimate_time(plain).axis(Axis::tp).bytes, 2.0 * 7 / 8 * kv_bytes, 1e-3);
  // A dense model's norms are left out (a few h floats per layer).
  TimeQuery dense = time_query(preset("qwen3-8b"), MeshShape{1, 2, 1, 2}, 1);
  TimeQuery dense_no_sp = dense;
  dense_no_sp.training.sequence_parallel = false;
  EXPECT_DOUBLE_EQ(estimate_time(dense).axis(Axis::tp).bytes, estimate_time(dense_no_sp).axis(Axis::tp).bytes);
}
