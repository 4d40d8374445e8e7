#include "core/calibration.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

namespace meshwork {

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::send_recv: return "send_recv";
    case Collective::all_to_all: return "all_to_all";
  }
  return "all_reduce";
}

std::string_view to_string(LinkKind l) { return l == LinkKind::inter_node ? "inter_node" : "intra_node"; }

Result<Collective> parse_collective(std::string_view text, std::string_view field) {
  for (Collective c : kCollectives)
    if (text == to_string(c)) return c;
  return Error{std::string(field), std::string(text), "one of all_reduce, all_gather, reduce_scatter, send_recv, all_to_all"};
}

Result<LinkKind> parse_link_kind(std::string_view text, std::string_view field) {
  if (text == "intra_node") return LinkKind::intra_node;
  if (text == "inter_node") return LinkKind::inter_node;
  return Error{std::string(field), std::string(text), "intra_node or inter_node"};
}

// Ring algorithms over n ranks for a tensor of m bytes (Patarasuk & Yuan 2009; NCCL's rings):
//   reduce-scatter: n-1 steps, each sends one chunk of m/n          -> (n-1)/n m sent
//   all-gather:     the same in reverse                              -> (n-1)/n m sent
//   all-reduce:     a reduce-scatter then an all-gather: 2(n-1) steps -> 2(n-1)/n m sent
//   send/recv:      one message of m bytes (each rank sends and receives at once)
//   all-to-all:     a block of m/n to each of the n-1 others (pairwise) -> (n-1)/n m sent
double ring_bytes_sent(Collective c, double m, int64_t n) {
  if (c == Collective::send_recv) return m;
  if (n <= 1) return 0;
  const double share = m * static_cast<double>(n - 1) / static_cast<double>(n);
  return c == Collective::all_reduce ? 2 * share : share;
}

int64_t ring_steps(Collective c, int64_t n) {
  if (c == Collective::send_recv) return 1;
  if (n <= 1) return 0;
  return c == Collective::all_reduce ? 2 * (n - 1) : n - 1;
}

// Least squares of t = a + b x (b = 1/beta) in relative terms: the sizes span four orders of
// magnitude, and an ordinary fit would be decided by the largest messages alone (a latency
// error of 100 % at 4 KiB costs it nothing). Weighting each sample by w = 1/t^2 minimizes
// sum ((t - a - b x) / t)^2, the squared relative errors:
//   x_m = sum w x / sum w,  t_m = sum w t / sum w,
//   b = sum w (x - x_m)(t - t_m) / sum w (x - x_m)^2,   a = t_m - b x_m.
// A negative a (noise around a tiny latency) is not a latency: then a = 0 and the fit through
// the origin minimizes sum w (t - b x)^2, giving b = sum w x t / sum w x^2.
Result<AlphaBeta> fit_alpha_beta(const std::vector<CollectiveSample>& samples) {
  if (samples.empty()) return Error{"samples", "0", "at least two message sizes"};
  std::vector<double> xs, ws;
  double sw = 0, xm = 0, tm = 0;
  for (const CollectiveSample& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds))
      return Error{"seconds", std::to_string(s.seconds), "a time > 0"};
    xs.push_back(ring_bytes_sent(s.op, s.bytes, s.group_size));
    ws.push_back(1.0 / (s.seconds * s.seconds));
    sw += ws.back();
    xm += ws.back() * xs.back();
    tm += ws.back() * s.seconds;
  }
  xm /= sw;
  tm /= sw;
  double sxx = 0, sxt = 0, x2 = 0, xt = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    sxx += ws[i] * (xs[i] - xm) * (xs[i] - xm);
    sxt += ws[i] * (xs[i] - xm) * (samples[i].seconds - tm);
    x2 += ws[i] * xs[i] * xs[i];
    xt += ws[i] * xs[i] * samples[i].seconds;
  }
  const bool one_size = std::all_of(xs.begin(), xs.end(), [&](double x) { return x == xs.front(); });
  if (one_size || !(sxx > 0))
    return Error{"samples", std::to_string(samples.size()) + " at one size", "at least two message sizes"};
  double b = sxt / sxx, a = tm - b * xm;
  if (a < 0) {
    a = 0;
    b = xt / x2;
  }
  if (!(b > 0))
    return Error{"samples", to_string(samples.front().op).data(),
                 "time must grow with the message size (no bandwidth could be fitted)"};
  return AlphaBeta{a, 1.0 / b};
}

namespace {
// FNV-1a, 64 bit (Fowler, Noll, Vo): h = (h xor byte) * 1099511628211 from 14695981039346656037.
std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}
}  // namespace

std::string ClusterFingerprint::id() const { return fnv1a_hex(to_json(*this).dump()); }

std::string ClusterFingerprint::node_set_id() const {
  nlohmann::json nodes_json = nlohmann::json::array();
  for (const auto& n : nodes) nodes_json.push_back({{"host", n.host}, {"devices", n.devices}});
  return fnv1a_hex(nlohmann::json{{"device", std::string(to_string(device))}, {"nodes", nodes_json}}.dump());
}

nlohmann::json to_json(const ClusterFingerprint& f) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : f.nodes)
    nodes.push_back({{"host", n.host}, {"devices", n.devices}, {"device_name", n.device_name}, {"cores", n.cores}});
  return {{"device", std::string(to_string(f.device))}, {"nodes", nodes}, {"links", f.links}};
}

namespace {

// Reads `key` of object `j` as T, or an Error naming `where.key`.
template <class T>
Status read(const nlohmann::json& j, const char* key, T& out, const std::string& where) {
  const std::string field = where.empty() ? key : where + "." + key;
  if (!j.is_object() || !j.contains(key)) return Error{field, "(missing)", "required"};
  const nlohmann::json& v = j.at(key);
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return Error{field, v.dump(), "a string"};
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return Error{field, v.dump(), "a whole number"};
  } else {
    if (!v.is_number()) return Error{field, v.dump(), "a number"};
  }
  out = v.get<T>();
  return Status::Ok();
}

// An optional whole number of `j` in [min, INT32_MAX] (absent: `fallback`), or an Error naming
// where.key. A fraction or a value past int is refused, never converted (a fuzz find: a split of
// 1.67e17 converted to int is undefined behaviour).
Status read_optional_int(const nlohmann::json& j, const char* key, int fallback, int min, int& out,
                         const std::string& where) {
  out = fallback;
  if (!j.is_object() || !j.contains(key)) return Status::Ok();
  const std::string field = where.empty() ? key : where + "." + key;
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > INT32_MAX ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)))
    return Error{field, v.dump(), "a whole number >= " + std::to_string(min)};
  out = static_cast<int>(v.get<int64_t>());
  return Status::Ok();
}

// An optional number of `j` (absent: `fallback`), or an Error naming where.key.
Status read_optional_number(const nlohmann::json& j, const char* key, double fallback, double& out,
                            const std::string& where) {
  out = fallback;
  if (!j.is_object() || !j.contains(key)) return Status::Ok();
  const nlohmann::json& v = j.at(key);
  if (!v.is_number()) return Error{where.empty() ? key : where + "." + key, v.dump(), "a number"};
  out = v.get<double>();
  return Status::Ok();
}

Result<DeviceKind> parse_device(const std::string& s, const std::string& field) {
  if (s == "cpu") return DeviceKind::cpu;
  if (s == "cuda") return DeviceKind::cuda;
  return Error{field, s, "cpu or cuda"};
}

}  // namespace

Result<ClusterFingerprint> fingerprint_from_json(const nlohmann::json& j) {
  ClusterFingerprint f;
  std::string device;
  if (Status s = read(j, "device", device, "fingerprint"); !s) return s.error();
  auto d = parse_device(device, "fingerprint.device");
  if (!d) return d.error();
  f.device = *d;
  if (!j.contains("nodes") || !j["nodes"].is_array() || j["nodes"].empty())
    return Error{"fingerprint.nodes", j.value("nodes", nlohmann::json()).dump(), "a non-empty list of nodes"};
  for (size_t i = 0; i < j["nodes"].size(); ++i) {
    const std::string where = "fingerprint.nodes[" + std::to_string(i) + "]";
    ClusterFingerprint::Node n;
    const auto& jn = j["nodes"][i];
    for (Status s : {read(jn, "host", n.host, where), read(jn, "devices", n.devices, where),
                     read(jn, "device_name", n.device_name, where), read(jn, "cores", n.cores, where)})
      if (!s) return s.error();
    f.nodes.push_back(n);
  }
  if (j.contains("links")) {
    if (!j["links"].is_array()) return Error{"fingerprint.links", j["links"].dump(), "a list of link kinds"};
    for (const auto& l : j["links"]) {
      if (!l.is_string() || !parse_link_kind(l.get<std::string>()).ok())
        return Error{"fingerprint.links", l.dump(), "intra_node or inter_node"};
      f.links.push_back(l.get<std::string>());
    }
  }
  return f;
}

namespace {

// The entry of `rates` nearest (ranks per node, ep, split) among those of `precision` and of the
// dense matmuls (want_ep = 0) or an expert block (want_ep >= 1), scaled as matmul_flops says.
std::optional<double> nearest_rate(const Calibration& c, Precision precision, int ranks_per_node, int split,
                                   int want_ep) {
  const MatmulRate* best = nullptr;
  auto distance = [&](const MatmulRate& r) {
    return std::make_tuple(std::abs(r.ranks_per_node - ranks_per_node), std::abs(r.experts_ep - want_ep),
                           std::abs(r.split - split));
  };
  for (const MatmulRate& r : c.matmul) {
    if (r.precision != precision || !(r.flops_per_s > 0) || (r.experts_ep > 0) != (want_ep > 0)) continue;
    if (!best || distance(r) < distance(*best)) best = &r;
  }
  if (!best) return std::nullopt;
  // Ranks of a node share its cores (CPU) or, on GPUs, have one device each (ranks_per_node
  // changes nothing there as long as every rank has its own device). Scaling by the ratio of
  // ranks is the CPU case; on CUDA the rate is per device and kept.
  if (c.fingerprint.device == DeviceKind::cuda || best->ranks_per_node == ranks_per_node) return best->flops_per_s;
  return best->flops_per_s * best->ranks_per_node / std::max(1, ranks_per_node);
}

}  // namespace

std::optional<double> Calibration::matmul_flops(Precision precision, int ranks_per_node, int split) const {
  return nearest_rate(*this, precision, ranks_per_node, split, 0);
}

std::optional<double> Calibration::expert_flops(Precision precision, int ranks_per_node, int split, int ep) const {
  return nearest_rate(*this, precision, ranks_per_node, split, std::max(1, ep));
}

double Calibration::cpu_sharing(int ranks_per_node) const {
  if (fingerprint.device != DeviceKind::cpu) return 1.0;
  // Nodes that name the same host are one machine (network namespaces or containers on it): its
  // cores serve the ranks of all of them. Per machine: its nodes and the fewest cores they saw.
  std::map<std::string, std::pair<int, int>> machines;  // host -> (nodes, cores)
  for (size_t i = 0; i < fingerprint.nodes.size(); ++i) {
    const ClusterFingerprint::Node& n = fingerprint.nodes[i];
    if (n.cores <= 0) continue;
    auto& [nodes, cores] = machines[n.host.empty() ? "#" + std::to_string(i) : n.host];
    nodes += 1;
    cores = cores == 0 ? n.cores : std::min(cores, n.cores);
  }
  if (machines.empty()) return 1.0;
  int threads = 1;
  for (const MatmulRate& r : matmul) threads = std::max(threads, r.threads);
  double sharing = 1.0;
  for (const auto& [host, m] : machines)
    sharing = std::max(sharing, static_cast<double>(ranks_per_node) * m.first * threads / m.second);
  return sharing;
}

std::optional<AlphaBeta> Calibration::collective(LinkKind link, Collective op, int64_t n) const {
  const CollectiveFit* best = nullptr;
  for (const CollectiveFit& f : collectives) {
    if (f.link != link || f.op != op || !(f.fit.bytes_per_s > 0)) continue;
    if (!best || std::llabs(f.group_size - n) < std::llabs(best->group_size - n)) best = &f;
  }
  if (!best) return std::nullopt;
  AlphaBeta ab = best->fit;
  if (best->group_size != n && ring_steps(op, best->group_size) > 0)
    ab.latency_s *= static_cast<double>(ring_steps(op, n)) / static_cast<double>(ring_steps(op, best->group_size));
  return ab;
}

nlohmann::json to_json(const Calibration& c) {
  nlohmann::json mm = nlohmann::json::array(), co = nlohmann::json::array(), factors = nlohmann::json::array();
  for (const FitFactor& f : c.step_factors) factors.push_back(to_json(f));
  for (const MatmulRate& r : c.matmul) {
    mm.push_back({{"precision", std::string(to_string(r.precision))}, {"threads", r.threads},
                  {"ranks_per_node", r.ranks_per_node}, {"split", r.split}, {"flops_per_s", r.flops_per_s}});
    if (r.experts_ep > 0) mm.back()["experts_ep"] = r.experts_ep;
  }
  for (const CollectiveFit& f : c.collectives)
    co.push_back({{"link", std::string(to_string(f.link))}, {"op", std::string(to_string(f.op))},
                  {"group_size", f.group_size}, {"latency_s", f.fit.latency_s},
                  {"bytes_per_s", f.fit.bytes_per_s}, {"samples", f.samples},
                  {"worst_residual", f.worst_residual}});
  return {{"v", 1},
          {"fingerprint", to_json(c.fingerprint)},
          {"fingerprint_id", c.fingerprint.id()},
          {"measured_at", c.measured_at},
          {"step_efficiency", c.step_efficiency},
          {"matmul", mm},
          {"collectives", co},
          {"step_factors", factors},
          {"step_noise", {{"drift", c.step_drift}, {"spread", c.step_spread}}}};
}

Result<Calibration> calibration_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error{"calibration", j.dump().substr(0, 40), "a JSON object"};
  if (!j.contains("v") || !j["v"].is_number_integer() || j["v"].get<int64_t>() != 1)
    return Error{"v", j.value("v", nlohmann::json()).dump(), "1"};
  Calibration c;
  if (!j.contains("fingerprint")) return Error{"fingerprint", "(missing)", "required"};
  auto f = fingerprint_from_json(j["fingerprint"]);
  if (!f) return f.error();
  c.fingerprint = *f;
  if (Status s = read(j, "measured_at", c.measured_at, ""); !s) return s.error();
  if (j.contains("step_efficiency"))
    if (Status s = read(j, "step_efficiency", c.step_efficiency, ""); !s) return s.error();
  if (c.step_efficiency < 0 || c.step_efficiency > 1)
    return Error{"step_efficiency", std::to_string(c.step_efficiency), "between 0 and 1 (0: not measured)"};
  for (const char* list : {"matmul", "collectives"})
    if (!j.contains(list) || !j[list].is_array()) return Error{list, "(missing)", "a list"};
  for (size_t i = 0; i < j["matmul"].size(); ++i) {
    const std::string where = "matmul[" + std::to_string(i) + "]";
    const auto& e = j["matmul"][i];
    MatmulRate r;
    std::string precision;
    for (Status s : {read(e, "precision", precision, where), read(e, "threads", r.threads, where),
                     read(e, "ranks_per_node", r.ranks_per_node, where), read(e, "flops_per_s", r.flops_per_s, where)})
      if (!s) return s.error();
    auto p = parse_precision(precision, where + ".precision");
    if (!p) return p.error();
    r.precision = *p;
    if (!(r.flops_per_s > 0)) return Error{where + ".flops_per_s", std::to_string(r.flops_per_s), "> 0"};
    if (Status st = read_optional_int(e, "split", 1, 1, r.split, where); !st) return st.error();
    if (Status st = read_optional_int(e, "experts_ep", 0, 0, r.experts_ep, where); !st) return st.error();
    c.matmul.push_back(r);
  }
  for (size_t i = 0; i < j["collectives"].size(); ++i) {
    const std::string where = "collectives[" + std::to_string(i) + "]";
    const auto& e = j["collectives"][i];
    CollectiveFit f;
    std::string link, op;
    for (Status s : {read(e, "link", link, where), read(e, "op", op, where), read(e, "group_size", f.group_size, where),
                     read(e, "latency_s", f.fit.latency_s, where), read(e, "bytes_per_s", f.fit.bytes_per_s, where)})
      if (!s) return s.error();
    auto l = parse_link_kind(link, where + ".link");
    if (!l) return l.error();
    auto o = parse_collective(op, where + ".op");
    if (!o) return o.error();
    f.link = *l;
    f.op = *o;
    if (f.group_size < 2) return Error{where + ".group_size", std::to_string(f.group_size), "at least 2"};
    if (!(f.fit.bytes_per_s > 0)) return Error{where + ".bytes_per_s", std::to_string(f.fit.bytes_per_s), "> 0"};
    if (f.fit.latency_s < 0) return Error{where + ".latency_s", std::to_string(f.fit.latency_s), ">= 0"};
    if (Status st = read_optional_int(e, "samples", 0, 0, f.samples, where); !st) return st.error();
    if (Status st = read_optional_number(e, "worst_residual", 0.0, f.worst_residual, where); !st) return st.error();
    c.collectives.push_back(f);
  }
  if (j.contains("step_factors")) {
    if (!j["step_factors"].is_array()) return Error{"step_factors", j["step_factors"].dump().substr(0, 40), "a list"};
    for (size_t i = 0; i < j["step_factors"].size(); ++i) {
      auto f = fit_factor_from_json(j["step_factors"][i], "step_factors[" + std::to_string(i) + "]");
      if (!f) return f.error();
      c.step_factors.push_back(*f);
    }
  }
  if (j.contains("step_noise")) {
    // Optional (older calibrations): relative shares, 0 = not measured; above kMaxStepNoise a
    // broken measurement, which calibration_from_records() never makes.
    const nlohmann::json& noise = j["step_noise"];
    if (!noise.is_object()) return Error{"step_noise", noise.dump().substr(0, 40), "an object {drift, spread}"};
    for (auto [key, out] : {std::pair<const char*, double*>{"drift", &c.step_drift}, {"spread", &c.step_spread}}) {
      if (Status st = read_optional_number(noise, key, 0.0, *out, "step_noise"); !st) return st.error();
      if (!std::isfinite(*out) || *out < 0 || *out > kMaxStepNoise)
        return Error{std::string("step_noise.") + key, std::to_string(*out),
                     "a share from 0 to " + std::to_string(static_cast<int>(kMaxStepNoise)) + " (0: not measured)"};
    }
  }
  return c;
}

Result<Calibration> read_calibration_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"--calibration", path, "a readable calibration JSON file"}.as(ErrorKind::io);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"--calibration", path, "valid JSON (a calibration file)"};
  auto c = calibration_from_json(j);
  if (!c) {
    Error e = c.error();
    e.field = "--calibration: " + path + ": " + e.field;
    return e;
  }
  return c;
}

Result<Calibration> build_calibration(const ClusterFingerprint& fingerprint,
                                      const std::vector<MatmulSample>& matmuls,
                                      const std::vector<CollectiveSample>& collectives,
                                      std::string measured_at) {
  Calibration c;
  c.fingerprint = fingerprint;
  c.measured_at = std::move(measured_at);
  // Matmuls: per (precision, ranks_per_node, threads, split, experts_ep) the rate of the model's
  // matmuls taken together, sum count x 2 m n k / sum count x seconds over shapes and ranks (a
  // forward's time is the sum of its matmuls' times; each shape weighs as often as the model
  // multiplies it); an expert block's samples apart from the dense matmuls, per ep.
  std::map<std::tuple<int, int, int, int, int>, std::pair<double, double>> mm;  // flops, seconds
  for (const MatmulSample& s : matmuls) {
    if (!(s.seconds > 0)) continue;
    auto& acc = mm[{static_cast<int>(s.precision), s.ranks_per_node, s.threads, s.split, s.experts_ep}];
    const double count = static_cast<double>(std::max<int64_t>(1, s.count));
    acc.first += count * 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
    acc.second += count * s.seconds;
  }
  for (const auto& [key, acc] : mm)
    if (const double rate = acc.first / acc.second; rate > 0 && std::isfinite(rate))
      c.matmul.push_back({static_cast<Precision>(std::get<0>(key)), std::get<2>(key), std::get<1>(key), rate,
                          std::get<3>(key), std::get<4>(key)});
  std::map<std::tuple<int, int, int>, std::vector<CollectiveSample>> groups;
  for (const CollectiveSample& s : collectives)
    groups[{static_cast<int>(s.link), static_cast<int>(s.op), s.group_size}].push_back(s);
  for (const auto& [key, samples] : groups) {
    auto fit = fit_alpha_beta(samples);
    // A fit a calibration file could not hold (samples at the limits of a double) is no fit.
    if (!fit || !(fit->bytes_per_s > 0) || !std::isfinite(fit->bytes_per_s) || !(fit->latency_s >= 0) ||
        !std::isfinite(fit->latency_s))
      continue;
    CollectiveFit f;
    f.link = static_cast<LinkKind>(std::get<0>(key));
    f.op = static_cast<Collective>(std::get<1>(key));
    f.group_size = std::get<2>(key);
    f.fit = *fit;
    f.samples = static_cast<int>(samples.size());
    for (const CollectiveSample& s : samples)
      f.worst_residual = std::max(
          f.worst_residual, std::abs(f.fit.seconds(ring_bytes_sent(s.op, s.bytes, s.group_size)) - s.seconds) / s.seconds);
    if (!std::isfinite(f.worst_residual)) continue;
    c.collectives.push_back(f);
  }
  if (c.matmul.empty() && c.collectives.empty())
    return Error{"calibration", std::to_string(matmuls.size() + collectives.size()) + " samples",
                 "at least one timed matmul or one collective at two message sizes"};
  return c;
}

std::string iso_utc(double unix_seconds) {
  // Record times come from remote ranks: anything outside 1970 .. 9999 (or not a number) is
  // clamped to that range before the conversion (a fuzz find: 1.8e83 converted to time_t).
  constexpr double kLast = 253402300799.0;  // 9999-12-31T23:59:59Z
  if (!(unix_seconds >= 0)) unix_seconds = 0;
  if (unix_seconds > kLast) unix_seconds = kLast;
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace meshwork
