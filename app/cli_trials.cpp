// Trials: `meshwork plan <plan flags> --try K [--steps N] <launch flags>`. Plans as usual, then
// launches the K best predicted shapes that fit, one after another, N steps each, through the one
// launch path (launch_command: probe, validate, deploy, supervisors, metrics streamed into the
// store), records them as a trial group with the planner's predictions (core/store/trials.h) and
// prints them ranked by measured tokens/s beside the prediction, with the memory each rank
// really peaked at, and the winner. A trial that fails is reported and the next one goes on.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <streambuf>

#include "app/commands.h"
#include "core/cli_args.h"
#include "core/mesh_json.h"
#include "core/planner.h"
#include "core/run_config_flags.h"
#include "core/store/paths.h"
#include "core/store/run_store.h"
#include "core/store/trials.h"
#include "core/units.h"
#include "remote/host_spec.h"

namespace meshwork::cli {

namespace {

// The launch's flags a trial passes through (meshwork launch's words): where, with what runtime,
// over which SSH, and the training settings the plan does not depend on.
const std::set<std::string> kLaunchValueFlags = {
    "--hostfile", "--hosts", "--nproc-per-node", "--remote-root", "--master-addr", "--master-port",
    "--meshtrain", "--max-restarts", "--bundle", "--bundle-root", "--node-torch", "--ssh-config",
    "--known-hosts", "--identity", "--data", "--lr", "--warmup-steps", "--seed", "--init",
    "--max-grad-norm", "--peak-tflops"};
const std::set<std::string> kLaunchSwitches = {"--local", "--accept-new-host-keys"};

// Keeps the last line written to a stream while passing everything on: the words of a launch
// that failed before a run existed (launch_command prints them as `meshwork: <error>`).
class LastLine : public std::streambuf {
 public:
  explicit LastLine(std::ostream& stream) : stream_(stream), out_(stream.rdbuf()) { stream_.rdbuf(this); }
  ~LastLine() override { stream_.rdbuf(out_); }
  std::string last() const {
    std::lock_guard lock(mu_);
    return line_.empty() ? last_ : line_;
  }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    keep(static_cast<char>(c));
    return out_->sputc(static_cast<char>(c));
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) keep(s[i]);
    return out_->sputn(s, n);
  }
  int sync() override { return out_->pubsync(); }

 private:
  void keep(char c) {
    std::lock_guard lock(mu_);
    if (c != '\n') {
      line_ += c;
    } else if (!line_.empty()) {
      last_ = std::move(line_);
      line_.clear();
    }
  }
  std::ostream& stream_;
  std::streambuf* out_;
  mutable std::mutex mu_;
  std::string line_, last_;
};

std::string flag_of(const std::string& arg) { return arg.substr(0, arg.find('=')); }

std::optional<std::string> launch_value(const Args& launch, const std::string& flag) {
  std::optional<std::string> v;
  for (size_t i = 0; i + 1 < launch.size(); ++i)
    if (launch[i] == flag) v = launch[i + 1];
  return v;
}

bool launch_has(const Args& launch, const std::string& flag) {
  return std::find(launch.begin(), launch.end(), flag) != launch.end();
}

std::string cell(const std::string& s, size_t width, bool right = true) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

std::string percent(const std::optional<double>& p) {
  if (!p) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", *p);
  return buf;
}

std::string axis_flags(const MeshShape& shape) {
  std::string out;
  for (Axis a : kAxes) out += (out.empty() ? "" : " ") + std::string(axis_flag(a)) + " " + std::to_string(shape[a]);
  return out;
}

// The planner's nodes and ranks per node against the launch's: a trial runs the shapes planned
// for the nodes it runs on.
Status check_nodes(const PlanQuery& q, const Args& launch) {
  std::vector<remote::HostEntry> hosts;
  if (auto f = launch_value(launch, "--hostfile")) {
    auto h = remote::load_hostfile(*f);
    if (!h) return h.error();
    hosts.insert(hosts.end(), h->begin(), h->end());
  }
  if (auto l = launch_value(launch, "--hosts")) {
    auto h = remote::parse_host_list(*l);
    if (!h) return h.error();
    hosts.insert(hosts.end(), h->begin(), h->end());
  }
  if (launch_has(launch, "--local")) hosts.push_back({});
  if (hosts.empty())
    return Error{"--try", "", "give the nodes to try the shapes on: --local, --hosts H1,H2 or --hostfile F"};
  if (static_cast<int>(hosts.size()) != q.nodes)
    return Error{"--hosts", std::to_string(hosts.size()) + " node(s)",
                 "the plan's --nodes " + std::to_string(q.nodes) + " (trials run the shapes planned for these nodes)"};
  int nproc = hosts.front().slots;
  if (auto n = launch_value(launch, "--nproc-per-node")) {
    auto v = parse_integer("--nproc-per-node", *n, 1, 1 << 20, "a whole number >= 1");
    if (!v) return v.error();
    nproc = static_cast<int>(*v);
  }
  if (nproc <= 0) return Error{"--nproc-per-node", "", "give the ranks per node (the plan's --gpus-per-node " +
                                                           std::to_string(q.gpus_per_node) + ")"};
  if (nproc != q.gpus_per_node)
    return Error{"--nproc-per-node", std::to_string(nproc),
                 "the plan's --gpus-per-node " + std::to_string(q.gpus_per_node) +
                     " (trials run the shapes planned for these ranks)"};
  return Status::Ok();
}

nlohmann::json query_json(const PlanQuery& q, const std::string& model) {
  nlohmann::json j = {{"model", model},
                      {"nodes", q.nodes},
                      {"gpus_per_node", q.gpus_per_node},
                      {"device_memory_bytes", q.device_memory_bytes},
                      {"seq_len", q.training.seq_len},
                      {"micro_batch", q.training.micro_batch},
                      {"global_batch", q.training.global_batch},
                      {"precision", std::string(to_string(q.training.precision))},
                      {"activation_checkpointing", std::string(to_string(q.training.activation_checkpointing))},
                      {"device", std::string(to_string(q.training.device))}};
  if (q.estimate.calibration) j["calibration"] = q.estimate.calibration->fingerprint.id();
  return j;
}

// The run config flags of one trial: the plan's settings, the shape, the steps (the global batch
// the planner assumed: micro_batch x dp when it was left to each shape).
Args trial_run_flags(const PlanQuery& q, const std::string& model, const MeshShape& shape, int steps) {
  const int64_t global = q.training.global_batch > 0 ? q.training.global_batch : q.training.micro_batch * shape.group_size(GroupKind::dp);
  Args a = {"--model", model,
            "--seq-len", std::to_string(q.training.seq_len),
            "--micro-batch", std::to_string(q.training.micro_batch),
            "--global-batch", std::to_string(global),
            "--precision", std::string(to_string(q.training.precision)),
            "--activation-checkpointing", std::string(to_string(q.training.activation_checkpointing)),
            "--device", std::string(to_string(q.training.device)),
            "--steps", std::to_string(steps)};
  for (Axis ax : kAxes) {
    a.emplace_back(axis_flag(ax));
    a.push_back(std::to_string(shape[ax]));
  }
  return a;
}

const store::TrialResult* result_at(const store::Trial& t, int position) {
  for (const store::TrialResult& r : t.results)
    if (r.position == position) return &r;
  return nullptr;
}

std::string measured_line(const store::TrialResult& r) {
  std::string s = r.status;
  if (r.tokens_per_s)
    s += ": " + format_tokens_per_s(*r.tokens_per_s) + " measured (predicted " +
         format_tokens_per_s(r.predicted.tokens_per_s) + ", " + percent(r.tokens_error_percent()) + ")";
  if (r.peak_bytes)
    s += ", peak " + format_bytes(*r.peak_bytes) + " per rank (estimated " +
         format_bytes(static_cast<double>(r.predicted.peak_bytes)) + ")";
  if (!r.reason.empty()) s += "; " + r.reason.substr(0, r.reason.find('\n'));
  return s;
}

void print_trial(const store::Trial& t, int steps, std::ostream& out) {
  out << "\nTrial " << t.id << ": " << t.results.size() << " shape(s), " << steps
      << " step(s) each, ranked by measured tokens/s (whole mesh); memory: the highest peak of any rank\n";
  const std::vector<std::pair<std::string, size_t>> cols = {
      {"rank", 4},     {"#", 3},          {"shape", 9},         {"status", 12},   {"tokens/s", 9},
      {"predicted", 9}, {"tok err", 8},   {"peak/rank", 10},    {"estimated", 10}, {"mem err", 8},
      {"run", 5}};
  std::string line;
  for (const auto& [name, w] : cols) line += cell(name, w, name != "shape" && name != "status") + ' ';
  out << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
  int rank = 0;
  for (const store::TrialResult& r : t.results) {
    ++rank;
    const std::vector<std::string> cells = {
        r.measured() ? std::to_string(rank) : "-",
        std::to_string(r.position),
        r.predicted.shape.compact(),
        r.status,
        r.tokens_per_s ? format_count(*r.tokens_per_s) : "-",
        format_count(r.predicted.tokens_per_s),
        percent(r.tokens_error_percent()),
        r.peak_bytes ? format_bytes(*r.peak_bytes) : "-",
        format_bytes(static_cast<double>(r.predicted.peak_bytes)),
        percent(r.peak_error_percent()),
        r.run ? std::to_string(*r.run) : "-"};
    line.clear();
    for (size_t i = 0; i < cells.size(); ++i) line += cell(cells[i], cols[i].second, i != 2 && i != 3) + ' ';
    out << line.substr(0, line.find_last_not_of(' ') + 1) << "\n";
  }
  bool header = false;
  for (const store::TrialResult& r : t.results) {
    if (r.reason.empty() || r.status == store::kStatusOk) continue;
    if (!header) out << "\n";
    header = true;
    out << "  #" << r.position << " (" << r.predicted.shape.compact() << ") " << r.status << ": "
        << r.reason.substr(0, r.reason.find('\n')) << "\n";
  }
  if (const store::TrialResult* w = t.winner()) {
    out << "\nWinner: " << w->predicted.shape.compact() << " (#" << w->position << ", run " << *w->run << "), "
        << format_tokens_per_s(*w->tokens_per_s) << " measured";
    if (w->position != 1) out << "; the planner ranked it #" << w->position;
    out << ". Run it with " << axis_flags(w->predicted.shape) << "\n";
  } else {
    out << "\nNo trial ran to its end: no winner.\n";
  }
}

}  // namespace

Result<std::pair<Args, TrialFlags>> split_trial_flags(const Args& args) {
  TrialFlags t;
  bool wanted = false;
  for (const std::string& a : args) {
    if (a == "--") break;
    wanted = wanted || flag_of(a) == "--try";
  }
  if (!wanted) return std::make_pair(args, t);
  Args plan;
  auto take = [&](size_t& i, const std::string& flag, const std::string& arg, const std::string& placeholder)
      -> Result<std::string> {
    if (arg.find('=') != std::string::npos) return arg.substr(arg.find('=') + 1);
    if (i + 1 >= args.size()) return Error{flag, "", "needs a value: " + placeholder};
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      plan.insert(plan.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    const std::string flag = flag_of(a);
    if (flag == "--try" || flag == "--steps") {
      auto v = take(i, flag, a, flag == "--try" ? "K" : "N");
      if (!v) return v.error();
      if (flag == "--try") {
        auto k = parse_integer("--try", *v, 1, 1000, "a whole number of shapes from 1 to 1000");
        if (!k) return k.error();
        t.k = static_cast<int>(*k);
      } else {
        RunConfig c;  // meshtrain's own words and bounds for --steps
        if (Status s = find_run_config_flag("--steps")->apply(c, *v); !s) return s.error();
        t.steps = c.training.steps;
      }
    } else if (kLaunchValueFlags.count(flag)) {
      auto v = take(i, flag, a, "VALUE");
      if (!v) return v.error();
      t.launch.insert(t.launch.end(), {flag, *v});
    } else if (kLaunchSwitches.count(flag)) {
      if (flag != a) return Error{flag, a.substr(a.find('=') + 1), "takes no value"};
      t.launch.push_back(flag);
    } else if (flag == "--db") {  // the plan's (--calibration ID) and the trials' store alike
      auto v = take(i, flag, a, "PATH");
      if (!v) return v.error();
      plan.insert(plan.end(), {flag, *v});
      t.launch.insert(t.launch.end(), {flag, *v});
    } else {
      plan.push_back(a);
      t.json = t.json || a == "--json";
      // A plan flag's value goes with it, whatever it looks like (core/cli_args.h's rule).
      const bool takes_value = a.rfind("--", 0) == 0 && a.find('=') == std::string::npos && a != "--json" &&
                               a != "--help";
      if (takes_value && i + 1 < args.size()) plan.push_back(args[++i]);
    }
  }
  return std::make_pair(plan, t);
}

int run_trials(const PlanQuery& q, const Plan& plan, const std::string& model, const TrialFlags& flags) {
  if (Status s = check_nodes(q, flags.launch); !s) return fail(s.error());
  std::vector<const PlanEntry*> chosen;
  for (const PlanEntry& e : plan.shapes)
    if (e.fits && static_cast<int>(chosen.size()) < flags.k) chosen.push_back(&e);
  if (chosen.empty()) {
    std::cerr << "meshwork: no shape fits in memory: nothing to try (see `meshwork plan` without --try)\n";
    return kExitNoFit;
  }
  // With --json the document is the only thing on stdout: progress and the launch's lines go to
  // stderr.
  std::ostream& progress = flags.json ? std::cerr : std::cout;
  if (static_cast<int>(chosen.size()) < flags.k)
    progress << "meshwork: only " << chosen.size() << " shape(s) fit in memory: trying those\n";

  const std::filesystem::path db =
      launch_value(flags.launch, "--db") ? std::filesystem::path(*launch_value(flags.launch, "--db"))
                                         : store::default_db_path();
  store::TrialId trial = 0;
  {
    auto st = store::RunStore::open(db);
    if (!st) return fail(st.error());
    const nlohmann::json doc = {{"planned_by", "meshwork plan"},
                                {"k", flags.k},
                                {"steps", flags.steps},
                                {"query", query_json(q, model)},
                                {"plan", plan_to_json(plan)}};
    auto id = store::create_trial(**st, doc);
    if (!id) return fail(id.error());
    trial = *id;
    for (size_t i = 0; i < chosen.size(); ++i) {
      const PlanEntry& e = *chosen[i];
      const store::TrialPrediction p{e.shape, e.time.tokens_per_s, e.time.step_s, e.memory.total()};
      if (Status s = store::add_trial_entry(**st, trial, static_cast<int>(i) + 1, p); !s)
        return fail(s.error());
    }
  }
  progress << "trial " << trial << ": trying " << chosen.size() << " shape(s) for " << flags.steps
           << " step(s) each, in the planner's order\n"
           << std::flush;

  std::optional<int> first_failure;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const int position = static_cast<int>(i) + 1;
    const PlanEntry& e = *chosen[i];
    const std::string name = "trial " + std::to_string(trial) + " #" + std::to_string(position) + " " + e.shape.compact();
    progress << "trial " << trial << " #" << position << "/" << chosen.size() << ": " << e.shape.compact()
             << " (predicted " << format_tokens_per_s(e.time.tokens_per_s) << ", step "
             << format_seconds(e.time.step_s) << ", peak " << format_bytes(static_cast<double>(e.memory.total()))
             << " per rank)\n"
             << std::flush;
    Args args = flags.launch;
    for (std::string& a : trial_run_flags(q, model, e.shape, flags.steps)) args.push_back(std::move(a));
    args.insert(args.end(), {"--name", name});
    std::optional<store::RunId> run;
    int rc = kExitError;
    std::string last_line;
    {
      LastLine err(std::cerr);
      std::streambuf* out = nullptr;
      if (flags.json) out = std::cout.rdbuf(std::cerr.rdbuf());
      rc = launch_command(args, "", [&](const std::filesystem::path&, int64_t id, const remote::LaunchRecord&,
                                        int follow_rc) {
        run = id;
        return follow_rc;
      });
      if (out) std::cout.rdbuf(out);
      last_line = err.last();
    }
    auto st = store::RunStore::open(db);
    if (!st) return fail(st.error());
    if (!run) {  // the launch may have made the run before failing (a supervisor that did not start)
      auto runs = (*st)->list_runs();
      if (runs)
        for (const store::RunSummary& s : *runs)
          if (s.name == name && (!run || s.id > *run)) run = s.id;
    }
    Status recorded = Status::Ok();
    if (run) {
      recorded = store::set_trial_run(**st, trial, position, *run);
    } else {
      const std::string prefix = "meshwork: ";
      if (last_line.rfind(prefix, 0) == 0) last_line = last_line.substr(prefix.size());
      if (last_line.empty()) last_line = "the launch failed (exit " + std::to_string(rc) + ")";
      recorded = store::set_trial_error(**st, trial, position, last_line);
    }
    if (!recorded) return fail(recorded.error());
    if (rc != kExitOk && !first_failure) first_failure = rc;
    auto t = store::load_trial(**st, trial);
    if (!t) return fail(t.error());
    const store::TrialResult* r = result_at(*t, position);
    if (r) progress << "trial " << trial << " #" << position << ": " << measured_line(*r) << "\n" << std::flush;
    // Detached (Ctrl-C): the run goes on, so the next trial would share its nodes. Stop here.
    if (r && (r->status == store::kStatusRunning || r->status == store::kStatusCreated)) {
      std::cerr << "meshwork: trial " << trial << " stopped after #" << position << " (run " << *r->run
                << " goes on): the remaining shapes were not tried\n";
      break;
    }
  }

  auto st = store::RunStore::open(db);
  if (!st) return fail(st.error());
  auto t = store::load_trial(**st, trial);
  if (!t) return fail(t.error());
  if (flags.json) {
    std::cout << store::to_json(*t).dump(2) << "\n";
  } else {
    print_trial(*t, flags.steps, std::cout);
  }
  if (t->winner()) return kExitOk;
  return first_failure.value_or(kExitNoFit);
}

}  // namespace meshwork::cli
