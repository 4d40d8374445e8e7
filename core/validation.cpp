#include "core/validation.h"

#include <cstdio>

#include "core/run_config.h"

namespace meshwork {

std::string_view to_string(Severity s) { return s == Severity::error ? "error" : "warning"; }

Placement Placement::of(const RunConfig& config) {
  Placement p;
  p.world_size = config.world_size();
  p.ranks_per_node = config.nodes.empty() ? static_cast<int>(p.world_size) : config.nodes.front().slots;
  return p;
}

std::string Diagnostic::text() const { return field + ": " + value + ": " + message; }

bool ShapeReport::ok() const {
  for (const auto& d : diagnostics)
    if (d.level == Severity::error) return false;
  return true;
}

std::vector<Diagnostic> ShapeReport::errors() const {
  std::vector<Diagnostic> out;
  for (const auto& d : diagnostics)
    if (d.level == Severity::error) out.push_back(d);
  return out;
}

std::vector<Diagnostic> ShapeReport::warnings() const {
  std::vector<Diagnostic> out;
  for (const auto& d : diagnostics)
    if (d.level == Severity::warning) out.push_back(d);
  return out;
}

Error ShapeReport::first_error() const {
  for (const auto& d : diagnostics)
    if (d.level == Severity::error) return d.to_error();
  return Error{"mesh", shape.compact(), "no error"};
}

namespace {

std::string num(int64_t v) { return std::to_string(v); }

std::string gbps(double bytes_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f GB/s", bytes_per_s / 1e9);
  return buf;
}

struct Checker {
  ShapeReport& report;
  void error(std::string field, std::string value, std::string message) {
    report.diagnostics.push_back(
        {Severity::error, std::move(field), std::move(value), std::move(message)});
  }
  void warning(std::string field, std::string value, std::string message) {
    report.diagnostics.push_back(
        {Severity::warning, std::move(field), std::move(value), std::move(message)});
  }
};

// Sizes >= 1 (one -1 allowed) and product == world. Returns false when the shape is unusable
// for the remaining rules.
bool check_mesh(const ShapeQuery& q, Checker& c) {
  if (q.placement.world_size < 1) {
    c.error("world_size", num(q.placement.world_size), "must be at least 1");
    return false;
  }
  auto resolved = resolve_shape(q.shape, q.placement.world_size);
  if (!resolved.ok()) {
    const Error& e = resolved.error();
    c.error(e.field, e.value, e.allowed);
    return false;
  }
  c.report.shape = *resolved;
  const MeshShape& s = c.report.shape;
  // Accelerate's ParallelismConfig._validate_accelerator: "Tensor/Context parallelism cannot be
  // used with pure data parallelism (dp_replicate_size > 1, dp_shard_size == 1)": DDP wraps the
  // whole model and cannot hold DTensor-sharded (tp) or cp-split parameters; FSDP can.
  if (s[Axis::dp_replicate] > 1 && s[Axis::dp_shard] == 1 && (s[Axis::tp] > 1 || s[Axis::cp] > 1)) {
    if (q.trainer.tp_cp_with_pure_replication) {
      c.report.accelerate_refusal =
          "Accelerate refuses tp/cp with pure replication (dp_replicate > 1, dp_shard = 1): its DDP "
          "wrapper cannot hold tp/cp-sharded parameters; meshtrain runs it, for Accelerate shard "
          "with dp_shard instead";
    } else {
      c.error("dp_shard", "1",
              "must be > 1 when dp_replicate > 1 and tp or cp > 1 (tp/cp cannot be combined with "
              "pure replication, as in Accelerate; shard with dp_shard instead of dp_replicate)");
    }
  }
  return true;
}

void check_model(const ShapeQuery& q, const MeshShape& s, Checker& c) {
  const ModelSpec& m = *q.model;
  const int64_t tp = s[Axis::tp];
  if (m.num_attention_heads % tp != 0)
    c.error("tp", num(tp),
            "must divide num_attention_heads (" + num(m.num_attention_heads) +
                "): each tp rank computes whole heads");
  const int64_t kv = m.num_key_value_heads;
  if (tp <= kv) {
    if (kv % tp != 0)
      c.error("tp", num(tp),
              "must divide num_key_value_heads (" + num(kv) + "), or be a multiple of it");
  } else if (tp % kv == 0) {
    // Megatron/torchtitan-style GQA with tp > kv_heads: each kv head is copied onto tp/kv ranks.
    c.report.kv_replicated = true;
    c.warning("tp", num(tp),
              "exceeds num_key_value_heads (" + num(kv) + "): each kv head is replicated on " +
                  num(tp / kv) + " tp ranks (k/v projections and their gradients duplicated)");
  } else {
    c.error("tp", num(tp),
            "must divide num_key_value_heads (" + num(kv) + ") or be a multiple of it");
  }
  if (m.intermediate_size % tp != 0)
    c.error("tp", num(tp),
            "must divide intermediate_size (" + num(m.intermediate_size) +
                "): the MLP is split column-wise over tp");
  if (q.trainer.vocab_parallel && m.vocab_size % tp != 0)
    c.error("tp", num(tp),
            "must divide vocab_size (" + num(m.vocab_size) +
                "): embedding and output head are split over the vocabulary");
  // Sliding-window attention (Mistral, Qwen2): a query sees only the last sliding_window tokens
  // (itself included: transformers masks kv < q - window + 1). With seq_len <= window that is the
  // whole causal prefix, which is what meshtrain computes; a longer sequence would be trained
  // under a different mask than the model's, so it is refused by name, never ignored.
  if (m.sliding_window > 0 && q.training.seq_len > m.sliding_window) {
    const std::string layers = m.sliding_window_from_layer > 0
                                   ? "layers " + num(m.sliding_window_from_layer) + ".." + num(m.num_hidden_layers - 1)
                                   : "every layer";
    c.error("model.sliding_window", num(m.sliding_window),
            "at least seq_len (" + num(q.training.seq_len) + "): meshtrain computes full causal attention, and " +
                m.sliding_window_field + " puts a " + num(m.sliding_window) + "-token window on " + layers +
                " (train with seq_len <= " + num(m.sliding_window) + ", or a config without the window)");
  }
  if (q.training.seq_len > 0 && m.max_position_embeddings > 0 && q.training.seq_len > m.max_position_embeddings)
    c.warning("seq_len", num(q.training.seq_len),
              "exceeds the model's max_position_embeddings (" + num(m.max_position_embeddings) +
                  "): positions beyond it were never trained");
}

void check_sequence(const ShapeQuery& q, const MeshShape& s, Checker& c) {
  if (q.training.seq_len <= 0) return;
  const int64_t d = seq_len_divisor(s);
  if (q.training.seq_len % d == 0) return;
  // Rank i of a cp ring gets chunks i and 2cp-1-i of each sequence (equal causal work per rank).
  if (s[Axis::cp] > 1)
    c.error("seq_len", num(q.training.seq_len),
            "must be a multiple of 2*cp*tp = " + num(d) +
                " (load-balanced causal context parallel with sequence parallel)");
  else
    c.error("seq_len", num(q.training.seq_len), "must be a multiple of tp = " + num(d) + " (sequence parallel)");
}

void check_batch(const ShapeQuery& q, const MeshShape& s, Checker& c) {
  if (q.training.micro_batch < 0 || (q.training.micro_batch == 0 && q.training.global_batch > 0)) {
    c.error("micro_batch", num(q.training.micro_batch), "must be at least 1");
    return;
  }
  if (q.training.global_batch < 0) {
    c.error("global_batch", num(q.training.global_batch), "must be at least 1");
    return;
  }
  if (q.training.global_batch == 0 || q.training.micro_batch == 0) return;
  // Each dp rank (dp_replicate x dp_shard of them; cp and tp ranks share their samples) runs
  // micro_batch sequences per forward/backward and accumulates until global_batch is reached.
  const int64_t per_step = int64_t{q.training.micro_batch} * s[Axis::dp_replicate] * s[Axis::dp_shard];
  if (q.training.global_batch % per_step != 0) {
    c.error("global_batch", num(q.training.global_batch),
            "must be a multiple of micro_batch*dp_replicate*dp_shard = " + num(per_step));
  } else {
    c.report.grad_accum_steps = q.training.global_batch / per_step;
  }
}

void check_placement(const ShapeQuery& q, const MeshShape& s, Checker& c) {
  if (s[Axis::tp] <= 1) return;
  const int gpn = q.placement.ranks_per_node > 0 ? q.placement.ranks_per_node : static_cast<int>(q.placement.world_size);
  auto mesh = DeviceMesh::create(s, gpn);
  if (!mesh.ok()) return;
  const bool crosses = mesh->any_group_crosses_nodes(GroupKind::tp);
  if (crosses) {
    std::string msg = "the tp group spans more than one node (" + num(gpn) +
                      " ranks per node): tp all-gathers and reduce-scatters every layer";
    if (q.placement.links.inter_node_bytes_per_s > 0)
      msg += " over the " + gbps(q.placement.links.inter_node_bytes_per_s) + " inter-node link";
    c.warning("tp", num(s[Axis::tp]), msg + "; keep tp within a node");
  } else if (q.placement.links.intra_node_bytes_per_s > 0 &&
             q.placement.links.intra_node_bytes_per_s < q.slow_tp_link_bytes_per_s) {
    c.warning("tp", num(s[Axis::tp]),
              "runs over a slow intra-node link (" + gbps(q.placement.links.intra_node_bytes_per_s) +
                  ", less than " + gbps(q.slow_tp_link_bytes_per_s) +
                  "): tp communicates every layer; prefer dp_shard");
  }
}

void check_pipeline(const ShapeQuery& q, const MeshShape& s, Checker& c) {
  const int64_t pp = s[Axis::pp];
  const int64_t v = q.training.pp_virtual_stages;
  const bool interleaved = q.training.pp_schedule == PipelineSchedule::interleaved_1f1b;
  if (v < 1) {
    c.error("pp_virtual_stages", num(v), "must be a whole number >= 1");
    return;
  }
  if (interleaved && v < 2) {
    c.error("pp_virtual_stages", num(v),
            "must be >= 2 with interleaved-1f1b (chunks of layers per rank; 1 is plain 1f1b)");
    return;
  }
  if (!interleaved && v != 1) {
    c.error("pp_virtual_stages", num(v),
            "must be 1 with " + std::string(to_string(q.training.pp_schedule)) +
                " (chunks of layers per rank are for interleaved-1f1b)");
    return;
  }
  if (pp <= 1) return;
  if (q.model) {
    const ModelSpec& m = *q.model;
    if (m.num_hidden_layers < pp * v)
      c.error("pp", num(pp),
              "times pp_virtual_stages (" + num(v) + ") must be at most num_hidden_layers (" +
                  num(m.num_hidden_layers) + "): every stage chunk holds at least one decoder layer");
    if (m.tie_word_embeddings)
      c.error("pp", num(pp),
              "must be 1 for a model with tied embeddings (tie_word_embeddings): the embedding sits on the "
              "first stage and the output head on the last");
  }
  if (c.report.grad_accum_steps <= 0) return;  // batches not given (or refused above)
  const int64_t m = c.report.grad_accum_steps;
  const std::string what = "micro-batches per step (global_batch / (micro_batch*dp_replicate*dp_shard) = " +
                           num(m) + ")";
  switch (q.training.pp_schedule) {
    case PipelineSchedule::one_f_one_b:
      if (m < pp)
        c.error("global_batch", num(q.training.global_batch),
                "gives " + what + ", fewer than pp = " + num(pp) +
                    ": 1f1b needs at least one micro-batch per stage (raise global_batch or use gpipe)");
      break;
    case PipelineSchedule::interleaved_1f1b:
      if (m % pp != 0)
        c.error("global_batch", num(q.training.global_batch),
                "gives " + what + ", not a multiple of pp = " + num(pp) +
                    ": interleaved-1f1b runs its micro-batches pp at a time");
      break;
    case PipelineSchedule::gpipe:
      if (m < pp)
        c.warning("global_batch", num(q.training.global_batch),
                  "gives " + what + ", fewer than pp = " + num(pp) + ": some stages sit idle all step");
      break;
  }
}

// Expert parallel borrows its ranks from dp_shard * cp * tp (core/mesh.h) and splits the experts
// evenly, so ep divides both; a dense model has no experts to split.
void check_expert_parallel(const ShapeQuery& q, const MeshShape& s, Checker& c) {
  const std::string ep_name(kEpName);
  if (s.ep < 1) {
    c.error(ep_name, num(s.ep), "must be a whole number >= 1");
    return;
  }
  if (s.ep == 1) return;
  if (s.expert_block_size() % s.ep != 0)
    c.error(ep_name, num(s.ep),
            "must divide dp_shard * cp * tp (" + num(s[Axis::dp_shard]) + " * " + num(s[Axis::cp]) + " * " +
                num(s[Axis::tp]) + " = " + num(s.expert_block_size()) +
                "): expert parallel borrows its ranks from them and FSDP-shards each expert set over the rest");
  if (!q.model) return;
  const ModelSpec& m = *q.model;
  if (!m.is_moe()) {
    c.error(ep_name, num(s.ep),
            "must be 1 for " + (m.name.empty() ? std::string("this model") : m.name) + " (" + m.architecture +
                "): it is a dense model with no experts to split; expert parallel needs a mixture-of-experts "
                "model (qwen3_moe, mixtral, olmoe)");
    return;
  }
  if (m.moe.num_experts % s.ep != 0)
    c.error(ep_name, num(s.ep),
            "must divide num_experts (" + num(m.moe.num_experts) + "): each ep rank holds the same number of experts");
}

}  // namespace

int64_t seq_len_divisor(const MeshShape& s) {
  return s[Axis::cp] > 1 ? int64_t{2} * s[Axis::cp] * s[Axis::tp] : s[Axis::tp];
}

ShapeReport validate_shape(const ShapeQuery& q) {
  ShapeReport report;
  report.shape = q.shape;
  Checker c{report};
  if (q.placement.ranks_per_node < 0)
    c.error("gpus_per_node", num(q.placement.ranks_per_node), "must be at least 1");
  if (q.training.seq_len < 0) c.error("seq_len", num(q.training.seq_len), "must be at least 1");
  if (!check_mesh(q, c)) return report;
  const MeshShape s = report.shape;
  if (q.model) check_model(q, s, c);
  check_sequence(q, s, c);
  check_batch(q, s, c);
  check_placement(q, s, c);
  check_pipeline(q, s, c);
  check_expert_parallel(q, s, c);
  return report;
}

}  // namespace meshwork
