#include "core/fit_key.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/calibration.h"

namespace meshwork {

std::string_view to_string(FitTerm t) {
  switch (t) {
    case FitTerm::compute: return "compute";
    case FitTerm::tp: return "tp";
    case FitTerm::cp_ring: return "cp_ring";
    case FitTerm::fsdp: return "fsdp";
    case FitTerm::dp_replicate: return "dp_replicate";
    case FitTerm::ep: return "ep";
    case FitTerm::expert_fsdp: return "expert_fsdp";
  }
  return "compute";
}

Result<FitTerm> parse_fit_term(std::string_view text, std::string_view field) {
  for (FitTerm t : {FitTerm::compute, FitTerm::tp, FitTerm::cp_ring, FitTerm::fsdp, FitTerm::dp_replicate, FitTerm::ep,
                    FitTerm::expert_fsdp})
    if (text == to_string(t)) return t;
  return Error{std::string(field), std::string(text), "compute, tp, cp_ring, fsdp, dp_replicate, ep or expert_fsdp"};
}

bool FitKey::operator<(const FitKey& o) const {
  return std::tuple(static_cast<int>(term), static_cast<int>(link), a, b, c, static_cast<int>(precision)) <
         std::tuple(static_cast<int>(o.term), static_cast<int>(o.link), o.a, o.b, o.c, static_cast<int>(o.precision));
}

std::string FitKey::to_string() const {
  if (term == FitTerm::compute)
    return "compute " + std::string(meshwork::to_string(precision)) + " tp " + std::to_string(a) + " cp " +
           std::to_string(b) + (c != 1 ? " ep " + std::to_string(c) : "");
  return std::string(meshwork::to_string(term)) + " " + std::string(meshwork::to_string(link)) + " n=" +
         std::to_string(a) + (term == FitTerm::dp_replicate ? (b == kHsdpAllReduce ? " hsdp" : " ddp") : "") +
         (term == FitTerm::tp ? " cp " + std::to_string(b) + " dp_shard " + std::to_string(c) : "");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::optional<TermCorrection> lookup_factor(const std::vector<FitFactor>& factors, const FitKey& key, bool any_link) {
  struct Set {
    std::vector<double> factor, per_step;
    void add(const FitFactor& f) {
      factor.push_back(f.factor);
      per_step.push_back(f.per_step_s);
    }
    TermCorrection median_of() const { return {median(factor), median(per_step)}; }
  };
  Set same_split, same_split_ep, same_link_kind, same_link, other_link;
  for (const FitFactor& f : factors) {
    if (f.key.term != key.term) continue;
    if (f.key == key) return f.correction();
    const bool compute = key.term == FitTerm::compute;
    if (compute && f.key.precision != key.precision) continue;
    other_link.add(f);
    if (f.key.link != key.link) continue;
    same_link.add(f);
    // compute: the same split tp x cp; dp_replicate: the same way of reducing; tp: the same size.
    const bool same_kind = compute ? f.key.a * f.key.b == key.a * key.b
                                   : (key.term == FitTerm::dp_replicate && f.key.b == key.b) ||
                                         (key.term == FitTerm::tp && f.key.a == key.a);
    if (same_kind) same_link_kind.add(f);
    if (compute && f.key.a == key.a && f.key.b == key.b) same_split.add(f);
    if (same_kind && compute && f.key.c == key.c) same_split_ep.add(f);
  }
  // compute: the same split at another ep (a tp x cp shape with ep takes its split's dense
  // factor), then the same tp x cp product at the same ep.
  if (!same_split.factor.empty()) return same_split.median_of();
  if (!same_split_ep.factor.empty()) return same_split_ep.median_of();
  if (!same_link_kind.factor.empty()) return same_link_kind.median_of();
  if (!same_link.factor.empty()) return same_link.median_of();
  if (any_link && !other_link.factor.empty()) return other_link.median_of();
  return std::nullopt;
}

nlohmann::json to_json(const FitFactor& f) {
  nlohmann::json j = {{"term", std::string(to_string(f.key.term))}, {"factor", f.factor}, {"runs", f.runs}};
  if (f.per_step_s != 0) j["per_step_s"] = f.per_step_s;
  if (f.key.term == FitTerm::compute) {
    j["precision"] = std::string(to_string(f.key.precision));
    j["tp"] = f.key.a;
    j["cp"] = f.key.b;
    if (f.key.c != 1) j["ep"] = f.key.c;
  } else {
    j["link"] = std::string(to_string(f.key.link));
    j["group_size"] = f.key.a;
    if (f.key.term == FitTerm::dp_replicate) j["hsdp"] = f.key.b == kHsdpAllReduce;
    if (f.key.term == FitTerm::tp) {
      j["cp"] = f.key.b;
      j["dp_shard"] = f.key.c;
    }
  }
  return j;
}

Result<FitFactor> fit_factor_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return Error{where, j.dump().substr(0, 40), "an object with term and factor"};
  auto text = [&](const char* key) -> Result<std::string> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Error{where + "." + key, it == j.end() ? "(missing)" : it->dump(), "a string"};
    return it->get<std::string>();
  };
  auto integer = [&](const char* key, int min) -> Result<int> {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_integer() || it->get<int64_t>() < min || it->get<int64_t>() > (1 << 20))
      return Error{where + "." + key, it == j.end() ? "(missing)" : it->dump(),
                   "an integer from " + std::to_string(min) + " to " + std::to_string(1 << 20)};
    return static_cast<int>(it->get<int64_t>());
  };
  FitFactor f;
  auto term = text("term");
  if (!term) return term.error();
  auto t = parse_fit_term(*term, where + ".term");
  if (!t) return t.error();
  f.key.term = *t;
  auto factor = j.find("factor");
  if (factor == j.end() || !factor->is_number() || !(factor->get<double>() > 0) || !std::isfinite(factor->get<double>()))
    return Error{where + ".factor", factor == j.end() ? "(missing)" : factor->dump(), "a finite number > 0"};
  f.factor = factor->get<double>();
  if (auto ps = j.find("per_step_s"); ps != j.end()) {
    if (!ps->is_number() || !(ps->get<double>() >= 0) || !std::isfinite(ps->get<double>()))
      return Error{where + ".per_step_s", ps->dump(), "a finite number of seconds >= 0"};
    f.per_step_s = ps->get<double>();
  }
  if (j.contains("runs")) {
    auto runs = integer("runs", 0);
    if (!runs) return runs.error();
    f.runs = *runs;
  }
  if (f.key.term == FitTerm::compute) {
    auto precision = text("precision");
    if (!precision) return precision.error();
    auto p = parse_precision(*precision, where + ".precision");
    if (!p) return p.error();
    f.key.precision = *p;
    auto tp = integer("tp", 1);
    if (!tp) return tp.error();
    auto cp = integer("cp", 1);
    if (!cp) return cp.error();
    f.key.a = *tp;
    f.key.b = *cp;
    if (j.contains("ep")) {
      auto ep = integer("ep", 1);
      if (!ep) return ep.error();
      f.key.c = *ep;
    }
  } else {
    auto link = text("link");
    if (!link) return link.error();
    auto l = parse_link_kind(*link, where + ".link");
    if (!l) return l.error();
    f.key.link = *l;
    auto n = integer("group_size", 2);
    if (!n) return n.error();
    f.key.a = *n;
    if (f.key.term == FitTerm::dp_replicate) {
      auto hsdp = j.find("hsdp");
      if (hsdp != j.end() && !hsdp->is_boolean())
        return Error{where + ".hsdp", hsdp->dump(), "true or false"};
      f.key.b = hsdp != j.end() && hsdp->get<bool>() ? kHsdpAllReduce : kDdpAllReduce;
    }
    if (f.key.term == FitTerm::fsdp) {
      auto efsdp = j.find("efsdp");
      if (efsdp != j.end() && !efsdp->is_boolean())
        return Error{where + ".efsdp", efsdp->dump(), "true or false"};
      if (efsdp != j.end() && efsdp->get<bool>()) f.key.term = FitTerm::expert_fsdp;  // stored before (fit_key.h)
    }
    if (f.key.term == FitTerm::tp) {
      for (auto [field, slot] : {std::pair{"cp", &f.key.b}, std::pair{"dp_shard", &f.key.c}}) {
        if (!j.contains(field)) continue;
        auto v = integer(field, 1);
        if (!v) return v.error();
        *slot = *v;
      }
    }
  }
  return f;
}

}  // namespace meshwork
