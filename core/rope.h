// RoPE inverse frequencies of a model spec, plain RoPE or Llama 3.x's "llama3" scaling (no
// LibTorch here: the trainer turns them into its cos/sin tables, tests compare them with HF).
//
// Plain RoPE (Su et al. 2021, HF's default): for head dim D and base theta,
//   inv_freq_i = theta^(-2i/D),  i = 0 .. D/2 - 1,   angle(pos, i) = pos * inv_freq_i
// so pair i turns once every wavelen_i = 2 pi / inv_freq_i positions.
//
// llama3 (Llama 3.1's long-context rewrite, HF `_compute_llama3_parameters`): with the
// pre-training context C = original_max_position_embeddings, factor s, low_freq_factor l and
// high_freq_factor h, the wavelengths split into three bands:
//   wavelen_i < C / h            (high frequencies, many turns inside C): kept, inv_freq_i
//   wavelen_i > C / l            (low frequencies, less than l turns inside C): slowed, inv_freq_i / s
//   otherwise (medium band)      a linear blend in C / wavelen_i between the two:
//       smooth = (C / wavelen_i - l) / (h - l)        (0 at wavelen = C/l, 1 at wavelen = C/h)
//       inv_freq_i' = (1 - smooth) * inv_freq_i / s + smooth * inv_freq_i
// Positions inside the old context keep their high-frequency detail while the slow pairs stretch
// to s times the context. No attention scaling goes with it (HF's attention_factor is 1).
#pragma once

#include <vector>

#include "core/model_spec.h"

namespace meshwork {

// D/2 inverse frequencies (double precision) for spec.head_dim, spec.rope_theta and
// spec.rope_scaling ("default" or "llama3"; model_spec_from_json refuses every other type).
std::vector<double> rope_inverse_frequencies(const ModelSpec& spec);

}  // namespace meshwork
