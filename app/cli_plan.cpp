// `meshwork plan`: rank every mesh shape for a model on a cluster (core/planner.h).
//
// meshwork plan --model NAME|PATH --nodes N --gpus-per-node G --gpu-memory SIZE --seq-len S
//   --micro-batch B [--global-batch GB] [--precision fp32|bf16]
//   [--activation-checkpointing none|full] [--dp-replicate A] [--dp-shard B] [--cp C] [--tp D]
//   [--device cuda|cpu] [--reserve SIZE] [--json]
// Exit 0: something fits (or the fully given shape fits); 2: invalid input; 3: valid, nothing fits.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "app/commands.h"
#include "core/planner.h"
#include "core/units.h"

namespace meshwork::cli {

namespace {

constexpr const char* kUsage =
    "usage: meshwork plan --model NAME|PATH --nodes N --gpus-per-node G --gpu-memory SIZE\n"
    "                     --seq-len S --micro-batch B [--global-batch GB]\n"
    "                     [--precision fp32|bf16] [--activation-checkpointing none|full]\n"
    "                     [--dp-replicate A] [--dp-shard B] [--cp C] [--tp D]\n"
    "                     [--device cuda|cpu] [--reserve SIZE]\n"
    "                     [--attention fused|materialized] [--json]\n"
    "Ranks every mesh shape (dp_replicate x dp_shard x cp x tp = nodes x gpus-per-node) by\n"
    "whether it fits GPU memory, then by predicted tokens/s. Given axes stay fixed.\n"
    "SIZE: 80GiB, 80GB, 81920MiB. --device cpu estimates CPU ranks (no framework reserve).\n"
    "--attention: fused (flash SDPA, what LibTorch runs on CUDA and CPU; the default) or\n"
    "materialized (an attention that keeps the seq x seq probabilities).\n"
    "Exit 0: a shape fits; 2: invalid input; 3: valid, but nothing fits.\n";

int fail(const Error& e) {
  std::cerr << "meshwork: " << e.message() << "\n";
  return kExitInvalid;
}

// Whole numbers only: "8", not "8.0" or "8x".
std::optional<int64_t> parse_int(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  for (size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return std::nullopt;
  return std::stoll(s);
}

struct Flags {
  std::map<std::string, std::string> values;
  bool json = false;
  bool help = false;
};

const std::map<std::string, bool>& known_flags() {  // name -> takes a value
  static const std::map<std::string, bool> flags = {
      {"--model", true},        {"--nodes", true},      {"--gpus-per-node", true},
      {"--gpu-memory", true},   {"--seq-len", true},    {"--micro-batch", true},
      {"--global-batch", true}, {"--precision", true},  {"--activation-checkpointing", true},
      {"--dp-replicate", true}, {"--dp-shard", true},   {"--cp", true},
      {"--tp", true},           {"--device", true},     {"--reserve", true},
      {"--attention", true},
      {"--json", false},        {"--help", false},      {"-h", false}};
  return flags;
}

Result<Flags> parse_flags(const Args& args) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::optional<std::string> value;
    if (auto eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = known_flags().find(name);
    if (it == known_flags().end())
      return Error{"option", name, "one of the options in `meshwork plan --help`"};
    if (!it->second) {
      if (value) return Error{name, *value, "takes no value"};
      (name == "--json" ? f.json : f.help) = true;
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) return Error{name, "missing", "needs a value"};
      value = args[++i];
    }
    f.values[name] = *value;
  }
  return f;
}

Result<int64_t> int_flag(const Flags& f, const std::string& name, std::optional<int64_t> fallback,
                         int64_t min, const std::string& allowed) {
  auto it = f.values.find(name);
  if (it == f.values.end()) {
    if (fallback) return *fallback;
    return Error{name, "missing", "required: " + allowed};
  }
  auto v = parse_int(it->second);
  if (!v || *v < min || *v > (int64_t{1} << 30)) return Error{name, it->second, allowed};
  return *v;
}

#define TRY_ASSIGN(lhs, expr)              \
  do {                                     \
    auto _r = (expr);                      \
    if (!_r.ok()) return fail(_r.error()); \
    lhs = *_r;                             \
  } while (0)

std::string pad(const std::string& s, size_t width, bool right = true) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

void print_table(const PlanQuery& q, const Plan& plan, std::ostream& out) {
  const int64_t global =
      q.global_batch;  // 0: per shape micro_batch x dp
  out << "Model " << plan.model_name << " (" << format_count(static_cast<double>(plan.model_params))
      << " parameters) on " << q.nodes << " node(s) x " << q.gpus_per_node << " = "
      << plan.world_size << " ranks with " << format_bytes(static_cast<double>(q.device_memory_bytes))
      << " each\n";
  out << "seq_len " << q.seq_len << ", micro_batch " << q.micro_batch << ", global_batch "
      << (global > 0 ? std::to_string(global) : std::string("micro_batch x dp (per shape)")) << ", "
      << to_string(q.precision) << ", activation checkpointing "
      << to_string(q.activation_checkpointing) << ", attention "
      << to_string(q.attention.value_or(default_attention_kernel(q.device))) << "\n\n";
  // GiB columns, or MiB when every total is below 1 GiB (tiny CPU models read 0.0 in GiB).
  int64_t largest = 0;
  for (const PlanEntry& e : plan.shapes) largest = std::max(largest, e.memory.total());
  const bool mib = largest < (int64_t{1} << 30);
  const double unit = mib ? 1024.0 * 1024 : 1024.0 * 1024 * 1024;
  auto mem = [&](int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / unit);
    return std::string(buf);
  };
  out << "Memory per rank in " << (mib ? "MiB" : "GiB")
      << " at its peak: total = params + grads + optim + acts (incl. logits) + bufs (FSDP "
         "gathers, comm) + reserve\n";
  const std::vector<std::pair<std::string, size_t>> cols = {
      {"#", 3},      {"dp_rep", 6}, {"dp_shard", 8}, {"cp", 3},       {"tp", 3},
      {"fits", 5},   {"total", 7},  {"params", 7},   {"grads", 6},    {"optim", 6},
      {"acts", 7},   {"bufs", 6},   {"rsv", 5},      {"step", 10},    {"tokens/s", 10},
      {"MFU", 6},    {"comm", 7}};
  for (const auto& [name, w] : cols) out << pad(name, w) << ' ';
  out << "\n";
  int rank = 0;
  for (const PlanEntry& e : plan.shapes) {
    ++rank;
    const MemoryBreakdown::Peak m = e.memory.at_peak();  // the parts held at the peak
    const double exposed = e.time.comm_s - e.time.hidden_comm_s;
    const double comm_share = e.time.step_s > 0 ? exposed / e.time.step_s : 0;
    const std::vector<std::string> cells = {
        std::to_string(rank),
        std::to_string(e.shape[Axis::dp_replicate]),
        std::to_string(e.shape[Axis::dp_shard]),
        std::to_string(e.shape[Axis::cp]),
        std::to_string(e.shape[Axis::tp]),
        e.fits ? "yes" : "no",
        mem(m.total),
        mem(m.params),
        mem(m.grads),
        mem(m.optimizer),
        mem(m.activations),
        mem(m.buffers),
        mem(m.reserve),
        format_seconds(e.time.step_s),
        format_count(e.time.tokens_per_s),
        format_percent(e.time.mfu),
        format_percent(comm_share)};
    for (size_t i = 0; i < cells.size(); ++i) out << pad(cells[i], cols[i].second) << ' ';
    out << (e.warnings.empty() ? "" : " !") << "\n";
  }
  out << "\nstep: predicted optimizer step; comm: share of the step spent communicating; "
         "! : see warnings\n";
  bool header = false;
  rank = 0;
  for (const PlanEntry& e : plan.shapes) {
    ++rank;
    for (const Diagnostic& d : e.warnings) {
      if (!header) out << "\nWarnings:\n";
      header = true;
      out << "  #" << rank << " (" << e.shape.compact() << ") " << d.text() << "\n";
    }
  }
  out << "\n" << plan.shapes.size() << " valid shape(s)";
  if (!plan.rejected.empty()) out << ", " << plan.rejected.size() << " refused by validation";
  // Planned for meshtrain; say which ones a user taking the shape to Accelerate cannot use.
  std::string refused_by_accelerate;
  for (size_t i = 0; i < plan.shapes.size(); ++i)
    if (!plan.shapes[i].accelerate_refusal.empty())
      refused_by_accelerate += (refused_by_accelerate.empty() ? "#" : ", #") + std::to_string(i + 1);
  if (!refused_by_accelerate.empty())
    out << "; Accelerate would refuse " << refused_by_accelerate << " (tp/cp with pure replication)";
  out << (plan.any_fits() ? "" : "; none fits in memory") << ".\n";
}

}  // namespace

int plan_main(const Args& args) {
  auto flags_r = parse_flags(args);
  if (!flags_r.ok()) return fail(flags_r.error());
  const Flags& flags = *flags_r;
  if (flags.help) {
    std::cout << kUsage;
    return kExitOk;
  }

  PlanQuery q;
  auto model_it = flags.values.find("--model");
  if (model_it == flags.values.end())
    return fail(Error{"--model", "missing", "required: a preset name or a path to a config.json"});
  auto model = load_model_spec(model_it->second);
  if (!model.ok()) {
    Error e = model.error();
    if (e.field == "model") e.field = "--model";
    return fail(e);
  }
  q.model = *model;

  const std::string whole = "a whole number >= 1";
  int64_t v = 0;
  TRY_ASSIGN(v, int_flag(flags, "--nodes", std::nullopt, 1, whole));
  q.nodes = static_cast<int>(v);
  TRY_ASSIGN(v, int_flag(flags, "--gpus-per-node", std::nullopt, 1, whole));
  q.gpus_per_node = static_cast<int>(v);
  if (int64_t{q.nodes} * q.gpus_per_node > (1 << 20))
    return fail(Error{"--nodes", std::to_string(q.nodes),
                      "nodes x gpus-per-node must be at most 1048576"});
  auto mem_it = flags.values.find("--gpu-memory");
  if (mem_it == flags.values.end())
    return fail(Error{"--gpu-memory", "missing", "required: a size such as 80GiB, 80GB or 81920MiB"});
  TRY_ASSIGN(q.device_memory_bytes, parse_size(mem_it->second, "--gpu-memory"));
  TRY_ASSIGN(q.seq_len, int_flag(flags, "--seq-len", std::nullopt, 1, whole));
  TRY_ASSIGN(q.micro_batch, int_flag(flags, "--micro-batch", std::nullopt, 1, whole));
  TRY_ASSIGN(q.global_batch, int_flag(flags, "--global-batch", int64_t{0}, 1, whole));
  if (auto it = flags.values.find("--precision"); it != flags.values.end())
    TRY_ASSIGN(q.precision, parse_precision(it->second, "--precision"));
  if (auto it = flags.values.find("--activation-checkpointing"); it != flags.values.end())
    TRY_ASSIGN(q.activation_checkpointing,
               parse_activation_checkpointing(it->second, "--activation-checkpointing"));
  if (auto it = flags.values.find("--device"); it != flags.values.end())
    TRY_ASSIGN(q.device, parse_device(it->second, "--device"));
  q.hardware = HardwareModel::for_device(q.device);
  if (auto it = flags.values.find("--attention"); it != flags.values.end()) {
    if (it->second == "fused") q.attention = AttentionKernel::fused;
    else if (it->second == "materialized") q.attention = AttentionKernel::materialized;
    else return fail(Error{"--attention", it->second, "fused or materialized"});
  }
  if (auto it = flags.values.find("--reserve"); it != flags.values.end()) {
    if (it->second == "0" || it->second == "0B") {
      q.reserve_bytes = 0;
    } else {
      int64_t r = 0;
      TRY_ASSIGN(r, parse_size(it->second, "--reserve"));
      q.reserve_bytes = r;
    }
  }
  const std::string axis_allowed = "a whole number >= 1 (leave it out to let the planner choose)";
  for (Axis a : kAxes) {
    std::string flag = "--" + std::string(axis_name(a));
    for (char& ch : flag)
      if (ch == '_') ch = '-';
    int64_t size = 0;
    TRY_ASSIGN(size, int_flag(flags, flag, int64_t{0}, 1, axis_allowed));
    q.fixed.set(a, static_cast<int>(size));
  }

  auto plan = make_plan(q);
  if (!plan.ok()) return fail(plan.error());
  if (flags.json) {
    std::cout << plan_to_json(*plan).dump(2) << "\n";
  } else {
    print_table(q, *plan, std::cout);
  }
  return plan->any_fits() ? kExitOk : kExitNoFit;
}

}  // namespace meshwork::cli
