#include "remote/slurm_parsers.h"

#include <algorithm>
#include <cmath>
#include <cctype>

#include <nlohmann/json.hpp>

#include "remote/parse_util.h"
#include "remote/probe_parsers.h"

namespace meshwork::remote {

namespace {

// Counts read from Slurm's output (nodes, CPUs, GPUs, restarts) as ints: clamped to [0, 2^24],
// far above any cluster's, so a garbled field can neither wrap an int nor overflow a sum.
constexpr long long kMaxCount = 1 << 24;
int count_of(std::optional<long long> v, int fallback) {
  if (!v) return fallback;
  return static_cast<int>(std::clamp<long long>(*v, 0, kMaxCount));
}
int count_of(std::optional<double> v) {
  if (!v || !(*v >= 0)) return 0;  // NaN and negatives: unknown
  return static_cast<int>(std::min<double>(*v, kMaxCount));
}
void add_count(int& sum, int v) { sum = static_cast<int>(std::min<long long>(kMaxCount, static_cast<long long>(sum) + v)); }

}  // namespace

using namespace detail;

SlurmGpus parse_gres_gpus(const std::string& gres) {
  // Entries are comma separated, but a socket list "(S:0,1)" may hold commas too: split outside
  // parentheses only.
  SlurmGpus out;
  std::vector<std::string> entries;
  std::string cur;
  int depth = 0;
  for (char c : gres) {
    if (c == '(') ++depth;
    if (c == ')') depth = std::max(0, depth - 1);
    if (c == ',' && depth == 0) {
      entries.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  entries.push_back(cur);
  for (std::string e : entries) {
    e = std::string(trim(e));
    if (const auto p = e.find('('); p != std::string::npos) e = e.substr(0, p);  // "(S:0-1)", "(IDX:0-3)"
    if (starts_with(e, "gres/")) e = e.substr(5);
    const auto f = split(e, ':');
    if (f.empty() || f[0] != "gpu") continue;
    // gpu | gpu:N | gpu:TYPE | gpu:TYPE:N
    int count = 1;
    std::string type;
    if (f.size() == 2) {
      if (auto n = to_int(f[1])) {
        count = count_of(n, 1);
      } else {
        type = f[1];
      }
    } else if (f.size() >= 3) {
      type = f[1];
      count = count_of(to_int(f[2]), 1);
    }
    add_count(out.count, count);
    if (!type.empty()) out.type += (out.type.empty() ? "" : "+") + type;
  }
  return out;
}

int SlurmPartition::idle_nodes() const {
  int n = 0;
  for (const auto& [state, count] : node_states) {
    if (starts_with(state, "idle")) add_count(n, count);
  }
  return n;
}

Result<std::vector<SlurmPartition>> parse_sinfo(const std::string& text) {
  std::vector<SlurmPartition> out;
  for (const std::string& raw : split_lines(text)) {
    const std::string line(trim(raw));
    if (line.empty()) continue;
    const auto f = split(line, '|');
    if (f.size() < 9) {
      return Error{"sinfo", line.substr(0, 120),
                   std::string("expected 9 '|' separated fields (") + kSinfoFormat + ")"}.as(ErrorKind::remote);
    }
    if (f[0] == "PARTITION") continue;  // a header, if -h was not honoured
    std::string name(trim(f[0]));
    bool is_default = false;
    if (!name.empty() && name.back() == '*') {
      is_default = true;
      name.pop_back();
    }
    auto it = std::find_if(out.begin(), out.end(), [&](const SlurmPartition& p) { return p.name == name; });
    const bool fresh = it == out.end();
    if (fresh) {
      out.push_back(SlurmPartition{});
      it = std::prev(out.end());
      it->name = name;
      it->time_limit = std::string(trim(f[2]));
      it->node_list = std::string(trim(f[8]));
      it->up = trim(f[1]) == "up";
    }
    it->is_default = it->is_default || is_default;
    const int nodes = count_of(to_int(f[3]), 0);
    add_count(it->nodes, nodes);
    add_count(it->node_states[std::string(trim(f[4]))], nodes);
    if (!fresh) it->node_list += "," + std::string(trim(f[8]));
    // %c may read "2+" when nodes differ; the leading number is the smallest.
    const int cpus = count_of(leading_number(f[5]));
    // Memory in MB: clamped below 2^53 (the double's exact range) before the conversion.
    const double mem_mb = leading_number(f[6]).value_or(0);
    const long long mem = mem_mb >= 0 ? static_cast<long long>(std::min(mem_mb, 9.0e15)) : 0;
    const SlurmGpus gpus = parse_gres_gpus(std::string(trim(f[7])));
    if (fresh || cpus < it->cpus_per_node) it->cpus_per_node = cpus;
    if (fresh || mem < it->memory_mb_per_node) it->memory_mb_per_node = mem;
    if (fresh || gpus.count < it->gpus_per_node.count) it->gpus_per_node = gpus;
  }
  return out;
}

bool SlurmJob::active() const {
  static const char* kActive[] = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED",
                                  "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING",
                                  "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD"};
  for (const char* s : kActive) {
    if (state == s) return true;
  }
  return state.empty();  // unknown: assume it may still run
}

std::map<std::string, std::string> parse_scontrol_record(const std::string& record) {
  // "Key=Value Key2=Value with no spaces ...": a value runs to the next " Key=" (a word that
  // holds '=' before any '/'), so values with spaces (Command=, Reason=) stay whole.
  std::map<std::string, std::string> out;
  const std::vector<std::string> w = words(record);
  std::string key;
  for (const std::string& word : w) {
    // A key: a letter, then letters, digits, '_', ':' or '/' ("AllocNode:Sid", "CPUs/Task").
    const auto eq = word.find('=');
    bool starts_pair = eq != std::string::npos && eq > 0 && std::isalpha(static_cast<unsigned char>(word[0]));
    for (size_t k = 0; starts_pair && k < eq; ++k) {
      const char c = word[k];
      starts_pair = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '/';
    }
    if (starts_pair) {
      key = word.substr(0, eq);
      out[key] = word.substr(eq + 1);
    } else if (!key.empty()) {
      out[key] += " " + word;
    }
  }
  return out;
}

namespace {



std::string none_to_empty(std::string s) {
  if (s == "None" || s == "(null)" || s == "N/A") return {};
  return s;
}

}  // namespace

Result<std::vector<SlurmJob>> parse_scontrol_jobs(const std::string& text) {
  std::vector<SlurmJob> out;
  // Records start at "JobId=" (multi-line form: a blank line between records; -o: one a line).
  std::vector<std::string> records;
  size_t pos = 0;
  while ((pos = text.find("JobId=", pos)) != std::string::npos) {
    const size_t next = text.find("JobId=", pos + 6);
    records.push_back(text.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    pos = next == std::string::npos ? text.size() : next;
  }
  for (const std::string& rec : records) {
    const auto kv = parse_scontrol_record(rec);
    SlurmJob j;
    auto get = [&](const char* k) {
      auto it = kv.find(k);
      return it == kv.end() ? std::string() : it->second;
    };
    j.id = get("JobId");
    j.name = get("JobName");
    j.state = get("JobState");
    j.reason = none_to_empty(get("Reason"));
    j.exit_code = get("ExitCode");
    j.partition = get("Partition");
    j.node_list = none_to_empty(get("NodeList"));
    j.time_limit = get("TimeLimit");
    j.std_out = get("StdOut");
    j.restarts = count_of(to_int(get("Restarts")), 0);
    j.source = "scontrol";
    if (!j.id.empty()) out.push_back(std::move(j));
  }
  if (out.empty() && !std::string(trim(text)).empty()) {
    return Error{"scontrol show job", std::string(trim(text)).substr(0, 200), "is not a job record"}.as(
        ErrorKind::remote);
  }
  return out;
}

namespace {

// 23.11+ writes numbers as {"set": bool, "infinite": bool, "number": N}.
std::optional<long long> json_number(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_number()) {  // a float: only one an integer can hold (1e300 is not a count)
    const double d = v.get<double>();
    if (!(std::abs(d) < 9.0e15)) return std::nullopt;
    return static_cast<long long>(d);
  }
  if (v.is_object()) {
    if (v.contains("infinite") && v["infinite"].is_boolean() && v["infinite"].get<bool>()) return std::nullopt;
    if (v.contains("set") && v["set"].is_boolean() && !v["set"].get<bool>()) return std::nullopt;
    if (v.contains("number")) return json_number(v["number"]);
  }
  return std::nullopt;
}

std::string json_text(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return {};
  const auto& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && !v.empty() && v[0].is_string()) return v[0].get<std::string>();  // 24.11 state lists
  if (auto n = json_number(v)) return std::to_string(*n);
  return {};
}

std::string minutes_text(std::optional<long long> minutes, bool infinite) {
  if (infinite) return "UNLIMITED";
  if (!minutes) return {};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:00", *minutes / 60, *minutes % 60);
  return buf;
}

}  // namespace

Result<std::vector<SlurmJob>> parse_squeue_json(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Error{"squeue --json", std::string(trim(text)).substr(0, 120), "is not JSON"}.as(ErrorKind::remote);
  }
  if (!doc.contains("jobs") || !doc["jobs"].is_array()) {
    return Error{"squeue --json", "", "has no \"jobs\" list"}.as(ErrorKind::remote);
  }
  std::vector<SlurmJob> out;
  for (const auto& jj : doc["jobs"]) {
    if (!jj.is_object()) continue;
    SlurmJob j;
    j.id = json_text(jj, "job_id");
    j.name = json_text(jj, "name");
    j.state = json_text(jj, "job_state");
    j.reason = none_to_empty(json_text(jj, "state_reason"));
    j.partition = json_text(jj, "partition");
    j.node_list = json_text(jj, "nodes");
    j.std_out = json_text(jj, "standard_output");
    j.restarts = count_of(to_int(json_text(jj, "restart_cnt")), 0);
    if (jj.contains("time_limit")) {
      const auto& t = jj["time_limit"];
      j.time_limit = minutes_text(json_number(t), t.is_object() && t.contains("infinite") && t["infinite"].is_boolean() && t["infinite"].get<bool>());
    }
    if (jj.contains("exit_code")) {
      const auto& e = jj["exit_code"];
      if (e.is_object()) {  // 24.11: {"return_code": {...}, "signal": {"id": {...}}}
        const long long rc = e.contains("return_code") ? json_number(e["return_code"]).value_or(0) : 0;
        long long sig = 0;
        if (e.contains("signal") && e["signal"].is_object() && e["signal"].contains("id")) {
          sig = json_number(e["signal"]["id"]).value_or(0);
        }
        j.exit_code = std::to_string(rc) + ":" + std::to_string(sig);
      } else if (auto n = json_number(e)) {  // 22.05: the raw wait status
        j.exit_code = std::to_string((*n >> 8) & 0xff) + ":" + std::to_string(*n & 0x7f);
      }
    }
    j.source = "squeue";
    if (!j.id.empty()) out.push_back(std::move(j));
  }
  return out;
}

Result<std::vector<SlurmJob>> parse_sacct(const std::string& text) {
  std::vector<SlurmJob> out;
  for (const std::string& raw : split(text, '\n')) {
    const std::string line(trim(raw));
    if (line.empty()) continue;
    const auto f = split(line, '|');
    if (f.size() < 2) {
      return Error{"sacct", line.substr(0, 200), "is not a '|'-separated " + std::string(kSacctFields) + " line"}.as(
          ErrorKind::remote);
    }
    if (f[0] == "JobID") continue;  // a header (-n not honoured)
    SlurmJob j;
    j.id = std::string(trim(f[0]));
    const auto state = words(f[1]);  // "CANCELLED by 1000"
    j.state = state.empty() ? std::string() : state[0];
    if (f.size() > 2) j.exit_code = std::string(trim(f[2]));
    if (f.size() > 3) j.reason = none_to_empty(std::string(trim(f[3])));
    j.source = "sacct";
    if (!j.id.empty()) out.push_back(std::move(j));
  }
  return out;
}

bool sacct_disabled(const std::string& err) {
  std::string lower = err;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("accounting storage is disabled") != std::string::npos;
}

Result<std::string> parse_node_addr(const std::string& text) {
  // The first record only (`scontrol show node` without a name prints every node).
  const size_t second = text.find("NodeName=", text.find("NodeName=") + 1);
  const auto kv = parse_scontrol_record(text.substr(0, second == std::string::npos || text.find("NodeName=") == std::string::npos ? std::string::npos : second));
  auto it = kv.find("NodeAddr");
  if (it == kv.end() || it->second.empty()) {
    return Error{"scontrol show node", std::string(trim(text)).substr(0, 120), "names no NodeAddr"}.as(
        ErrorKind::remote);
  }
  return it->second;
}

Result<std::string> parse_sbatch_job_id(const std::string& out) {
  const std::string first(trim(split(std::string(trim(out)), '\n').back()));
  const std::string id = split(first, ';').front();
  if (id.empty() || !to_int(id)) {
    return Error{"sbatch", std::string(trim(out)).substr(0, 200), "did not print a job id"}.as(ErrorKind::remote);
  }
  return id;
}

std::string slurm_state_meaning(const std::string& state) {
  if (state == "TIMEOUT") return "the job ran past its time limit";
  if (state == "NODE_FAIL") return "a node of the job failed";
  if (state == "OUT_OF_MEMORY") return "a process of the job ran out of memory";
  if (state == "CANCELLED") return "the job was cancelled (scancel or an administrator)";
  if (state == "PREEMPTED") return "the job was preempted by a job of higher priority";
  if (state == "FAILED") return "the job ended with a non-zero exit code";
  if (state == "BOOT_FAIL") return "a node of the job failed to boot";
  if (state == "DEADLINE") return "the job reached its deadline";
  if (state == "COMPLETED") return "the job completed";
  return {};
}

bool SlurmNodeState::lost() const {
  for (const char* word : {"DOWN", "FAIL", "DRAIN", "NOT_RESPONDING"})
    if (state.find(word) != std::string::npos) return true;
  return !state.empty() && state.back() == '*';
}

std::vector<SlurmNodeState> parse_scontrol_nodes(const std::string& text) {
  std::vector<SlurmNodeState> out;
  std::string record;
  auto flush = [&] {
    const auto kv = parse_scontrol_record(record);
    record.clear();
    auto get = [&](const char* k) {
      auto it = kv.find(k);
      return it == kv.end() ? std::string() : std::string(trim(it->second));
    };
    if (get("NodeName").empty()) return;
    out.push_back(SlurmNodeState{get("NodeName"), get("State"), none_to_empty(get("Reason"))});
  };
  for (const std::string& line : split_lines(text)) {
    const std::string_view t = trim(line);
    // A new record: a blank line, or the next node of the one-line form.
    if (t.empty() || t.rfind("NodeName=", 0) == 0) flush();
    record += " " + std::string(t);
  }
  flush();
  return out;
}

}  // namespace meshwork::remote
