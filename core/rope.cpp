#include "core/rope.h"

#include <cmath>
#include <numbers>

namespace meshwork {

std::vector<double> rope_inverse_frequencies(const ModelSpec& spec) {
  const int64_t D = spec.head_dim;
  std::vector<double> inv(static_cast<size_t>(D / 2));
  for (int64_t i = 0; i < D / 2; ++i)
    inv[i] = 1.0 / std::pow(spec.rope_theta, static_cast<double>(2 * i) / static_cast<double>(D));
  const RopeScaling& r = spec.rope_scaling;
  if (r.type != "llama3") return inv;
  // The three bands of the header comment.
  const double C = static_cast<double>(r.original_max_position_embeddings);
  const double low_wavelen = C / r.low_freq_factor, high_wavelen = C / r.high_freq_factor;
  for (double& f : inv) {
    const double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < high_wavelen) continue;
    if (wavelen > low_wavelen) {
      f /= r.factor;
      continue;
    }
    const double smooth = (C / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    f = (1 - smooth) * f / r.factor + smooth * f;
  }
  return inv;
}

}  // namespace meshwork
