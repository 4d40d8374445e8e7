#include "remote/slurm_run.h"

#include <condition_variable>

#include "remote/launch_pipeline.h"
#include "remote/parse_util.h"
#include "remote/run_layout.h"
#include "core/shell_quote.h"

namespace meshwork::remote {

using namespace detail;

const SlurmPartition* SlurmClusterInfo::default_partition() const {
  for (const auto& p : partitions) {
    if (p.is_default) return &p;
  }
  return partitions.empty() ? nullptr : &partitions.front();
}

const SlurmPartition* SlurmClusterInfo::find(const std::string& name) const {
  for (const auto& p : partitions) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Result<SlurmClusterInfo> probe_slurm(Node& login) {
  auto r = login.exec(std::string("sinfo -h -o ") + shell_quote(kSinfoFormat), std::chrono::seconds(30), {});
  if (!r) return r.error();
  if (r->exit_code != 0) {
    return Error{login.name(), "sinfo",
                 "failed (exit " + std::to_string(r->exit_code) + "): " + std::string(trim(r->err)).substr(0, 300) +
                     " (is this a Slurm login node?)"}
        .as(ErrorKind::remote);
  }
  auto parts = parse_sinfo(r->out);
  if (!parts) return parts.error();
  SlurmClusterInfo info;
  info.login = login.name();
  info.partitions = *parts;
  return info;
}

Result<SlurmJob> query_slurm_job(Node& login, const std::string& job_id, bool* try_sacct) {
  // sacct first where the cluster keeps accounting: it still knows a job after scontrol forgot
  // it (MinJobAge, 300 s by default), so an old job keeps its final state. Many clusters have
  // none ("accounting storage is disabled"): then it is not asked again, and scontrol answers.
  if (!try_sacct || *try_sacct) {
    auto a = login.exec(std::string("sacct -P -n -X -j ") + shell_quote(job_id) + " -o " + kSacctFields,
                        std::chrono::seconds(30), {});
    if (a && a->exit_code == 0) {
      auto jobs = parse_sacct(a->out);
      if (jobs) {
        // Several lines for one id: a requeued job's earlier runs (with --duplicates); the
        // newest is last.
        for (auto it = jobs->rbegin(); it != jobs->rend(); ++it) {
          if (it->id == job_id) return *it;
        }
      }
      // Not (yet) in the accounting database: slurmdbd records a job a moment after sbatch.
    } else if (a && try_sacct && (sacct_disabled(a->err + a->out) || a->exit_code == 127)) {
      *try_sacct = false;
    }
  }
  auto r = login.exec("scontrol show job " + shell_quote(job_id), std::chrono::seconds(30), {});
  if (!r) return r.error();
  if (r->exit_code == 0) {
    auto jobs = parse_scontrol_jobs(r->out);
    if (jobs && !jobs->empty()) return jobs->front();
  }
  // scontrol forgets a job MinJobAge after it ended; squeue --json may still list it, or not.
  auto q = login.exec("squeue --json", std::chrono::seconds(30), {});
  if (q && q->exit_code == 0) {
    auto jobs = parse_squeue_json(q->out);
    if (jobs) {
      for (const SlurmJob& j : *jobs) {
        if (j.id == job_id) return j;
      }
    }
  }
  if (r->err.find("Invalid job id") != std::string::npos) {
    SlurmJob gone;
    gone.id = job_id;
    gone.state = "GONE";  // ended long enough ago that Slurm forgot it (and no accounting)
    return gone;
  }
  return Error{"scontrol show job", job_id, std::string(trim(r->err)).substr(0, 300)}.as(ErrorKind::remote);
}

namespace {

nlohmann::json options_json(const SlurmJobOptions& o) {
  return {{"partition", o.partition}, {"nodes", o.nodes},       {"gpus_per_node", o.gpus_per_node},
          {"nproc_per_node", o.ranks_per_node()}, {"account", o.account}, {"qos", o.qos},
          {"time", o.time}, {"sbatch_args", o.sbatch_args}};
}

// A Slurm job: the files go to the login node (the job's nodes share its run directory), and one
// sbatch job starts every node.
class SlurmTarget final : public LaunchTarget {
 public:
  explicit SlurmTarget(const SlurmLaunchRequest& req) : req_(req) {}

  std::variant<int, LaunchError> check_request(const LaunchRequest&) override {
    if (Status st = check_slurm_options(req_.job); !st) return launch_invalid(st.error());
    auto spec = parse_host_spec(req_.login.empty() ? "local" : req_.login);
    if (!spec) return launch_invalid(spec.error());
    site.hosts = {*spec};
    return req_.job.ranks_per_node();
  }

  std::optional<LaunchError> reach(const LaunchRequest& req, const LaunchStepFn& step) override {
    step("connecting to the login node " + site.hosts.front().to_string());
    auto conn = connect_node(site.hosts.front(), req.ssh);
    if (auto* e = std::get_if<ConnectError>(&conn)) return launch_failed(e->error);
    site.nodes.push_back(std::move(std::get<0>(conn)));
    auto info = probe_node(login());
    if (!info) return launch_failed(info.error());
    site.probes.push_back(*info);
    auto cluster = probe_slurm(login());
    if (!cluster) return launch_failed(cluster.error());
    cluster_ = *cluster;
    return std::nullopt;
  }

  void place(RunConfig& config, int nproc) const override {
    // Slurm names the hosts when the job starts: the config names the partition and its job
    // nodes by index.
    SlurmPartitionSource source;
    if (const SlurmPartitionSource* asked = slurm_source(req_.base.config.source)) source = *asked;
    source.login = site.hosts.front().to_string();
    source.partition = req_.job.partition;
    source.nodes = req_.job.nodes;
    source.ranks_per_node = nproc;
    source.gpus_per_node = req_.job.gpus_per_node;
    const SlurmPartition* partition =
        req_.job.partition.empty() ? cluster_.default_partition() : cluster_.find(req_.job.partition);
    if (partition && !partition->gpus_per_node.type.empty()) source.gpu_type = partition->gpus_per_node.type;
    config.nodes.clear();
    for (int i = 0; i < req_.job.nodes; ++i) config.nodes.push_back(NodeConfig{slurm_node_name(source, i), nproc, {}});
    config.source = source;
  }

  std::optional<LaunchError> check_devices(const LaunchPlan& plan, const LaunchStepFn& step) override {
    if (plan.config.training.device != DeviceKind::cuda) return std::nullopt;
    if (req_.job.gpus_per_node < plan.nproc_per_node) {
      return launch_invalid(Error{"--gpus-per-node", std::to_string(req_.job.gpus_per_node),
                                  "at least the ranks per node (" + std::to_string(plan.nproc_per_node) +
                                      ") for a CUDA run"});
    }
    if (plan.bundle) {
      // The login node's driver says nothing about the compute nodes', which Slurm has not
      // picked yet: the SSH launch's driver check (cuda_driver.h) cannot be made before
      // submission here.
      step("warning: the CUDA driver of the job's nodes is not checked against the bundle's CUDA " +
           plan.bundle->cuda_requirement + " before submission (Slurm picks the nodes)");
    }
    return std::nullopt;
  }

  void describe(const LaunchRequest&, const LaunchPlan& plan, const StagedRun& staged,
                LaunchRecord& rec) const override {
    // Every Slurm node is followed through the login node, in the shared run directory.
    for (int i = 0; i < req_.job.nodes; ++i) {
      rec.nodes.push_back({site.hosts.front().to_string(), plan.nproc_per_node, staged.run_dirs.front(), ""});
    }
  }

  std::variant<nlohmann::json, LaunchError> submit(const LaunchPlan& plan, const StagedRun& staged,
                                                   const LaunchRecord& rec, const LaunchStepFn& step) override {
    const std::string& run_dir = staged.run_dirs.front();
    SlurmJobOptions job = req_.job;
    if (job.job_name.empty()) job.job_name = "meshwork-" + plan.config.name;
    const std::string script = slurm_batch_script(rec, job);
    const std::string dir = shell_quote(run_dir);
    auto wrote = login().exec("cat > " + dir + "/" + kSlurmScriptFile + " && chmod 0700 " + dir + "/" + kSlurmScriptFile,
                              std::chrono::seconds(30), script);
    if (!wrote || wrote->exit_code != 0) {
      return launch_failed(wrote ? Error{login().name(), run_dir + "/" + kSlurmScriptFile,
                                         "cannot be written: " + std::string(trim(wrote->err))}
                                 : wrote.error());
    }

    step("submitting (sbatch)");
    auto sub = login().exec("cd " + dir + " && sbatch --parsable ./" + kSlurmScriptFile, std::chrono::seconds(60), {});
    if (!sub) return launch_failed(sub.error());
    if (sub->exit_code != 0) {
      // sbatch's own words: "invalid partition specified: nope", "Invalid account or
      // account/partition combination specified", ...
      std::string words(trim(sub->err));
      if (words.empty()) words = std::string(trim(sub->out));
      (void)login().exec("rm -rf -- " + dir, std::chrono::seconds(30), {});  // nothing of a refused run stays
      // sbatch's words do not always name the option ("Requested partition configuration not
      // available now" for a denied account): say what was submitted, and the partitions there are.
      std::string asked = "partition " + (job.partition.empty() ? std::string("(the default)") : job.partition);
      if (!job.account.empty()) asked += ", account " + job.account;
      if (!job.qos.empty()) asked += ", QOS " + job.qos;
      if (!job.time.empty()) asked += ", time " + job.time;
      std::string partitions;
      for (const auto& part : cluster_.partitions) partitions += (partitions.empty() ? "" : ", ") + part.name;
      return launch_invalid(Error{"sbatch", "refused the job (" + asked + ")",
                                  words + (partitions.empty() ? "" : " [partitions on this cluster: " + partitions + "]")});
    }
    auto job_id = parse_sbatch_job_id(sub->out);
    if (!job_id) return launch_failed(job_id.error());
    job_id_ = *job_id;
    job_ = job;
    step("submitted as Slurm job " + job_id_);

    nlohmann::json parts = nlohmann::json::array();
    for (const auto& p : cluster_.partitions) {
      parts.push_back({{"name", p.name}, {"nodes", p.nodes}, {"gpus_per_node", p.gpus_per_node.count},
                       {"time_limit", p.time_limit}, {"default", p.is_default}});
    }
    return nlohmann::json{{"slurm", {{"job_id", job_id_}, {"login", site.hosts.front().to_string()},
                                     {"script", script}, {"options", options_json(job)}, {"partitions", parts},
                                     {"bundle", plan.bundle ? plan.bundle->sha256 : std::string()}}}};
  }

  void withdraw() override { (void)login().exec("scancel " + shell_quote(job_id_), std::chrono::seconds(30), {}); }

  std::optional<LaunchError> start(store::RunStore& store, store::RunId id, const LaunchPlan& plan, const StagedRun&,
                                   const LaunchRecord&, const LaunchStepFn&) override {
    // sbatch started it already; the store says so.
    (void)store.add_event(id, "info", "submitted as Slurm job " + job_id_ + " (" + std::to_string(job_.nodes) +
                                          " node(s) x " + std::to_string(plan.nproc_per_node) + " rank(s)" +
                                          (job_.partition.empty() ? "" : ", partition " + job_.partition) + ")");
    return std::nullopt;
  }

 private:
  Node& login() { return *site.nodes.front(); }

  const SlurmLaunchRequest& req_;
  SlurmClusterInfo cluster_;
  SlurmJobOptions job_;
  std::string job_id_;
};

}  // namespace

std::variant<LaunchedRun, LaunchError> launch_slurm_run(const std::filesystem::path& db,
                                                        const SlurmLaunchRequest& req) {
  SlurmTarget target(req);
  return launch_through(db, req.base, target);
}

Result<std::optional<SlurmRunInfo>> load_slurm_info(const std::filesystem::path& db, store::RunId run) {
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  auto info = (*store)->get_run(run);
  if (!info) return info.error();
  const auto& c = info->cluster;
  if (!c.is_object() || !c.contains("slurm") || !c["slurm"].is_object()) return std::optional<SlurmRunInfo>();
  SlurmRunInfo s;
  s.job_id = c["slurm"].value("job_id", std::string());
  s.login = c["slurm"].value("login", std::string());
  s.script = c["slurm"].value("script", std::string());
  if (s.job_id.empty()) return Error{"run " + std::to_string(run), "cluster.slurm", "names no job id"};
  return std::optional<SlurmRunInfo>(s);
}

namespace {

std::variant<std::unique_ptr<Node>, ConnectError> connect_login(const std::string& login, const SshOptions& ssh) {
  auto spec = parse_host_spec(login);
  if (!spec) return ConnectError{ConnectFailure::protocol, spec.error(), ""};
  return connect_node(*spec, ssh);
}

// Leaves node<i>.stop for every node (so whoever follows reads "stopped", not "failed"), then
// scancel. Slurm sends SIGTERM to every process of the job, SIGKILL KillWait later.
Status scancel_run(Node& login, const LaunchRecord& rec, const std::string& job_id) {
  std::string touch = "cd -- " + shell_quote(rec.nodes.front().run_dir) + " && i=0; while [ $i -lt " +
                      std::to_string(rec.nodes.size()) + " ]; do : > node$i.stop; i=$((i+1)); done; ";
  auto r = login.exec(touch + "scancel " + shell_quote(job_id), std::chrono::seconds(30), {});
  if (!r) return r.error();
  if (r->exit_code != 0) {
    return Error{"scancel", job_id, std::string(trim(r->err)).substr(0, 300)}.as(ErrorKind::remote);
  }
  return {};
}

// Polls Slurm's view of the job on its own connection; tells the follower whether the job may
// still run, and reports state and pending-reason changes as events.
class SlurmJobWatch {
 public:
  SlurmJobWatch(std::string login, SshOptions ssh, std::string job_id, std::function<void(const std::string&)> report)
      : login_(std::move(login)), ssh_(std::move(ssh)), job_id_(std::move(job_id)), report_(std::move(report)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~SlurmJobWatch() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Whether the job's processes may still write: a COMPLETING job's batch script has ended and
  // Slurm only cleans up (a node whose slurmd stopped answering holds it there until Slurm
  // declares the node down, SlurmdTimeout later).
  bool running() {
    std::lock_guard lock(mu_);
    return !last_ || (last_->active() && last_->state != "COMPLETING");
  }
  std::optional<SlurmJob> last() {
    std::lock_guard lock(mu_);
    return last_;
  }

 private:
  void loop() {
    std::unique_ptr<Node> node;
    std::string seen;
    bool try_sacct = true;  // until sacct says this cluster keeps no accounting
    std::unique_lock lock(mu_);
    while (!quit_) {
      lock.unlock();
      if (!node) {
        auto c = connect_login(login_, ssh_);
        if (auto* n = std::get_if<std::unique_ptr<Node>>(&c)) node = std::move(*n);
      }
      std::optional<SlurmJob> job;
      if (node) {
        const bool asked_sacct = try_sacct;
        auto j = query_slurm_job(*node, job_id_, &try_sacct);
        if (asked_sacct && !try_sacct) {
          report_("Slurm job " + job_id_ + ": no accounting on this cluster (sacct: accounting storage is "
                  "disabled); its state comes from scontrol");
        }
        if (j) {
          job = *j;
        } else if (j.error().kind == ErrorKind::remote && j.error().field != "scontrol show job") {
          node.reset();  // the link: reconnect next time
        }
      }
      if (job) {
        const std::string now = job->state + (job->reason.empty() ? "" : " (" + job->reason + ")");
        if (now != seen) {
          seen = now;
          report_("Slurm job " + job_id_ + ": " + now);
        }
      }
      lock.lock();
      if (job) last_ = job;
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return quit_; });
    }
  }

  std::string login_;
  SshOptions ssh_;
  std::string job_id_;
  std::function<void(const std::string&)> report_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  std::optional<SlurmJob> last_;
  std::thread thread_;
};

bool abnormal_end(const std::string& state) {
  return state == "TIMEOUT" || state == "NODE_FAIL" || state == "OUT_OF_MEMORY" || state == "PREEMPTED" ||
         state == "BOOT_FAIL" || state == "DEADLINE" || state == "CANCELLED";
}

}  // namespace

Result<FollowOutcome> follow_slurm_run(const std::filesystem::path& db, store::RunId run, const SshOptions& ssh,
                                       FollowOptions options, std::function<void(RunFollower*)> on_follower) {
  auto slurm = load_slurm_info(db, run);
  if (!slurm) return slurm.error();
  if (!*slurm) return Error{"run " + std::to_string(run), "", "was not launched on Slurm"};
  const SlurmRunInfo si = **slurm;
  auto rec = load_launch_record(db, run);
  if (!rec) return rec.error();
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  std::mutex store_mu;
  auto on_event = options.on_event;
  SlurmJobWatch watch(si.login, ssh, si.job_id, [&](const std::string& text) {
    if (on_event) on_event("info", text);
    std::lock_guard lock(store_mu);
    (void)(*store)->add_event(run, "info", text);
  });
  const LaunchRecord record = *rec;
  std::once_flag cancelled;
  Status cancel_status;
  options.alive = [&watch](Node&, size_t) -> Result<bool> { return watch.running(); };
  options.stop = [&](Node& login, size_t) -> Status {
    std::call_once(cancelled, [&] { cancel_status = scancel_run(login, record, si.job_id); });
    return cancel_status;
  };
  // Slurm ends the other nodes' tasks itself (srun --kill-on-bad-exit): a stop from here would
  // turn the job's FAILED into CANCELLED and hide Slurm's own account of it.
  options.stop_all_on_failure = false;
  RunFollower follower(db, run, record, make_connector(record, ssh), options);
  if (on_follower) on_follower(&follower);
  auto outcome = follower.run();
  if (on_follower) on_follower(nullptr);
  if (!outcome || outcome->state == FollowOutcome::State::detached) return outcome;

  // How Slurm says the job ended (it may take a moment after the last node's exit). A job still
  // COMPLETING after a few seconds waits for a node that does not answer: its state then is all
  // Slurm says until that node is declared down.
  std::optional<SlurmJob> job;
  int completing = 0;
  for (int i = 0; i < 50; ++i) {
    job = watch.last();
    if (job && !job->active()) break;
    completing = job && job->state == "COMPLETING" ? completing + 1 : 0;
    if (completing >= 15) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!job) return outcome;
  const std::string state = job->state;
  std::string slurm_words = "Slurm job " + si.job_id + ": " + state;
  if (!job->reason.empty()) slurm_words += " (" + job->reason + ")";
  if (!job->exit_code.empty() && job->exit_code != "0:0") slurm_words += ", exit code " + job->exit_code;
  if (const std::string m = slurm_state_meaning(state); !m.empty()) slurm_words += ": " + m;
  std::lock_guard lock(store_mu);
  const bool user_stopped = outcome->state == FollowOutcome::State::stopped;
  if (user_stopped) {
    (void)(*store)->add_event(run, "info", slurm_words);
    return outcome;
  }
  if (abnormal_end(state) || state == "FAILED" || outcome->state == FollowOutcome::State::failed) {
    std::string reason = slurm_words;
    if (outcome->root_cause) {
      // Name the Slurm node that ran the failing node (node<i>.host, written by the job), not
      // the login node the files were read through.
      RootCause rc = *outcome->root_cause;
      auto conn = make_connector(record, ssh)(0);
      if (auto* login = std::get_if<std::unique_ptr<Node>>(&conn)) {
        auto host = (*login)->read_range(record.nodes[rc.node].run_dir + "/" +
                                             node_file(static_cast<int>(rc.node), ".host"), 0, 512);
        if (host && host->has_value()) {
          const auto w = words(**host);
          if (!w.empty()) rc.host = "Slurm node " + w[0];
        }
      }
      outcome->root_cause = rc;
      reason += "\n" + rc.text();
    }
    outcome->state = FollowOutcome::State::failed;
    (void)(*store)->set_status(run, store::kStatusFailed, reason);
    (void)(*store)->add_event(run, "error", "root cause: " + reason);
  } else {
    (void)(*store)->add_event(run, "info", slurm_words);
  }
  return outcome;
}

Status slurm_stop_and_record(const std::filesystem::path& db, store::RunId run, const SshOptions& ssh,
                             const std::string& who) {
  auto slurm = load_slurm_info(db, run);
  if (!slurm) return slurm.error();
  if (!*slurm) return Error{"run " + std::to_string(run), "", "was not launched on Slurm"};
  auto rec = load_launch_record(db, run);
  if (!rec) return rec.error();
  auto conn = connect_login((*slurm)->login, ssh);
  if (auto* e = std::get_if<ConnectError>(&conn)) return e->error;
  if (Status st = scancel_run(*std::get<0>(conn), *rec, (*slurm)->job_id); !st) return st;
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  const std::string text = "stopped by " + who + " (scancel " + (*slurm)->job_id + ")";
  if (Status st = (*store)->set_status(run, store::kStatusStopped, text); !st) return st;
  return (*store)->add_event(run, "info", text);
}

}  // namespace meshwork::remote
