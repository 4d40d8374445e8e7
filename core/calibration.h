// Calibration: what the cluster itself measured, as plain values the estimator uses in place of
// HardwareModel's constants (core/time_estimate.h).
//
//   - matmul throughput per precision, per number of ranks sharing a node (and the intra-op
//     threads each rank had), at the shapes a transformer layer multiplies;
//   - per link kind (inside a node, across nodes) and per collective (all-reduce, all-gather,
//     reduce-scatter, send/recv, all-to-all) and group size, an alpha-beta fit t = alpha + x / beta,
//     where x is the bytes ONE rank sends in the ring algorithm for a tensor of M bytes:
//       all-reduce 2 (n-1)/n M,  all-gather, reduce-scatter and all-to-all (n-1)/n M,  send/recv M
//     (the estimator counts bytes the same way, so beta is a "bus bandwidth" in nccl-tests'
//     sense and a fit at one group size carries over to another; alpha scales with the ring
//     steps: 2 (n-1) for all-reduce, n-1 for all-gather / reduce-scatter / all-to-all (one
//     message to each peer), 1 for send/recv);
//   - the cluster fingerprint (nodes, devices, links) it was measured on and the date.
//
// `meshtrain calibrate` measures the samples (metrics records of type "calibration",
// docs/metrics.md); build_calibration() fits them; the run store keeps the result by fingerprint
// (core/store/calibration_store.h); `meshwork plan --calibration FILE` and the planner use it.
// Derivations: docs/estimator.md, "Calibration".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fit_key.h"
#include "core/link_kind.h"
#include "core/run_config.h"

namespace meshwork {

// all_to_all: every member sends an equal block of M/n to each other member (the experts'
// dispatch and combine under expert parallelism, docs/moe.md). A calibration file written before
// it was measured has no all_to_all fits; the estimator then uses HardwareModel's defaults for it.
enum class Collective { all_reduce, all_gather, reduce_scatter, send_recv, all_to_all };
inline constexpr Collective kCollectives[] = {Collective::all_reduce, Collective::all_gather,
                                              Collective::reduce_scatter, Collective::send_recv,
                                              Collective::all_to_all};

// "all_reduce" | "all_gather" | "reduce_scatter" | "send_recv" | "all_to_all"
std::string_view to_string(Collective c);
std::string_view to_string(LinkKind l);    // "intra_node" | "inter_node"
Result<Collective> parse_collective(std::string_view text, std::string_view field = "op");
Result<LinkKind> parse_link_kind(std::string_view text, std::string_view field = "link");

// Bytes one rank sends for a collective of a tensor of `m` bytes over `n` ranks (ring), and the
// ring steps it takes (each step pays the per-message latency once).
double ring_bytes_sent(Collective c, double m, int64_t n);
int64_t ring_steps(Collective c, int64_t n);

// t(x) = latency_s + x / bytes_per_s, x = ring_bytes_sent().
struct AlphaBeta {
  double latency_s = 0;
  double bytes_per_s = 0;
  double seconds(double bytes_sent) const { return latency_s + bytes_sent / bytes_per_s; }
};

// One timed collective (the mean of its iterations) or one timed matmul.
struct CollectiveSample {
  Collective op = Collective::all_reduce;
  LinkKind link = LinkKind::intra_node;
  int group_size = 2;
  double bytes = 0;    // M: the full tensor (all-gather: the gathered output)
  double seconds = 0;  // mean time of one collective
};
struct MatmulSample {
  Precision precision = Precision::fp32;
  int threads = 1;         // intra-op threads of the rank
  int ranks_per_node = 1;  // ranks multiplying at once on the node (they share its cores)
  int64_t m = 0, n = 0, k = 0;  // [m, k] x [k, n]: 2 m n k FLOPs
  double seconds = 0;           // mean time of one matmul
  int64_t count = 1;            // times the shape occurs in one forward (a layer's shapes: L)
  int split = 1;                // the layer's matmuls split this many ways (tp x cp of a shape)
  // 0: one of the model's dense matmuls. ep >= 1: a mixture of experts' expert block at that ep
  // (trainer/moe.h's grouped experts, forward and backward, on the E / ep experts of an ep rank
  // with the rows balanced routing gives each: tokens / split x top-k x ep / E), recorded as
  // count = 3 x local experts products of [m rows, k = hidden] x [k, n = 3 x expert width], so
  // that count x 2 m n k is the block's FLOPs and count x seconds its time.
  int experts_ep = 0;
};

// Least-squares fit of t = alpha + x / beta over samples of one (link, op, group size), x the
// bytes sent (ring_bytes_sent). Needs two distinct sizes; alpha is clamped at 0 (a negative
// intercept is noise) and refitted through the origin then. An Error names what is missing.
Result<AlphaBeta> fit_alpha_beta(const std::vector<CollectiveSample>& samples);

// What the calibration was measured on. Changes when a node is replaced (host), when a node
// gains or loses devices or cores, or when the links between nodes differ.
struct ClusterFingerprint {
  struct Node {
    std::string host;         // as the launcher reached it ("local" for this machine)
    int devices = 1;          // ranks (GPUs, or CPU ranks) the node runs
    std::string device_name;  // "cpu" or the GPU model
    int cores = 0;            // usable CPU cores (0: unknown)
  };
  DeviceKind device = DeviceKind::cpu;
  std::vector<Node> nodes;     // in node order
  std::vector<std::string> links;  // link kinds present: "intra_node", "inter_node"
  // FNV-1a 64 of the canonical JSON, 16 hex digits: the store's key.
  std::string id() const;
  // The same over the device kind and the nodes' hosts and device counts only: what a run
  // records of where it ran (core/store/run_observations.h), so runs and calibrations match.
  std::string node_set_id() const;
};
nlohmann::json to_json(const ClusterFingerprint& f);
Result<ClusterFingerprint> fingerprint_from_json(const nlohmann::json& j);

struct CollectiveFit {
  LinkKind link = LinkKind::intra_node;
  Collective op = Collective::all_reduce;
  int group_size = 2;
  AlphaBeta fit;
  int samples = 0;
  double worst_residual = 0;  // max |measured - fitted| / measured over the samples
};
struct MatmulRate {
  Precision precision = Precision::fp32;
  int threads = 1;
  int ranks_per_node = 1;
  double flops_per_s = 0;  // per rank, while every rank of the node multiplies
  // The matmuls were split this many ways (tp divides their widths, cp their tokens): smaller
  // matrices run below the rate of whole ones, which is what makes tp 4 slow on a CPU.
  int split = 1;
  // 0: the model's dense matmuls. ep >= 1: the experts' block of a mixture of experts at that ep
  // (MatmulSample::experts_ep), forward and backward: few rows per expert (ep 1 on a CPU) run
  // far below the rate of the same FLOPs in a few large products (ep 8).
  int experts_ep = 0;
};

// The calibration's own noise (Calibration::step_drift, step_spread) above which it is no
// longer noise but a broken measurement (a step ten times slower the second time): the
// calibration that measured it is refused, and a stored one is never read with more.
inline constexpr double kMaxStepNoise = 10.0;

struct Calibration {
  ClusterFingerprint fingerprint;
  std::string measured_at;  // ISO 8601 UTC, "2026-11-25T05:00:00Z"
  std::vector<MatmulRate> matmul;
  std::vector<CollectiveFit> collectives;
  // Fraction of the matmul rate a whole training step reaches (norms, softmax, element-wise
  // ops and the optimizer run slower than matmuls). 0: not measured (HardwareModel::efficiency).
  double step_efficiency = 0;
  // Measured over estimated seconds of each term of the time model (core/fit_key.h) in the
  // calibration's own short training steps: a model cut to at most 4 layers, at 1 micro-batch
  // per dp rank and at the run's accumulation on the split (2 to 8), trained on every split
  // tp x cp of a node's ranks and on FSDP inside a node (`meshtrain calibrate`, "split_step"
  // records). A collective alone on an idle group and matmuls alone miss what a step does
  // between them; these factors carry it. Empty: not measured (older calibrations).
  std::vector<FitFactor> step_factors;
  // How far this cluster moves by itself, measured by the split steps (0: not measured, as in
  // calibrations from before): step_drift, the largest |again / first - 1| of the splits the
  // drift check measured twice a minute or more apart; step_spread, the median over the splits of
  // their steps' interquartile range over their median. A prediction made from this calibration
  // cannot sit closer to a run than the cluster sits to itself: step_band() is that floor
  // (docs/estimator.md, "The calibration's own noise").
  double step_drift = 0;
  double step_spread = 0;
  double step_band() const { return step_drift > step_spread ? step_drift : step_spread; }

  // The matmul rate for `precision` with `ranks_per_node` ranks sharing a node: that entry, else
  // the one with the nearest ranks_per_node (scaled by the ratio of ranks: they share the cores).
  // Among those, the entry with the nearest split (tp x cp of the shape).
  std::optional<double> matmul_flops(Precision precision, int ranks_per_node, int split = 1) const;
  // The rate of a mixture of experts' expert block (forward and backward) at `ep`, chosen as
  // matmul_flops chooses (nearest ranks_per_node, then the nearest ep, then the nearest split);
  // nullopt when the calibration measured no expert block (a dense model's, or older).
  std::optional<double> expert_flops(Precision precision, int ranks_per_node, int split, int ep) const;
  // CPU ranks per core when `ranks_per_node` ranks per node (each with the matmuls' intra-op
  // threads) share their machine's cores: nodes that name the same host are one machine, so its
  // ranks are ranks_per_node x its nodes; the busiest machine's ranks x threads / cores, at least
  // 1. 1 on GPUs and when no node's cores are known.
  double cpu_sharing(int ranks_per_node) const;
  // The fit for (link, op) at group size n: that entry, else the nearest group size with alpha
  // scaled by ring_steps(n) / ring_steps(n') (beta is per byte sent, which a ring keeps).
  std::optional<AlphaBeta> collective(LinkKind link, Collective op, int64_t n) const;
};
nlohmann::json to_json(const Calibration& c);
// An Error names the field, the value and what is allowed.
Result<Calibration> calibration_from_json(const nlohmann::json& j);
Result<Calibration> read_calibration_file(const std::string& path);

// Fits the samples into a Calibration: per (link, op, group size) fit_alpha_beta(), per
// (precision, ranks_per_node, threads) the rate of the model's matmuls taken together. Groups with a single
// size are skipped (no fit); an Error only when nothing at all could be fitted.
Result<Calibration> build_calibration(const ClusterFingerprint& fingerprint,
                                      const std::vector<MatmulSample>& matmuls,
                                      const std::vector<CollectiveSample>& collectives,
                                      std::string measured_at);

// "YYYY-MM-DDThh:mm:ssZ" for unix seconds, clamped to 1970-01-01 .. 9999-12-31 (NaN: 1970).
std::string iso_utc(double unix_seconds);

}  // namespace meshwork
