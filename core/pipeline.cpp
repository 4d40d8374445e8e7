#include "core/pipeline.h"

#include <algorithm>
#include <limits>

namespace meshwork {

PipelineCosts pipeline_costs(const ModelSpec& m, int64_t seq_len) {
  // Multiply-adds per token (forward; backward is twice the forward for both, so the ratio holds):
  // every matmul weight of the layer once, plus causal attention's q.k and p.v over s/2 keys on
  // average: 2 * (s / 2) * q_dim. A mixture of experts' layer: the parameters a token passes
  // through (its active share, the layers taken as alike).
  PipelineCosts c;
  const double s = static_cast<double>(std::max<int64_t>(seq_len, 1));
  const double layer_params =
      m.is_moe() && m.num_hidden_layers > 0
          ? static_cast<double>(m.active_parameter_count() - m.embedding_parameter_count() - m.lm_head_parameter_count() -
                                m.hidden_size) /
                static_cast<double>(m.num_hidden_layers)
          : static_cast<double>(m.layer_parameter_count());
  c.layer = layer_params + s * static_cast<double>(m.q_dim());
  c.head = static_cast<double>(m.hidden_size) * static_cast<double>(m.vocab_size);
  return c;
}

std::vector<PipelineChunk> pipeline_cut(const ModelSpec& model, int64_t seq_len, int pp, int virtual_stages) {
  const int k = std::max(1, pp) * std::max(1, virtual_stages);
  const int layers = static_cast<int>(model.num_hidden_layers);
  const PipelineCosts cost = pipeline_costs(model, seq_len);
  std::vector<int> counts(static_cast<size_t>(k), 0);
  if (k == 1 || layers < k) {
    // One chunk, or too few layers (validate_shape refuses it): everything in order, one layer
    // per chunk while they last.
    for (int i = 0; i < k; ++i) counts[static_cast<size_t>(i)] = k == 1 ? layers : (i < layers ? 1 : 0);
  } else {
    // Identical layers: only the last chunk differs (it carries the head). For each layer count
    // of the last chunk, spread the rest as evenly as the other k - 1 chunks allow and keep the
    // cut whose most expensive chunk is cheapest (then the one with the most even counts).
    int best_last = 1;
    double best_max = std::numeric_limits<double>::infinity();
    int best_spread = std::numeric_limits<int>::max();
    for (int last = 1; last <= layers - (k - 1); ++last) {
      const int rest = layers - last;
      const int hi = (rest + (k - 2)) / (k - 1), lo = rest / (k - 1);
      const double worst = std::max(hi * cost.layer, last * cost.layer + cost.head);
      const int spread = std::max({hi, last}) - std::min({lo, last});
      if (worst < best_max * (1 - 1e-12) || (worst <= best_max * (1 + 1e-12) && spread < best_spread)) {
        best_max = worst;
        best_last = last;
        best_spread = spread;
      }
    }
    const int rest = layers - best_last;
    const int lo = rest / (k - 1), extra = rest % (k - 1);
    // The extra layers go to the later chunks: the first stage already holds the most
    // micro-batches in flight (pipeline_in_flight) and the embedding.
    for (int i = 0; i < k - 1; ++i) counts[static_cast<size_t>(i)] = lo + (i >= k - 1 - extra ? 1 : 0);
    counts[static_cast<size_t>(k - 1)] = best_last;
  }
  std::vector<PipelineChunk> out(static_cast<size_t>(k));
  int first = 0;
  for (int i = 0; i < k; ++i) {
    PipelineChunk& c = out[static_cast<size_t>(i)];
    c.first_layer = first;
    c.num_layers = counts[static_cast<size_t>(i)];
    c.embedding = i == 0;
    c.head = i == k - 1;
    c.rank = i % std::max(1, pp);
    c.cost = c.num_layers * cost.layer + (c.head ? cost.head : 0.0);
    first += c.num_layers;
  }
  return out;
}

int64_t pipeline_in_flight(PipelineSchedule schedule, int pp, int virtual_stages, int64_t micro_batches,
                           int rank) {
  const int64_t p = std::max(1, pp), m = std::max<int64_t>(1, micro_batches);
  switch (schedule) {
    case PipelineSchedule::gpipe: return m;
    case PipelineSchedule::one_f_one_b: return std::min<int64_t>(m, p - rank);
    case PipelineSchedule::interleaved_1f1b: {
      const int64_t v = std::max(1, virtual_stages);
      return std::min<int64_t>(m * v, 2 * (p - rank - 1) + (v - 1) * p + 1);
    }
  }
  return m;
}

double pipeline_bubble_fraction(PipelineSchedule schedule, int pp, int virtual_stages, int64_t micro_batches) {
  const double p = std::max(1, pp), m = static_cast<double>(std::max<int64_t>(1, micro_batches));
  const double v = schedule == PipelineSchedule::interleaved_1f1b ? std::max(1, virtual_stages) : 1;
  return (p - 1) / (v * m + p - 1);
}

}  // namespace meshwork
