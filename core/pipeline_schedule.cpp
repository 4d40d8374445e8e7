#include "core/pipeline_schedule.h"

#include <algorithm>
#include <utility>

namespace meshwork {

namespace {

// 1F1B's shape for any forward/backward order: `warmup` forwards, then forward/backward pairs
// while forwards remain, then the remaining backwards. Both orders list every (micro-batch,
// chunk) of the rank once.
std::vector<PipelineAction> one_f_one_b(const std::vector<PipelineAction>& forwards,
                                        const std::vector<PipelineAction>& backwards, size_t warmup) {
  std::vector<PipelineAction> out;
  out.reserve(forwards.size() + backwards.size());
  warmup = std::min(warmup, forwards.size());
  size_t f = 0, b = 0;
  while (f < warmup) out.push_back(forwards[f++]);
  while (f < forwards.size()) {
    out.push_back(forwards[f++]);
    out.push_back(backwards[b++]);
  }
  while (b < backwards.size()) out.push_back(backwards[b++]);
  return out;
}

}  // namespace

std::vector<PipelineAction> pipeline_schedule(PipelineSchedule schedule, int pp, int virtual_stages,
                                              int64_t micro_batches, int rank) {
  const int p = std::max(1, pp);
  const int v = schedule == PipelineSchedule::interleaved_1f1b ? std::max(1, virtual_stages) : 1;
  const int64_t m = std::max<int64_t>(1, micro_batches);
  std::vector<PipelineAction> forwards, backwards;
  if (schedule != PipelineSchedule::interleaved_1f1b) {
    for (int64_t i = 0; i < m; ++i) {
      forwards.push_back({PipelineAction::forward, i, rank});
      backwards.push_back({PipelineAction::backward, i, rank});
    }
    if (schedule == PipelineSchedule::gpipe) return one_f_one_b(forwards, backwards, forwards.size());
    return one_f_one_b(forwards, backwards, static_cast<size_t>(std::min<int64_t>(m, p - rank - 1)));
  }
  // Megatron-LM's interleaving (get_model_chunk_id): virtual micro-batch i runs micro-batch
  // (i / (pV)) p + i mod p on the rank's (i / p) mod V-th chunk, counted from the last chunk
  // backwards for the backward pass. A tail group of fewer than p micro-batches (M not a
  // multiple of p, refused by validation) keeps its order within the group.
  const int64_t group = static_cast<int64_t>(p) * v;
  for (int64_t i = 0; i < m * v; ++i) {
    const int64_t g = i / group, in_group = i % group;
    const int64_t width = std::min<int64_t>(p, m - g * p);  // micro-batches in this group
    const int64_t lane = in_group % width, slot = in_group / width;
    const int local = static_cast<int>(slot % v);
    const int64_t mb = g * p + lane;
    forwards.push_back({PipelineAction::forward, mb, local * p + rank});
    backwards.push_back({PipelineAction::backward, mb, (v - 1 - local) * p + rank});
  }
  const int64_t warmup = std::min<int64_t>(m * v, 2 * static_cast<int64_t>(p - rank - 1) + static_cast<int64_t>(v - 1) * p);
  return one_f_one_b(forwards, backwards, static_cast<size_t>(warmup));
}

int64_t peak_in_flight(const std::vector<PipelineAction>& actions) {
  int64_t held = 0, peak = 0;
  for (const PipelineAction& a : actions) {
    held += a.kind == PipelineAction::forward ? 1 : -1;
    peak = std::max(peak, held);
  }
  return peak;
}

std::string to_string(const PipelineAction& a) {
  return std::string(a.kind == PipelineAction::forward ? "F" : "B") + std::to_string(a.micro_batch) + "@" +
         std::to_string(a.chunk);
}

Result<PipelineTimeline> simulate_pipeline(PipelineSchedule schedule, int pp, int virtual_stages,
                                           int64_t micro_batches, const std::vector<double>& forward_s,
                                           const std::vector<double>& backward_s, double hop_s) {
  const int p = std::max(1, pp);
  const int v = schedule == PipelineSchedule::interleaved_1f1b ? std::max(1, virtual_stages) : 1;
  std::vector<std::vector<PipelineAction>> lists;
  for (int r = 0; r < p; ++r) lists.push_back(pipeline_schedule(schedule, p, v, micro_batches, r));
  auto t = simulate_pipeline(lists, forward_s, backward_s, hop_s);
  if (!t && t.error().field == "pipeline schedule" && t.error().value.empty()) {
    Error e = t.error();
    e.field = "pp_schedule";
    e.value = std::string(to_string(schedule));
    return e;
  }
  return t;
}

Result<PipelineTimeline> simulate_pipeline(const std::vector<std::vector<PipelineAction>>& stage_lists,
                                           const std::vector<double>& forward_s,
                                           const std::vector<double>& backward_s, double hop_s) {
  const int p = std::max<int>(1, static_cast<int>(stage_lists.size()));
  const int k = static_cast<int>(forward_s.size());
  if (k < p || k % p != 0 || backward_s.size() != forward_s.size())
    return Error{"simulate_pipeline", std::to_string(forward_s.size()) + " forward / " +
                                          std::to_string(backward_s.size()) + " backward times",
                 "one per chunk, a multiple of the " + std::to_string(p) + " stage ranks"};
  std::vector<std::vector<PipelineAction>> lists = stage_lists;
  lists.resize(static_cast<size_t>(p));

  // End time of each finished action by (kind, micro-batch, chunk); -1 = not run yet. Flat, as
  // the planner simulates thousands of shapes with up to thousands of micro-batches each.
  int64_t micro_batches = 0;
  for (const auto& l : lists)
    for (const PipelineAction& a : l) micro_batches = std::max(micro_batches, a.micro_batch + 1);
  std::vector<double> done(static_cast<size_t>(2 * micro_batches * k), -1.0);
  auto slot = [&](PipelineAction::Kind kind, int64_t mb, int chunk) -> double& {
    return done[static_cast<size_t>((static_cast<int64_t>(kind) * micro_batches + mb) * k + chunk)];
  };
  auto end_of = [&](PipelineAction::Kind kind, int64_t mb, int chunk) -> const double* {
    const double& e = slot(kind, mb, chunk);
    return e < 0 ? nullptr : &e;
  };
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> free_at(static_cast<size_t>(p), 0), busy(static_cast<size_t>(p), 0);
  size_t remaining = 0;
  for (const auto& l : lists) remaining += l.size();
  while (remaining > 0) {
    bool progressed = false;
    for (int r = 0; r < p; ++r) {
      // Run every action of rank r whose input is there, in list order.
      auto& l = lists[static_cast<size_t>(r)];
      size_t& i = next[static_cast<size_t>(r)];
      while (i < l.size()) {
        const PipelineAction& a = l[i];
        if (a.chunk < 0 || a.chunk >= k || a.chunk % p != r || a.micro_batch < 0)
          return Error{"pipeline schedule", to_string(a),
                       "rank " + std::to_string(r) + " runs chunks c with c % " + std::to_string(p) + " = " +
                           std::to_string(r) + ", 0 <= c < " + std::to_string(k)};
        double ready = 0;
        bool can = true;
        if (a.kind == PipelineAction::forward && a.chunk > 0) {
          const double* e = end_of(PipelineAction::forward, a.micro_batch, a.chunk - 1);
          if (!e) can = false;
          else ready = *e + ((a.chunk - 1) % p == r ? 0 : hop_s);
        } else if (a.kind == PipelineAction::backward) {
          // Its own forward ran earlier on this rank; the next chunk's backward sends the gradient.
          if (a.chunk < k - 1) {
            const double* e = end_of(PipelineAction::backward, a.micro_batch, a.chunk + 1);
            if (!e) can = false;
            else ready = *e + ((a.chunk + 1) % p == r ? 0 : hop_s);
          }
          if (can && !end_of(PipelineAction::forward, a.micro_batch, a.chunk)) can = false;
        }
        if (!can) break;
        const double t = a.kind == PipelineAction::forward ? forward_s[static_cast<size_t>(a.chunk)]
                                                          : backward_s[static_cast<size_t>(a.chunk)];
        const double start = std::max(ready, free_at[static_cast<size_t>(r)]);
        free_at[static_cast<size_t>(r)] = start + t;
        busy[static_cast<size_t>(r)] += t;
        slot(a.kind, a.micro_batch, a.chunk) = start + t;
        ++i;
        --remaining;
        progressed = true;
      }
    }
    if (!progressed) {
      std::string stuck;
      for (int r = 0; r < p; ++r)
        if (next[static_cast<size_t>(r)] < lists[static_cast<size_t>(r)].size())
          stuck += (stuck.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " at " +
                   to_string(lists[static_cast<size_t>(r)][next[static_cast<size_t>(r)]]);
      return Error{"pipeline schedule", "",
                   "its stage orders wait on each other and cannot run (" + stuck + ")"};
    }
  }
  PipelineTimeline t;
  t.step_s = *std::max_element(free_at.begin(), free_at.end());
  double idle = 0;
  for (int r = 0; r < p; ++r) {
    t.busy_s.push_back(busy[static_cast<size_t>(r)]);
    t.idle_s.push_back(t.step_s - busy[static_cast<size_t>(r)]);
    idle += t.idle_s.back();
  }
  t.bubble_fraction = t.step_s > 0 ? idle / (p * t.step_s) : 0;
  return t;
}

}  // namespace meshwork
