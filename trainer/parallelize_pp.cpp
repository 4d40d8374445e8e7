#include "trainer/parallelize_pp.h"

#include <map>

#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

namespace meshwork::trainer {

using at::Tensor;

std::vector<PipelineChunk> chunks_of_rank(const std::vector<PipelineChunk>& all, int rank) {
  std::vector<PipelineChunk> own;
  for (const PipelineChunk& c : all)
    if (c.rank == rank) own.push_back(c);
  return own;
}

PipelineStage::PipelineStage(ParallelModel& model, Communicator& comm, PipelineOptions options)
    : model_(model), comm_(comm), group_(comm.group(GroupKind::pp)), options_(std::move(options)) {
  pp_ = group_.size();
  rank_ = group_.rank;
  own_ = chunks_of_rank(options_.chunks, rank_);
  const ModelSpec& spec = model_.model().spec();
  if (spec.is_moe()) {
    experts_ = spec.moe.num_experts;
    aux_backward_ = spec.moe.output_router_logits && spec.moe.router_aux_loss_coef > 0;
  }
  TORCH_CHECK(static_cast<int64_t>(options_.chunks.size()) == int64_t{pp_} * options_.virtual_stages,
              "pipeline: ", options_.chunks.size(), " chunks for pp ", pp_, " x ", options_.virtual_stages,
              " virtual stages");
}

Tensor PipelineStage::receive(int from_chunk, int64_t micro_batch, int chunk, bool backward) {
  Tensor t = at::empty({options_.micro_batch, options_.residual_seq_len, options_.hidden},
                       at::TensorOptions().dtype(options_.dtype).device(options_.device));
  comm_.recv(t, stage_of(from_chunk), group_, tag(micro_batch, chunk, backward, Kind::activation));
  return t;
}

Tensor PipelineStage::receive_routing(int from_chunk, int64_t micro_batch, int chunk, bool backward) {
  // Forward: counts, probability sums, rows; backward: counts, the aux gradient's scale.
  Tensor t = at::empty({backward ? experts_ + 1 : 2 * experts_ + 1},
                       at::TensorOptions().dtype(at::kDouble).device(options_.device));
  comm_.recv(t, stage_of(from_chunk), group_, tag(micro_batch, chunk, backward, Kind::routing));
  return t;
}

void PipelineStage::send(const Tensor& t, int to_chunk, int64_t micro_batch, bool backward, Kind kind) {
  InFlightSend s;
  s.tensor = t.contiguous();
  s.pending = comm_.send_start(s.tensor, stage_of(to_chunk), group_, tag(micro_batch, to_chunk, backward, kind));
  sends_.push_back(std::move(s));
  // Drop the sends that are done, so a stage does not keep every activation it sent until the
  // end of the step (1F1B's memory bound counts only the micro-batches in flight).
  std::erase_if(sends_, [this](InFlightSend& f) {
    if (!f.pending.work->isCompleted()) return false;
    comm_.wait(f.pending);
    return true;
  });
}

void PipelineStage::wait_sends() {
  for (InFlightSend& s : sends_) comm_.wait(s.pending);
  sends_.clear();
}

std::pair<Tensor, Tensor> PipelineStage::forward_chunk(int k, int64_t micro_batch, const Tensor& tokens,
                                                       const Tensor& targets, const ForwardOptions& options,
                                                       bool track_input) {
  const PipelineChunk& c = options_.chunks[k];
  if (c.embedding) return {tokens, model_.chunk_forward(c, tokens, targets, options)};
  Tensor in = receive(k - 1, micro_batch, k, false);
  if (track_input) in.requires_grad_(true);
  if (experts_ == 0) return {in, model_.chunk_forward(c, in, targets, options)};
  ForwardOptions routed = options;
  routed.routing_in = receive_routing(k - 1, micro_batch, k, false);
  return {in, model_.chunk_forward(c, in, targets, routed)};
}

void PipelineStage::send_output(const Tensor& out, int k, int64_t micro_batch) {
  send(out, k + 1, micro_batch, false);
  if (experts_ > 0) send(Model::routing_sums(model_.model().routing()), k + 1, micro_batch, false, Kind::routing);
}

Tensor PipelineStage::train_step(const Batch& batch, double global_tokens, const ForwardOptions& options) {
  const std::vector<PipelineAction> actions =
      pipeline_schedule(options_.schedule, pp_, options_.virtual_stages, options_.micro_batches, rank_);
  std::map<int, size_t> last_backward;  // chunk -> index of its last backward in `actions`
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].kind == PipelineAction::backward) last_backward[actions[i].chunk] = i;
  // Each micro-batch's tokens are read once, whichever of this rank's chunks needs them first.
  std::map<int64_t, std::pair<Tensor, Tensor>> batches;
  auto batch_of = [&](int64_t m) -> const std::pair<Tensor, Tensor>& {
    auto it = batches.find(m);
    if (it == batches.end()) it = batches.emplace(m, batch(m)).first;
    return it->second;
  };
  // A forward's input (the received activation, a leaf that collects its gradient) and where its
  // output's gradient enters the graph, kept until its backward. Not the output itself: once
  // sent, its data is not needed (the graph's own saved tensors are), and keeping it would hold
  // one more activation per micro-batch in flight (Megatron frees it the same way).
  struct Saved {
    Tensor input;
    torch::autograd::Edge output_edge;
    Tensor loss;            // the chunk with the head: the loss sum
    MoeForwardState routing;  // a mixture of experts: the forward call's record on this chunk
  };
  std::map<std::pair<int64_t, int>, Saved> saved;
  Tensor local = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(options_.device));
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    const PipelineChunk& c = options_.chunks[a.chunk];
    if (a.kind == PipelineAction::forward) {
      const auto& [inputs, targets] = batch_of(a.micro_batch);
      auto [in, out] = forward_chunk(a.chunk, a.micro_batch, inputs, targets, options, /*track_input=*/true);
      Saved& s = saved[{a.micro_batch, a.chunk}];
      s.input = in;
      if (experts_ > 0) s.routing = model_.model().routing();
      if (c.head) {
        local += out.detach().to(at::kDouble);
        s.loss = out;
      } else {
        s.output_edge = torch::autograd::impl::gradient_edge(out);
        send_output(out.detach(), a.chunk, a.micro_batch);
      }
      continue;
    }
    if (last_backward[a.chunk] == i) model_.arm_gradient_sync(Model::chunk_units(c));
    auto node = saved.extract({a.micro_batch, a.chunk});
    TORCH_CHECK(!node.empty(), "pipeline: backward of micro-batch ", a.micro_batch, " chunk ", a.chunk,
                " before its forward");
    Saved& s = node.mapped();
    if (c.head) {
      // Mean over every token of the global batch, as the pp = 1 step (train.cpp).
      (s.loss / global_tokens).backward();
    } else {
      // What torch::autograd::backward({output}, {grad}) runs, from the kept edge.
      Tensor grad = receive(a.chunk + 1, a.micro_batch, a.chunk, true);
      // The call's totals, before its sparse layers' backward nodes read them.
      if (aux_backward_)
        Model::set_routing_totals(s.routing, receive_routing(a.chunk + 1, a.micro_batch, a.chunk, true));
      torch::autograd::Engine::get_default_engine().execute({s.output_edge}, {grad}, /*keep_graph=*/false,
                                                            /*create_graph=*/false, /*accumulate_grad=*/true);
    }
    if (!c.embedding) {
      send(s.input.grad(), a.chunk - 1, a.micro_batch, true);
      if (aux_backward_)
        send(Model::routing_totals(s.routing), a.chunk - 1, a.micro_batch, true, Kind::routing);
    }
  }
  wait_sends();
  return local;
}

Tensor PipelineStage::eval_step(const Batch& batch, const ForwardOptions& options) {
  at::NoGradGuard no_grad;
  Tensor local = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(options_.device));
  for (int64_t m = 0; m < options_.micro_batches; ++m) {
    const auto [inputs, targets] = batch(m);
    for (const PipelineChunk& c : own_) {
      const int k = static_cast<int>(&c - own_.data()) * pp_ + rank_;  // global chunk index
      Tensor out = forward_chunk(k, m, inputs, targets, options, /*track_input=*/false).second;
      if (c.head) local += out.to(at::kDouble);
      else send_output(out, k, m);
    }
    model_.end_forward_only();
  }
  wait_sends();
  return local;
}

}  // namespace meshwork::trainer
