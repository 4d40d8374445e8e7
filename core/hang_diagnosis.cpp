// Past 600 lines: the hang diagnosis, the mismatch rules and the two straggler analyses (with and
// without CPU time) share the wait-for graph helpers and the summary words; split, each half would
// re-declare them.
#include "core/hang_diagnosis.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/flight_layout.h"

namespace meshwork {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) {
    m = (m + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  }
  return m;
}

// "backward layer 3", "data", ...
std::string phase_words(const FlightState& f) {
  std::string s(to_string(f.phase));
  if (f.layer >= 0 && (f.phase == FlightPhase::forward || f.phase == FlightPhase::backward)) {
    s += " layer " + std::to_string(f.layer);
  }
  return s;
}

std::string op_words(const FlightOp& op) {
  return std::string(to_string(op.op)) + " on " + op.group.name() + " #" + std::to_string(op.seq);
}

// A group instance: which group (its flight slot: a dense kind, the world, ep or efsdp), which of
// its instances, which sequence number.
struct WaitKey {
  bool world = false;
  int kind = 0;  // flight_group_slot
  int index = 0;
  int64_t seq = 0;
  auto tie() const { return std::tie(world, kind, index, seq); }
  bool operator<(const WaitKey& o) const { return tie() < o.tie(); }
};

std::string seconds_text(double s) {
  char buf[32];
  if (s >= 10) std::snprintf(buf, sizeof buf, "%.0f s", s);
  else if (s >= 1) std::snprintf(buf, sizeof buf, "%.1f s", s);
  else std::snprintf(buf, sizeof buf, "%.0f ms", s * 1000);
  return buf;
}

// Mean seconds per step outside collectives.
double compute_mean(const RankTiming& t) {
  double comm = 0;
  for (Axis a : kAxes) comm += t.comm_mean_s[a];
  return std::max(0.0, (t.step_mean_s > 0 ? t.step_mean_s : t.step_s) - comm);
}

// The stragglers of one stage from the ranks' waits and CPU time (every timing has cpu_mean_s):
// whom its group peers wait on. For a rank and an axis, the peers' mean wait on that axis less
// its own is how long they waited on it there (a rank that arrives late waits least); summed
// over its axes it is the rank's net lateness, which a rank that merely waits on a late peer
// pays back on the axis it waits on. The straggler is late by more than a sixth of the step
// and later than every peer it shares a group with, so a waiting peer is never named. Slow in
// compute when it spent about that much longer outside collectives than its peers, on matching
// CPU time; else it was not running (its wall time not matched by CPU time). Means over the
// steps (a stop now and then is lost time the medians hide); pp waits are the schedule's bubble
// and are left out. Several ranks on few cores jitter by a few percent of the step, well under
// the floor.
std::vector<Straggler> held_up_stragglers(const DiagnosisInput& in, const DeviceMesh& mesh,
                                          const std::vector<const RankTiming*>& ts) {
  std::unordered_map<int, const RankTiming*> of;
  for (const RankTiming* t : ts) of[t->rank] = t;
  std::vector<double> step;
  for (const RankTiming* t : ts) step.push_back(t->step_mean_s > 0 ? t->step_mean_s : t->step_s);
  const double floor_s = std::max(0.01, median(step) / 6);
  struct Lateness {
    double net = 0;          // summed over the axes
    double most = 0;         // the axis its peers waited on it the longest
    std::string most_axis;
    std::vector<int> peers;  // every rank it shares a group with (of this stage, timed)
  };
  std::unordered_map<int, Lateness> late;
  for (const RankTiming* t : ts) {
    Lateness& l = late[t->rank];
    for (Axis a : kAxes) {
      if (a == Axis::pp || in.shape[a] <= 1) continue;
      double sum = 0;
      int n = 0;
      for (int r : mesh.group_members(t->rank, group_of_axis(a))) {
        auto it = of.find(r);
        if (r == t->rank || it == of.end()) continue;
        sum += it->second->comm_mean_s[a];
        ++n;
        l.peers.push_back(r);
      }
      if (n == 0) continue;
      const double waited_on = sum / n - t->comm_mean_s[a];
      l.net += waited_on;
      if (waited_on > l.most) {
        l.most = waited_on;
        l.most_axis = std::string(axis_name(a));
      }
    }
  }
  std::vector<double> most;
  for (const auto& entry : late) most.push_back(std::max(0.0, entry.second.most));
  const double median_most = median(most);
  std::vector<Straggler> found;
  for (const RankTiming* t : ts) {
    const Lateness& l = late[t->rank];
    if (l.net <= floor_s) continue;
    const bool latest = std::all_of(l.peers.begin(), l.peers.end(), [&](int p) { return late[p].net < l.net; });
    if (!latest) continue;
    std::vector<double> peer_cpu, peer_compute, peer_compute_mean;
    for (const RankTiming* o : ts) {
      if (o == t) continue;
      peer_cpu.push_back(*o->cpu_mean_s);
      peer_compute.push_back(o->compute_s);
      peer_compute_mean.push_back(compute_mean(*o));
    }
    Straggler s;
    s.rank = t->rank;
    s.others_wait_on = l.most_axis;
    // Slow in compute: longer outside collectives than its peers by about what they waited on
    // it, on CPU time that matches. A stop inside a collective leaves its compute as theirs.
    const double longer = compute_mean(*t) - median(peer_compute_mean);
    if (longer > 0.5 * l.most && *t->cpu_mean_s - median(peer_cpu) > 0.5 * longer) {
      s.slow_in = "compute";
      s.seconds = t->compute_s;
      s.median_s = median(peer_compute);
    } else {
      s.slow_in = "not running";
      s.seconds = l.most;
      s.median_s = median_most;
    }
    found.push_back(std::move(s));
  }
  return found;
}

// Ranks are compared with the other ranks of their pipeline stage only: stages differ by design
// (the first holds the embedding, the last the head and the loss, and the first waits on pp for
// the bubble), while the ranks of one stage do the same work.
void find_stragglers(const DiagnosisInput& in, const std::unordered_map<int, const RankObservation*>& by_rank,
                     Diagnosis& d) {
  if (in.timings.size() < 2) return;
  const int64_t world = std::max<int64_t>(1, in.shape.world_size());
  const int stages = std::max(1, in.shape[Axis::pp]);
  const int64_t per_stage = std::max<int64_t>(1, world / stages);
  std::map<int, std::vector<const RankTiming*>> by_stage;
  for (const RankTiming& t : in.timings) by_stage[static_cast<int>(t.rank / per_stage)].push_back(&t);
  auto place = [&](Straggler& s) {
    auto it = by_rank.find(s.rank);
    if (it != by_rank.end()) {
      s.node = it->second->node;
      s.host = it->second->host;
    } else {
      s.node = in.ranks_per_node > 0 ? s.rank / in.ranks_per_node : 0;
    }
  };
  // With CPU time: the ranks their peers wait on (held_up_stragglers); when it names nobody, or
  // without CPU time, the compute and slow-link rules below.
  const bool cpu_known =
      std::all_of(in.timings.begin(), in.timings.end(), [](const RankTiming& t) { return t.cpu_mean_s.has_value(); });
  if (cpu_known) {
    Result<DeviceMesh> mesh = DeviceMesh::create(in.shape, std::max(1, in.ranks_per_node));
    std::vector<Straggler> held;
    if (mesh) {
      for (const auto& stage_ranks : by_stage) {
        if (stage_ranks.second.size() < 2) continue;
        for (Straggler& s : held_up_stragglers(in, *mesh, stage_ranks.second)) held.push_back(std::move(s));
      }
    }
    if (!held.empty()) {
      for (Straggler& s : held) place(s);
      std::sort(held.begin(), held.end(),
                [](const Straggler& a, const Straggler& b) { return a.seconds - a.median_s > b.seconds - b.median_s; });
      d.stragglers = std::move(held);
      return;
    }
  }
  std::vector<Straggler> found;
  size_t compared = 0;
  for (const auto& stage_ranks : by_stage) {
    // A plain reference, not a structured binding: lambdas below capture it (clang 14 refuses
    // captured bindings).
    const std::vector<const RankTiming*>& ts = stage_ranks.second;
    if (ts.size() < 2) continue;
    compared += ts.size();
    std::vector<double> compute, step;
    for (const RankTiming* t : ts) {
      compute.push_back(t->compute_s);
      step.push_back(t->step_s);
    }
    const double mc = median(compute);
    // Well above: half as much again as the stage's median rank, and by at least a tenth of the
    // median step (and 10 ms): the noise of ranks sharing a few cores names no one.
    const double floor_s = std::max(0.01, 0.1 * median(step));
    auto well_above = [&](double v, double m) { return v > 1.5 * m && v - m > floor_s; };
    AxisArray<double> median_comm;
    for (Axis a : kAxes) {
      std::vector<double> v;
      for (const RankTiming* t : ts) v.push_back(t->comm_s[a]);
      median_comm[a] = median(v);
    }
    // The axis the stage's ranks wait on most: where a compute straggler's peers wait.
    std::string busiest;
    double busiest_s = 0;
    for (Axis a : kAxes) {
      if (median_comm[a] > busiest_s) {
        busiest_s = median_comm[a];
        busiest = std::string(axis_name(a));
      }
    }
    // With few ranks the median is pulled by the slow one itself (two ranks: the mean): judge
    // each against the others alone.
    const bool few = ts.size() < 5;
    auto others_median = [&](const RankTiming* self, auto value) {
      std::vector<double> v;
      for (const RankTiming* t : ts)
        if (t != self) v.push_back(value(*t));
      return median(v);
    };
    for (const RankTiming* t : ts) {
      const double mc_t = few ? others_median(t, [](const RankTiming& x) { return x.compute_s; }) : mc;
      if (well_above(t->compute_s, mc_t)) {
        Straggler s;
        s.rank = t->rank;
        s.slow_in = "compute";
        s.seconds = t->compute_s;
        s.median_s = mc_t;
        s.others_wait_on = busiest;
        place(s);
        found.push_back(std::move(s));
        continue;
      }
      // A wait is noisier than compute (it holds every peer's jitter): twice the others' and a
      // quarter of the step more, before a link is called slow.
      auto far_above = [&](double v, double m) { return v > 2 * m && v - m > std::max(0.01, 0.25 * median(step)); };
      for (Axis a : kAxes) {
        const double m = few ? others_median(t, [a](const RankTiming& x) { return x.comm_s[a]; }) : median_comm[a];
        if (in.shape[a] <= 1 || !far_above(t->comm_s[a], m)) continue;
        // Waiting on an axis more than the stage's other ranks while computing as they do: its
        // link on that axis is slow (peers waiting on a slow rank show it as compute instead).
        if (t->compute_s > 1.1 * mc_t) continue;
        Straggler s;
        s.rank = t->rank;
        s.slow_in = "waiting on " + std::string(axis_name(a));
        s.seconds = t->comm_s[a];
        s.median_s = m;
        place(s);
        found.push_back(std::move(s));
        break;
      }
    }
  }
  // A rank slow in compute explains its peers' waits: they are not stragglers themselves.
  const bool compute_straggler =
      std::any_of(found.begin(), found.end(), [](const Straggler& s) { return s.slow_in == "compute"; });
  if (compute_straggler) {
    found.erase(std::remove_if(found.begin(), found.end(), [](const Straggler& s) { return s.slow_in != "compute"; }),
                found.end());
  }
  // When most ranks are "slow", it is the run (or an axis) that is slow, not a rank.
  if (found.size() * 2 > compared) {
    d.notes.push_back("most ranks are equally slow: no single straggler (" + std::to_string(found.size()) + " of " +
                      std::to_string(compared) + " ranks above their stage's median)");
    return;
  }
  std::sort(found.begin(), found.end(),
            [](const Straggler& a, const Straggler& b) { return a.seconds - a.median_s > b.seconds - b.median_s; });
  d.stragglers = std::move(found);
}

}  // namespace

std::string_view to_string(HealthState state) {
  switch (state) {
    case HealthState::healthy: return "healthy";
    case HealthState::hang: return "hang";
    case HealthState::mismatch: return "mismatch";
    case HealthState::straggler: return "straggler";
    case HealthState::failed: return "failed";
  }
  return "healthy";
}

std::string rank_ranges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string duration_words(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) {
    const int64_t rest = s % 60;
    return std::to_string(s / 60) + " min" + (rest ? " " + std::to_string(rest) + " s" : "");
  }
  const int64_t min = (s % 3600) / 60;
  return std::to_string(s / 3600) + " h" + (min ? " " + std::to_string(min) + " min" : "");
}

Diagnosis diagnose(const DiagnosisInput& in) {
  Diagnosis d;
  std::unordered_map<int, const RankObservation*> by_rank;
  by_rank.reserve(in.ranks.size());
  for (const RankObservation& r : in.ranks) by_rank[r.rank] = &r;

  std::vector<double> steps;
  for (const RankTiming& t : in.timings) steps.push_back(t.step_s);
  const double median_step = median(steps);
  d.threshold_s = in.hang_after_s ? *in.hang_after_s : std::max(60.0, 5 * median_step);

  // The last step's time comes from its rank's node: a node's clock far off the workbench's
  // shifts T by the skew (clusters keep their clocks in step; docs/diagnosis.md).
  double progress = 0;
  for (const RankObservation& r : in.ranks) progress = std::max(progress, r.last_step_time);
  if (progress == 0) progress = in.started;
  d.silent_s = progress > 0 ? std::max(0.0, in.now - progress) : 0;

  if (d.silent_s < d.threshold_s) {
    find_stragglers(in, by_rank, d);
    if (!d.stragglers.empty()) d.state = HealthState::straggler;
    return d;
  }

  Result<DeviceMesh> mesh = DeviceMesh::create(in.shape, std::max(1, in.ranks_per_node));
  if (!mesh) {
    d.state = HealthState::hang;
    d.notes.push_back("the run's shape cannot be read: " + mesh.error().message());
    return d;
  }

  // A rank that cannot move (stopped, a zombie, gone, ended) blocks its groups even when its
  // record shows it inside a collective (SIGSTOP lands mid-collective more often than not): it is
  // a culprit, never a waiter.
  auto cannot_move = [](const RankObservation& r) {
    return r.process == "stopped" || r.process == "gone" || r.process == "zombie" || !r.ended.empty();
  };
  // Waiters by group instance and sequence number (stuck ranks included: they hold the op).
  std::map<WaitKey, std::vector<const RankObservation*>> waits;
  for (const RankObservation& r : in.ranks) {
    if (!r.flight || !r.flight->current) continue;
    const FlightOp& op = *r.flight->current;
    WaitKey k;
    k.world = op.group.world;
    k.kind = flight_group_slot(op.group);
    if (op.group.expert)  // a sparse mesh's group: named by its lowest rank
      k.index = mesh->expert_group_members(r.rank, *op.group.expert).front();
    else
      k.index = op.group.world ? 0 : mesh->group_index(r.rank, op.group.kind);
    k.seq = op.seq;
    waits[k].push_back(&r);
  }

  // waiter -> the members it waits for.
  std::map<int, std::vector<int>> missing_of_waiter;
  std::set<int> waiting_ranks;  // ranks that wait and could move on
  for (const auto& [key, waiters] : waits) {
    for (const RankObservation* w : waiters)
      if (!cannot_move(*w)) waiting_ranks.insert(w->rank);
  }
  for (const auto& [key, waiters] : waits) {
    const FlightOp& first = *waiters.front()->flight->current;
    std::vector<int> members;
    if (key.world) {
      members.resize(static_cast<size_t>(mesh->world_size()));
      for (int i = 0; i < mesh->world_size(); ++i) members[static_cast<size_t>(i)] = i;
    } else if (first.group.expert) {
      members = mesh->expert_group_members(waiters.front()->rank, *first.group.expert);
    } else {
      members = mesh->group_members(waiters.front()->rank, first.group.kind);
    }
    std::set<int> here;
    // One side per (op, bytes). A send and a recv at one sequence number are the two halves of
    // one point-to-point exchange (a pipeline stage sends what its neighbour receives), not a
    // mismatch: they count as one side, named by the op its first rank called.
    std::map<std::pair<FlightOpKind, int64_t>, std::pair<std::string, std::vector<int>>> sides;
    double since = first.enter;
    for (const RankObservation* w : waiters) {
      here.insert(w->rank);
      const FlightOp& op = *w->flight->current;
      const FlightOpKind paired = op.op == FlightOpKind::recv ? FlightOpKind::send : op.op;
      auto& side = sides[{paired, op.bytes}];
      if (side.first.empty()) side.first = std::string(to_string(op.op));
      side.second.push_back(w->rank);
      since = std::min(since, op.enter);
    }
    WaitingGroup g;
    g.axis = first.group.name();
    g.op = std::string(to_string(first.op));
    g.seq = key.seq;
    g.bytes = first.bytes;
    g.since = since;
    std::vector<int> stuck;  // inside the op but cannot finish it: the others wait on them too
    for (const RankObservation* w : waiters) (cannot_move(*w) ? stuck : g.ranks).push_back(w->rank);
    std::sort(g.ranks.begin(), g.ranks.end());
    for (int m : members) {
      if (here.count(m)) continue;
      auto it = by_rank.find(m);
      // A member already past this sequence number on the group is not missing: it entered.
      if (it != by_rank.end() && it->second->flight) {
        const std::optional<int64_t> last = it->second->flight->last_seq_of(first.group);
        if (last && *last >= key.seq) continue;
      }
      g.missing.push_back(m);
    }
    if (sides.size() > 1) {
      Mismatch mm;
      mm.axis = g.axis;
      mm.seq = key.seq;
      for (auto& [what, side] : sides) mm.sides.push_back({side.first, what.second, side.second});
      std::sort(mm.sides.begin(), mm.sides.end(),
                [](const MismatchSide& a, const MismatchSide& b) { return a.ranks.size() > b.ranks.size(); });
      d.mismatches.push_back(std::move(mm));
    }
    std::vector<int> blockers = g.missing;
    blockers.insert(blockers.end(), stuck.begin(), stuck.end());
    for (const RankObservation* w : waiters)
      if (!cannot_move(*w)) missing_of_waiter[w->rank] = blockers;
    if (!g.ranks.empty()) d.waiting.push_back(std::move(g));
  }
  std::sort(d.waiting.begin(), d.waiting.end(),
            [](const WaitingGroup& a, const WaitingGroup& b) { return a.ranks.size() > b.ranks.size(); });

  // Culprits: waited for, waiting on no one.
  std::map<int, std::vector<int>> waited_by;
  for (const auto& [waiter, missing] : missing_of_waiter) {
    for (int m : missing) {
      if (!waiting_ranks.count(m)) waited_by[m].push_back(waiter);
    }
  }
  // Nobody waits on a rank, yet ranks are gone or stopped: they are culprits too (a rank that
  // died before anyone entered a collective with it).
  for (const RankObservation& r : in.ranks) {
    if (waiting_ranks.count(r.rank) || waited_by.count(r.rank)) continue;
    if (cannot_move(r)) waited_by[r.rank];
  }
  for (auto& [rank, waiters] : waited_by) {
    Culprit c;
    c.rank = rank;
    c.waited_by = waiters;
    std::sort(c.waited_by.begin(), c.waited_by.end());
    auto it = by_rank.find(rank);
    if (it != by_rank.end()) {
      const RankObservation& r = *it->second;
      c.node = r.node;
      c.host = r.host;
      c.pid = r.pid;
      c.process = r.process;
      c.ended = r.ended;
      if (r.flight) {
        c.phase = phase_words(*r.flight);
        if (r.flight->current) c.phase = "inside " + op_words(*r.flight->current) + ", " + c.phase;
        c.last_activity = r.flight->activity;
        if (!c.pid) c.pid = r.flight->pid;
      } else {
        c.phase = "moving (no stall reported)";
      }
    } else {
      c.node = in.ranks_per_node > 0 ? rank / in.ranks_per_node : 0;
      c.phase = "unknown (nothing heard from it)";
    }
    d.culprits.push_back(std::move(c));
  }

  if (!d.mismatches.empty()) d.state = HealthState::mismatch;
  else d.state = HealthState::hang;
  if (d.waiting.empty()) {
    d.notes.push_back("no rank reported waiting inside a collective (no stall reports yet, or every rank "
                      "is outside one)");
  }
  return d;
}

Diagnosis diagnose_ended(const DiagnosisInput& in, std::string_view status, std::string_view reason) {
  Diagnosis d;
  if (status != "failed") {
    d.notes.push_back("the run ended: " + std::string(status));
    return d;
  }
  d.state = HealthState::failed;
  if (!reason.empty()) d.notes.push_back(std::string(reason.substr(0, reason.find('\n'))));
  // The rank the run's root cause names ("node 1 (node1), rank 3: killed by signal 9 ..."): the
  // others failed because it did (their end records speak of lost connections). Its first line
  // that names a rank: a Slurm run's reason starts with the job's state ("Slurm job 2: FAILED
  // ..."), and the exit record naming the rank follows.
  int named = -1;
  for (size_t at = 0; named < 0 && at < reason.size();) {
    const size_t end = std::min(reason.find('\n', at), reason.size());
    const std::string_view line = reason.substr(at, end - at);
    for (size_t p = line.find("rank "); named < 0 && p != std::string_view::npos; p = line.find("rank ", p + 5)) {
      size_t q = p + 5;
      while (q < line.size() && std::isdigit(static_cast<unsigned char>(line[q]))) ++q;
      if (q > p + 5 && q - p - 5 < 9) named = std::stoi(std::string(line.substr(p + 5, q - p - 5)));
    }
    at = end + 1;
  }
  for (const RankObservation& r : in.ranks) {
    if (r.ended.rfind("failed", 0) != 0 || (named >= 0 && r.rank != named)) continue;
    Culprit c;
    c.rank = r.rank;
    c.node = r.node;
    c.host = r.host;
    c.pid = r.pid;
    c.process = "gone";
    c.ended = r.ended;
    if (r.flight) {
      c.phase = phase_words(*r.flight);
      c.last_activity = r.flight->activity;
    }
    d.culprits.push_back(std::move(c));
  }
  return d;
}

std::string Diagnosis::summary() const {
  std::string s;
  switch (state) {
    case HealthState::failed:
      s = "the run failed";
      if (!notes.empty()) s += ": " + notes.front();
      for (const Culprit& c : culprits) {
        s += "; rank " + std::to_string(c.rank) + " (node" + std::to_string(c.node) +
             (c.pid ? ", pid " + std::to_string(c.pid) : "") + "): gone, " + c.ended;
      }
      return s;
    case HealthState::healthy:
      return "healthy: last step " + duration_words(silent_s) + " ago (a hang is declared after " +
             duration_words(threshold_s) + ")";
    case HealthState::straggler: {
      s = "slow: ";
      for (size_t i = 0; i < stragglers.size() && i < 3; ++i) {
        const Straggler& st = stragglers[i];
        if (i) s += "; ";
        const bool named_host = !st.host.empty() && st.host != "node" + std::to_string(st.node);
        s += "rank " + std::to_string(st.rank) + " (node" + std::to_string(st.node) + (named_host ? " " + st.host : "");
        if (st.slow_in == "not running")
          s += ") is not running (stopped, descheduled or throttled: no more CPU time than its peers): they wait " +
               seconds_text(st.seconds) + " per step on it against " + seconds_text(st.median_s) + " for the median rank";
        else
          s += ") is slow in " + st.slow_in + ": " + seconds_text(st.seconds) + " per step against " +
               seconds_text(st.median_s) + " for the median rank";
        if (!st.others_wait_on.empty()) s += "; the others wait on " + st.others_wait_on;
      }
      if (stragglers.size() > 3) s += "; and " + std::to_string(stragglers.size() - 3) + " more";
      return s;
    }
    case HealthState::mismatch:
      s = "mismatched collectives (a bug in the program, not a slow rank), no step for " + duration_words(silent_s);
      for (const Mismatch& m : mismatches) {
        s += ": at " + m.axis + " #" + std::to_string(m.seq);
        for (size_t i = 0; i < m.sides.size(); ++i) {
          const MismatchSide& side = m.sides[i];
          s += (i ? " while " : " ") + std::string(side.ranks.size() == 1 ? "rank " : "ranks ") +
               rank_ranges(side.ranks) + " call " + side.op + " of " + std::to_string(side.bytes) + " bytes";
        }
      }
      return s;
    case HealthState::hang:
      break;
  }
  s = "hung for " + duration_words(silent_s);
  for (size_t i = 0; i < waiting.size() && i < 3; ++i) {
    const WaitingGroup& g = waiting[i];
    s += std::string(i ? "; " : ": ") + (g.ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(g.ranks) +
         (g.ranks.size() == 1 ? " waits" : " wait") + " in " + g.op + " on " + g.axis + " #" + std::to_string(g.seq);
  }
  if (waiting.size() > 3) s += "; " + std::to_string(waiting.size() - 3) + " more groups wait";
  for (const Culprit& c : culprits) {
    s += "; rank " + std::to_string(c.rank) + " (node" + std::to_string(c.node);
    if (!c.host.empty() && c.host != "node" + std::to_string(c.node)) s += " " + c.host;
    if (c.pid) s += ", pid " + std::to_string(c.pid);
    s += ")";
    const bool inside = c.phase.rfind("inside ", 0) == 0;
    s += c.waited_by.empty() ? " blocks them" : inside ? " holds it up" : " never entered it";
    if (!c.process.empty()) s += ": " + c.process;
    if (!c.ended.empty()) s += " (" + c.ended + ")";
    if (!c.phase.empty()) s += (inside ? ", " : ", last in ") + c.phase;
  }
  if (culprits.empty() && !waiting.empty()) s += "; no rank is missing from the waited groups";
  return s;
}

nlohmann::json Diagnosis::to_json() const {
  nlohmann::json j;
  j["state"] = std::string(to_string(state));
  j["silent_s"] = silent_s;
  j["threshold_s"] = threshold_s;
  j["culprits"] = nlohmann::json::array();
  for (const Culprit& c : culprits) {
    j["culprits"].push_back({{"rank", c.rank},
                             {"node", c.node},
                             {"host", c.host},
                             {"pid", c.pid},
                             {"phase", c.phase},
                             {"process", c.process},
                             {"ended", c.ended},
                             {"last_activity", c.last_activity},
                             {"waited_by", c.waited_by}});
  }
  j["waiting"] = nlohmann::json::array();
  for (const WaitingGroup& g : waiting) {
    j["waiting"].push_back({{"axis", g.axis},
                            {"op", g.op},
                            {"seq", g.seq},
                            {"bytes", g.bytes},
                            {"ranks", g.ranks},
                            {"missing", g.missing},
                            {"since", g.since}});
  }
  j["mismatches"] = nlohmann::json::array();
  for (const Mismatch& m : mismatches) {
    nlohmann::json sides = nlohmann::json::array();
    for (const MismatchSide& s : m.sides) sides.push_back({{"op", s.op}, {"bytes", s.bytes}, {"ranks", s.ranks}});
    j["mismatches"].push_back({{"axis", m.axis}, {"seq", m.seq}, {"sides", sides}});
  }
  j["stragglers"] = nlohmann::json::array();
  for (const Straggler& s : stragglers) {
    j["stragglers"].push_back({{"rank", s.rank},
                               {"node", s.node},
                               {"host", s.host},
                               {"slow_in", s.slow_in},
                               {"seconds", s.seconds},
                               {"median_s", s.median_s},
                               {"others_wait_on", s.others_wait_on}});
  }
  j["notes"] = notes;
  j["summary"] = summary();
  return j;
}

}  // namespace meshwork
