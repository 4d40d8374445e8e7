// The per-rank sizes that the memory and time estimates both start from, in the notation of
// core/memory_estimate.cpp: t = tp, cp, n = dp_shard * cp (the FSDP group, torchtitan's
// dp_shard_cp), b = micro-batch, s = sequence length, s_cp = s / cp (the sequence one rank
// holds), T = b * s_cp (tokens of one micro-batch on one rank), c = bytes of the compute dtype.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/mesh.h"
#include "core/run_config.h"

namespace meshwork {

struct RankSizes {
  int64_t t, cp, n, b, s, s_cp, T, c;
};

// Every size is at least 1 (a resolved shape has no axis below 1 anyway).
inline RankSizes rank_sizes(const MeshShape& shape, int64_t micro_batch, int64_t seq_len,
                            Precision precision) {
  RankSizes z;
  z.t = std::max(1, shape[Axis::tp]);
  z.cp = std::max(1, shape[Axis::cp]);
  z.n = int64_t{std::max(1, shape[Axis::dp_shard])} * z.cp;
  z.b = std::max<int64_t>(1, micro_batch);
  z.s = std::max<int64_t>(1, seq_len);
  z.s_cp = std::max<int64_t>(1, z.s / z.cp);
  z.T = z.b * z.s_cp;
  z.c = precision == Precision::bf16 ? 2 : 4;
  return z;
}

}  // namespace meshwork
