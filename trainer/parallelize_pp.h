// Pipeline parallelism (pp > 1), torchtitan's pipeline_llama + its schedules, for one stage rank.
//
// The cut: core's pipeline_cut gives pp * V chunks of consecutive decoder layers (the first with
// the embedding, the last with the final norm and head, balanced by each layer's cost); this
// rank runs chunks rank, rank + pp, ... (parallelize() keeps only their units, so tp, cp and
// FSDP work inside the stage on what it holds).
//
// A step: core's pipeline_schedule lists this rank's forwards and backwards of (micro-batch,
// chunk) in order. A forward of a chunk with the embedding reads the tokens; any other receives
// the previous chunk's output from the stage rank before it. Its output goes to the next stage
// rank without waiting (an asynchronous send), or, on the chunk with the head, is the loss sum.
// A backward receives the gradient of its output from the next stage rank (the head's chunk
// starts from loss / global tokens instead), runs autograd through the chunk and sends the
// gradient of its input back. Sends are posted and waited for at the end of the step; receives
// block, and every send, receive and wait is charged to the pp axis (comm_s.pp: the time a stage
// waits for its neighbours, the bubble included).
//
// Every message is tagged by (micro-batch, receiving chunk, direction, kind), so the pair of
// ranks never confuses two of them whatever order the schedule posts them in.
//
// A mixture of experts' aux loss counts the routing of the whole forward call (trainer/moe.h),
// whose sparse layers sit on several stages. So the routing travels with the schedule: each
// forward also sends what the call has routed so far on this rank's share of its tokens
// ([2E + 1] fp64: counts, probability sums, rows; Model::routing_sums) and the next chunk starts
// its record from it, so the chunk with the head holds the call's totals and the aux gradient's
// scale. When the aux loss is trained on, each backward also receives those totals ([E + 1]:
// counts, scale) with its output's gradient, writes them into the micro-batch's record before
// running autograd (its sparse layers' backward nodes read them) and sends them on with its
// input's gradient. Without the aux loss in the objective nothing travels backward.
//
// Gradient sync: each chunk's units are armed (DataParallel) just before that chunk's last
// backward of the step, so dp_replicate's all-reduce and FSDP's once-per-step reduce-scatter see
// the sum over every micro-batch.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "core/pipeline.h"
#include "core/pipeline_schedule.h"
#include "trainer/comm.h"
#include "trainer/parallelize.h"

namespace meshwork::trainer {

struct PipelineOptions {
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;
  int64_t micro_batches = 1;          // per optimizer step (gradient accumulation steps)
  std::vector<PipelineChunk> chunks;  // every chunk of the cut (pipeline_cut), K = pp * V
  // The residual stream's shape between chunks on this rank: [micro_batch, seq, hidden].
  int64_t micro_batch = 1, residual_seq_len = 1, hidden = 1;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
};

// The chunks of `all` that stage rank `rank` of `pp` runs, in order.
std::vector<PipelineChunk> chunks_of_rank(const std::vector<PipelineChunk>& all, int rank);

class PipelineStage {
 public:
  // (inputs, targets) of micro-batch m, this rank's shards ([B, T_local] each).
  using Batch = std::function<std::pair<at::Tensor, at::Tensor>(int64_t m)>;

  PipelineStage(ParallelModel& model, Communicator& comm, PipelineOptions options);

  // One optimizer step's forwards and backwards (the module comment). Returns this rank's sum of
  // the loss over its tokens (fp64, [1]); zero off the stage holding the head.
  at::Tensor train_step(const Batch& batch, double global_tokens, const ForwardOptions& options);
  // Forwards only, micro-batch after micro-batch (evaluation): the loss sum as train_step's.
  at::Tensor eval_step(const Batch& batch, const ForwardOptions& options);

  int rank() const { return rank_; }
  const std::vector<PipelineChunk>& own_chunks() const { return own_; }

 private:
  // Group rank of the stage that runs chunk k.
  int stage_of(int chunk) const { return chunk % pp_; }
  // What a message carries: the residual stream (or its gradient), or a mixture of experts'
  // routing sums (forward) and totals (backward).
  enum class Kind { activation = 0, routing = 1 };
  int tag(int64_t micro_batch, int chunk, bool backward, Kind kind) const {
    const int64_t k = (micro_batch * static_cast<int64_t>(options_.chunks.size()) + chunk) * 2 + backward;
    return static_cast<int>(k * 2 + static_cast<int64_t>(kind));
  }
  at::Tensor receive(int from_chunk, int64_t micro_batch, int chunk, bool backward);
  at::Tensor receive_routing(int from_chunk, int64_t micro_batch, int chunk, bool backward);
  void send(const at::Tensor& t, int to_chunk, int64_t micro_batch, bool backward, Kind kind = Kind::activation);
  // One chunk's forward (training or evaluation): receives its input (and routing) unless it
  // holds the embedding, and runs it. Returns (input, output); the output is not sent.
  std::pair<at::Tensor, at::Tensor> forward_chunk(int k, int64_t micro_batch, const at::Tensor& tokens,
                                                  const at::Tensor& targets, const ForwardOptions& options,
                                                  bool track_input);
  // Sends chunk k's output (and its routing sums) on to chunk k + 1.
  void send_output(const at::Tensor& out, int k, int64_t micro_batch);
  void wait_sends();

  ParallelModel& model_;
  Communicator& comm_;
  const Group& group_;
  PipelineOptions options_;
  int pp_ = 1, rank_ = 0;
  std::vector<PipelineChunk> own_;
  int64_t experts_ = 0;         // a mixture of experts' E (routing travels); 0: a dense model
  bool aux_backward_ = false;   // the aux loss is trained on: its totals travel backward
  struct InFlightSend {
    at::Tensor tensor;
    Communicator::Pending pending;
  };
  std::vector<InFlightSend> sends_;
};

}  // namespace meshwork::trainer
