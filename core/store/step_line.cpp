#include "core/store/step_line.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <type_traits>

namespace meshwork::store {

namespace {

struct Cursor {
  const char* p;
  const char* end;
  void ws() {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) ++p;
  }
  bool eat(char c) {
    ws();
    if (p < end && *p == c) {
      ++p;
      return true;
    }
    return false;
  }
  // A string without escapes.
  bool str(std::string_view& out) {
    if (!eat('"')) return false;
    const char* q = static_cast<const char*>(std::memchr(p, '"', static_cast<size_t>(end - p)));
    if (!q || std::memchr(p, '\\', static_cast<size_t>(q - p))) return false;
    out = std::string_view(p, static_cast<size_t>(q - p));
    p = q + 1;
    return true;
  }
  // JSON numbers only: from_chars also takes "inf", "nan" and leading zeros, JSON does not.
  bool json_number_start() const {
    const char* q = p;
    if (q < end && *q == '-') ++q;
    if (q >= end || *q < '0' || *q > '9') return false;
    return !(*q == '0' && q + 1 < end && q[1] >= '0' && q[1] <= '9');
  }
  bool num(double& out) {
    ws();
    if (!json_number_start()) return false;
    auto r = std::from_chars(p, end, out);
    if (r.ec != std::errc()) return false;
    // JSON wants a digit after the point; from_chars also takes "0." and "1.e5" (the fuzzer
    // found the fast path accepting a line core refuses).
    if (const void* dot = std::memchr(p, '.', static_cast<size_t>(r.ptr - p))) {
      const char* after = static_cast<const char*>(dot) + 1;
      if (after >= r.ptr || *after < '0' || *after > '9') return false;
    }
    p = r.ptr;
    return true;
  }
  // An integer written as one (JSON "8192", not "8192.0" or "8.192e3": those go the slow way).
  bool integer(int64_t& out) {
    ws();
    if (!json_number_start()) return false;
    auto r = std::from_chars(p, end, out);
    if (r.ec != std::errc() || (r.ptr < end && (*r.ptr == '.' || *r.ptr == 'e' || *r.ptr == 'E')))
      return false;
    p = r.ptr;
    return true;
  }
};

template <class F>
bool object(Cursor& c, F&& member) {
  if (!c.eat('{')) return false;
  if (c.eat('}')) return true;
  for (;;) {
    std::string_view key;
    if (!c.str(key) || !c.eat(':') || !member(key)) return false;
    if (c.eat(',')) continue;
    return c.eat('}');
  }
}

}  // namespace

std::optional<StepRecord> parse_step_line(std::string_view line) {
  Cursor c{line.data(), line.data() + line.size()};
  StepRecord r;
  bool have_v = false, have_type = false, have_step = false, have_rank = false;
  auto dbl = [&](double& out) { return c.num(out); };
  auto i64 = [&](int64_t& out) { return c.integer(out); };
  const bool ok = object(c, [&](std::string_view key) -> bool {
    if (key == "v") {
      int64_t v = 0;
      have_v = c.integer(v) && v == kMetricsVersion;
      return have_v;
    }
    if (key == "type") {
      std::string_view t;
      have_type = c.str(t) && t == "step";
      return have_type;
    }
    if (key == "step") return have_step = i64(r.step);
    if (key == "rank") {
      int64_t rank = 0;
      if (!i64(rank) || rank < INT32_MIN || rank > INT32_MAX) return false;
      r.rank = static_cast<int>(rank);
      return have_rank = true;
    }
    bool known = false, read = false;
    for_each_field(r, kStepScalars, [&](const char* name, auto& member) {
      if (known || key != name) return;
      known = true;
      if constexpr (std::is_same_v<std::decay_t<decltype(member)>, double>) read = dbl(member);
      else read = i64(member);
    });
    if (known) return read;
    if (key == "cpu_s") {
      double cpu = 0;
      if (!dbl(cpu)) return false;
      r.cpu_s = cpu;
      return true;
    }
    if (key == "comm_s")
      return object(c, [&](std::string_view axis) -> bool {
        if (axis == kEpName) return dbl(r.comm_ep_s);
        std::optional<Axis> a = axis_from_name(axis);
        if (!a || axis != axis_name(*a)) return false;  // only the exact spelling
        return dbl(r.comm_s[*a]);
      });
    return false;  // anything else: let core's parser decide
  });
  c.ws();
  if (!ok || c.p != c.end || !have_v || !have_type || !have_step || !have_rank) return std::nullopt;
  return r;
}

std::array<double, kStepSeries> step_values(const StepRecord& r) {
  // Same order as step_series_keys() (checked at Ingester start and in the tests).
  return {r.loss,         r.lr,          r.grad_norm,  static_cast<double>(r.tokens),
          r.tokens_per_s, r.tflops,      r.mfu,        static_cast<double>(r.mem_bytes),
          static_cast<double>(r.mem_peak_bytes),
          r.comm_s[Axis::dp_replicate], r.comm_s[Axis::dp_shard],
          r.comm_s[Axis::cp], r.comm_s[Axis::tp], r.compute_s, r.step_s, r.comm_s[Axis::pp],
          r.comm_ep_s, r.cpu_s.value_or(std::numeric_limits<double>::quiet_NaN())};
}

}  // namespace meshwork::store
