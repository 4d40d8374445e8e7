// Every shape rule in one place. The planner, the workbench, the launcher and meshtrain reach
// them through ParallelLayout::check() (core/parallel_layout.h), which makes the one ShapeQuery,
// and show their words. Each finding is a Diagnostic naming the field, the value and what is wrong
// or allowed, so the CLI can print `meshwork: <field>: <value>: <message>` and the GUI can put
// the same words next to the control for <field>.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mesh.h"
#include "core/model_spec.h"
#include "core/run_config.h"

namespace meshwork {

enum class Severity { error, warning };
std::string_view to_string(Severity s);

struct Diagnostic {
  Severity level = Severity::error;
  std::string field;    // "tp", "seq_len", "global_batch", "mesh", ...
  std::string value;    // the offending value as written
  std::string message;  // what is allowed, or (warnings) what it means
  // "field: value: message"
  std::string text() const;
  Error to_error() const { return Error{field, value, message}; }
  bool operator==(const Diagnostic&) const = default;
};

// Link speeds a shape will run over, for the slow-link warning. 0 = unknown (no warning).
struct LinkSpeeds {
  double intra_node_bytes_per_s = 0;  // between two ranks of one node (NVLink, PCIe, shared mem)
  double inter_node_bytes_per_s = 0;  // between nodes (InfiniBand, Ethernet)
};

// Where the ranks are: world_size ranks, ranks_per_node of them on each node (torchrun's
// placement: rank r on node r / ranks_per_node).
struct Placement {
  int64_t world_size = 0;
  int ranks_per_node = 0;  // 0: every rank on one node
  LinkSpeeds links;        // 0 = unknown: no slow-link warning
  // The config's own placement: the sum of its nodes' slots with the first node's slots per
  // node, or (no nodes) the mesh product on one node.
  static Placement of(const RunConfig& config);
};

// What the trainer that runs the layout can do. The default is meshtrain's.
struct TrainerSupport {
  // meshtrain all-reduces each rank's local (tp piece or cp-sharded) flat gradients over
  // dp_replicate itself, so tp/cp combine with pure replication. Accelerate refuses it because
  // torch's DDP wrapper cannot hold DTensor parameters: false accepts only what Accelerate
  // accepts; true accepts the shape and marks it with Accelerate's reason
  // (ShapeReport::accelerate_refusal).
  bool tp_cp_with_pure_replication = true;
  bool vocab_parallel = true;  // embedding and head split over the vocabulary across tp
};

// Everything the rules look at: the shape, where its ranks sit, the model, the run's training
// settings and what the trainer supports. ParallelLayout::check() makes it from a run config.
struct ShapeQuery {
  MeshShape shape;  // one axis may be -1 (filled from placement.world_size)
  Placement placement;
  std::optional<ModelSpec> model;  // unset: the model rules are skipped
  // The rules read seq_len, global_batch (sequences per optimizer step over the whole mesh),
  // micro_batch (sequences per forward/backward on one rank), pp_schedule and
  // pp_virtual_stages (with pp > 1: interleaved-1f1b needs >= 2 chunks per rank). A sequence or
  // batch <= 0 is "not given" and skips its rules; a bare query gives none.
  TrainingConfig training{.seq_len = 0, .global_batch = 0, .micro_batch = 0};
  TrainerSupport trainer;
  // tp exchanges activations every layer; below this it is called a slow link (default: less
  // than a PCIe Gen5 x16's ~64 GB/s, i.e. anything without NVLink).
  double slow_tp_link_bytes_per_s = 64e9;
};

struct ShapeReport {
  MeshShape shape;  // resolved (-1 filled) when resolution succeeded, else as given
  std::vector<Diagnostic> diagnostics;

  bool ok() const;  // no error-level diagnostic
  std::vector<Diagnostic> errors() const;
  std::vector<Diagnostic> warnings() const;
  // The first error as an Error (for Result-returning callers); precondition: !ok().
  Error first_error() const;
  // True when the kv heads are replicated over tp (tp > kv_heads, tp % kv_heads == 0).
  bool kv_replicated = false;
  // Gradient-accumulation steps: global_batch / (micro_batch * dp_replicate * dp_shard), when
  // both batches were given and divide.
  int64_t grad_accum_steps = 0;
  // Non-empty when Accelerate's ParallelismConfig would refuse the shape (its reason), for a
  // shape the trainer accepts all the same.
  std::string accelerate_refusal;
};

// Applies every rule; never throws. Rules (each documented in docs/estimator.md):
//  mesh:  sizes >= 1 (or one -1), product == world size;
//         tp/cp > 1 with pure replication (dp_replicate > 1, dp_shard == 1): accepted and marked
//         with Accelerate's refusal when the trainer replicates the shards itself, else refused;
//  model: num_attention_heads % tp; num_key_value_heads % tp, or tp % kv_heads when tp > kv_heads
//         (kv heads replicated: a warning); intermediate_size % tp; vocab_size % tp when
//         vocab-parallel; seq_len <= max_position_embeddings (warning);
//  seq:   cp > 1: seq_len % (2*cp*tp) (load-balanced causal CP splits each sequence into 2*cp
//         chunks, and sequence parallelism splits each chunk over tp); tp > 1: seq_len % tp;
//  batch: global_batch % (micro_batch * dp_replicate * dp_shard);
//  place: a tp group that crosses nodes, or tp over a link slower than slow_tp_link (warnings);
//  pp:    pp_virtual_stages 1, or >= 2 with interleaved-1f1b only; num_hidden_layers >= pp * V
//         (every chunk holds a decoder layer); untied embeddings (the embedding sits on the first
//         stage, the head on the last); with the batches given, the micro-batches per step
//         M = global_batch / (micro_batch * dp_replicate * dp_shard): 1f1b needs M >= pp,
//         interleaved-1f1b M % pp == 0 (its rounds go pp micro-batches at a time), gpipe runs
//         any M (a warning when M < pp: stages sit idle);
//  ep:    ep >= 1 divides dp_shard * cp * tp (the ranks it borrows); ep > 1 only for a
//         mixture-of-experts model (a dense one is refused in words), and ep divides num_experts.
ShapeReport validate_shape(const ShapeQuery& query);

// What seq_len must be a multiple of on a resolved shape: 2*cp*tp with cp > 1 (load-balanced
// causal CP cuts each sequence into 2*cp chunks, sequence parallelism splits a chunk over tp),
// tp otherwise (sequence parallelism shards the norm activations along the sequence).
int64_t seq_len_divisor(const MeshShape& shape);

}  // namespace meshwork
