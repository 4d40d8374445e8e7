#include "ui/launch_controller.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QMetaObject>
#include <QPointer>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>

#include "remote/elastic.h"
#include "remote/run_control.h"
#include "remote/slurm_elastic.h"
#include "remote/slurm_run.h"
#include "core/handover.h"

namespace meshwork::ui {

namespace {
remote::SshOptions ssh_from_env() {
  // The same overrides as the prober (node_prober.cpp): tests and unusual setups.
  remote::SshOptions o;
  if (const char* v = std::getenv("MESHWORK_SSH_CONFIG")) o.ssh_config = v;
  if (const char* v = std::getenv("MESHWORK_KNOWN_HOSTS")) o.known_hosts = v;
  if (const char* v = std::getenv("MESHWORK_IDENTITY")) o.identity = v;
  return o;  // unknown host keys are refused: they were reviewed on the node cards when probed
}
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

// A resume offered on the run page and not yet taken: the re-plan and, for a Slurm run, the lost
// job nodes (the resubmission excludes their Slurm nodes).
struct LaunchController::OfferedResume {
  remote::ResumePlan plan;
  std::optional<remote::SlurmLoss> slurm_loss;
};

struct LaunchController::Active {
  std::unique_ptr<remote::RunFollower> follower;
  // The follower of a Slurm run (inside remote::follow_slurm_run) or of an elastic run's current
  // segment (inside remote::follow_elastic): reachable while it runs.
  std::mutex inner_mu;
  remote::RunFollower* inner_follower = nullptr;
  ElasticChoice elastic;
  std::thread thread;
  std::atomic<bool> done{false};
  template <class F>
  void with_follower(F&& f) {
    if (follower) return f(*follower);
    std::lock_guard lock(inner_mu);
    if (inner_follower) f(*inner_follower);
  }
};

namespace {
// A follow's end (SSH or Slurm), handed to the GUI thread by a queued call: the run's state and,
// when there is one, its root cause.
void report_finished(QPointer<LaunchController> self, std::atomic<bool>& done, store::RunId run,
                     const Result<remote::FollowOutcome>& outcome) {
  QString state = QStringLiteral("failed"), cause;
  if (!outcome) {
    cause = q(outcome.error().message());
  } else {
    state = q(outcome->state_name());
    if (outcome->root_cause) cause = q(outcome->root_cause->text());
  }
  done = true;
  QMetaObject::invokeMethod(self, handed_over([self, run, state, cause] {
    if (self) Q_EMIT self->finished(run, state, cause);
  }), Qt::QueuedConnection);
}

// The options of a follow (SSH or Slurm) whose events reach the GUI thread as follow_event(), by
// queued calls, while the controller lives.
remote::FollowOptions follow_events_to(QPointer<LaunchController> self, store::RunId run) {
  remote::FollowOptions fo;
  fo.on_event = [self, run](const std::string& level, const std::string& text) {
    QMetaObject::invokeMethod(self, handed_over([self, run, l = q(level), t = q(text)] {
      if (self) Q_EMIT self->follow_event(run, l, t);
    }), Qt::QueuedConnection);
  };
  return fo;
}
}  // namespace

LaunchController::LaunchController(QString db, QObject* parent)
    : QObject(parent), db_(std::move(db)), ssh_(ssh_from_env()) {
  qRegisterMetaType<DeployUpdate>();
  qRegisterMetaType<ResumeOffer>();
}

void LaunchController::set_ssh_options(const remote::SshOptions& options) {
  ssh_ = options;
  ssh_.on_unknown_host_key = nullptr;  // keys are reviewed on the node cards, never here
}

LaunchController::~LaunchController() {
  detach_all();
  if (launch_thread_.joinable()) launch_thread_.join();
  for (auto& [id, a] : active_)
    if (a->thread.joinable()) a->thread.join();
}

QString LaunchController::trainer_path() {
  const QByteArray env = qgetenv("MESHWORK_MESHTRAIN");
  if (!env.isEmpty()) return QString::fromLocal8Bit(env);
  return QDir(QCoreApplication::applicationDirPath()).filePath("meshtrain");
}

QString LaunchController::env_bundle_path() { return QString::fromLocal8Bit(qgetenv("MESHWORK_BUNDLE")); }

void LaunchController::set_runtime(const QString& bundle, const QString& node_torch) {
  bundle_ = bundle;
  node_torch_ = node_torch;
}

QString LaunchController::bundle_path() const {
  const QString env = env_bundle_path();
  return env.isEmpty() ? bundle_ : env;
}

QString LaunchController::node_torch() const { return bundle_path().isEmpty() ? node_torch_ : QString(); }

bool LaunchController::launch(const RunConfig& config, ElasticChoice elastic) {
  // The run config as it is (its nodes, or this machine when it has none): remote builds the
  // command line, exactly as for `meshwork launch`.
  remote::LaunchRequest req = request(config);
  return start_launch([db = std::filesystem::path(db_.toStdString()), req] { return remote::launch_run(db, req); },
                      false, &req, elastic);
}

ElasticChoice LaunchController::elastic_of(store::RunId run) const {
  auto it = active_.find(run);
  return it == active_.end() || it->second->done ? ElasticChoice{} : it->second->elastic;
}

void LaunchController::plan_resume(store::RunId run) {
  QPointer<LaunchController> self(this);
  std::thread([self, run, db = std::filesystem::path(db_.toStdString()), ssh = ssh_] {
    // The lost nodes as an elastic run finds them, then the re-plan for the others: what
    // `meshwork resume RUN --hosts <survivors> --dry-run` prints.
    auto answer = [&](std::function<void(LaunchController&)> fn) {
      QMetaObject::invokeMethod(self, handed_over([self, fn = std::move(fn)] { if (self) fn(*self); }),
                                Qt::QueuedConnection);
    };
    auto unavailable = [&](const std::string& why) {
      answer([run, w = q(why)](LaunchController& c) { Q_EMIT c.resume_unavailable(run, w); });
    };
    auto rec = remote::load_launch_record(db, run);
    if (!rec) return unavailable(rec.error().message());
    const remote::NodeConnector connect = remote::make_connector(*rec, ssh);
    // A Slurm run: its lost job nodes as `meshwork resume` finds them (no exit record, or Slurm
    // holds their node out of service), resubmitted without them.
    auto slurm = remote::load_slurm_info(db, run);
    if (!slurm) return unavailable(slurm.error().message());
    std::optional<remote::SlurmLoss> slurm_loss;
    std::vector<remote::LostNode> lost;
    if (*slurm) {
      auto loss = remote::find_lost_slurm_nodes(db, run, ssh);
      if (!loss) return unavailable(loss.error().message());
      lost = loss->lost;
      slurm_loss = std::move(*loss);
    } else {
      lost = remote::find_lost_nodes(*rec, connect);
    }
    if (lost.empty()) return unavailable("no node of the run was lost (a rank failed on a node that is still there)");
    ResumeOffer offer;
    offer.run = run;
    std::vector<std::string> hosts;
    QStringList causes;
    for (const remote::LostNode& l : lost) {
      hosts.push_back(l.host);
      causes << QStringLiteral("node %1 (%2) lost: %3").arg(l.index).arg(q(l.host), q(l.why));
    }
    offer.lost = causes.join(QStringLiteral("; "));
    auto plan = remote::plan_resume(remote::ResumeInput{db, run, hosts, 0}, connect);
    std::shared_ptr<const OfferedResume> kept;
    if (plan) {
      if (slurm_loss) remote::name_slurm_nodes(*plan, *slurm_loss);
      offer.fits = true;
      offer.old_shape = plan->replan.old_shape;
      offer.new_shape = plan->replan.new_shape;
      offer.plan_text = q(plan->text());
      offer.checkpoint_step = plan->checkpoint_step;
      kept = std::make_shared<const OfferedResume>(OfferedResume{std::move(*plan), std::move(slurm_loss)});
    } else if (plan.error().kind == ErrorKind::does_not_fit) {
      offer.refusal = q(plan.error().message());
      auto info = store::RunStore::open(db);
      if (info) {
        auto r = (*info)->get_run(run);
        if (r && r->summary.shape) offer.old_shape = *r->summary.shape;
      }
    } else {
      return unavailable(plan.error().message());
    }
    answer([offer, kept](LaunchController& c) {
      if (kept) c.resume_plans_[offer.run] = kept;
      else c.resume_plans_.erase(offer.run);
      Q_EMIT c.resume_offered(offer);
    });
  }).detach();
}

bool LaunchController::resume(store::RunId run) {
  auto it = resume_plans_.find(run);
  if (it == resume_plans_.end() || launching_) return false;
  const std::shared_ptr<const OfferedResume> offered = it->second;
  const remote::ResumePlan& plan = offered->plan;
  std::string cause = "resumed from the workbench on ";
  if (!plan.new_nodes.empty()) {
    cause += plan.new_nodes;  // a Slurm job's nodes, in Slurm's names
  } else {
    std::string without;
    for (size_t i = 0; i < plan.replan.run.nodes.size(); ++i) cause += (i ? "," : "") + plan.replan.run.nodes[i].host;
    for (const auto& n : plan.record.nodes)
      if (std::none_of(plan.replan.run.nodes.begin(), plan.replan.run.nodes.end(),
                       [&](const NodeConfig& s) { return s.host == n.host; }))
        without += (without.empty() ? "" : ",") + n.host;
    if (!without.empty()) cause += " without " + without;
  }
  resume_plans_.erase(it);
  const std::filesystem::path db = db_.toStdString();
  if (offered->slurm_loss) {
    // Resubmitted as `meshwork resume` does for a Slurm run: the job as first submitted, the lost
    // job nodes' Slurm nodes excluded.
    remote::LaunchRequest runtime = request(plan.replan.run);
    return start_launch(
        [db, offered, runtime, cause]() -> std::variant<remote::LaunchedRun, remote::LaunchError> {
          auto job = remote::stored_slurm_request(db, offered->plan.run, runtime);
          if (!job) return remote::LaunchError{job.error(), {}};
          return remote::launch_slurm_segment(db, offered->plan, *job, offered->slurm_loss->exclude, cause);
        },
        true);
  }
  remote::LaunchRequest req = request(plan.replan.run);
  return start_launch(
      [db, offered, req, cause] { return remote::launch_segment(db, offered->plan, req, cause); }, false);
}

bool LaunchController::launch_slurm(const RunConfig& config, const QString& login, const remote::SlurmJobOptions& job,
                                    ElasticChoice elastic) {
  remote::SlurmLaunchRequest req;
  req.base = request(config);
  req.login = login.toStdString();
  req.job = job;
  return start_launch([db = std::filesystem::path(db_.toStdString()), req] { return remote::launch_slurm_run(db, req); },
                      true, &req.base, elastic);
}

remote::LaunchRequest LaunchController::request(const RunConfig& config) {
  remote::LaunchRequest req;
  req.config = config;
  req.trainer_path = trainer_path().toStdString();
  req.bundle_path = bundle_path().toStdString();
  req.node_torch = node_torch().toStdString();
  req.ssh = ssh_;
  // Where the run directories go on the nodes: `--remote-root` of `meshwork launch`, for the
  // workbench's launches (a scratch or project filesystem instead of the login directory).
  if (const QByteArray root = qgetenv("MESHWORK_REMOTE_ROOT"); !root.isEmpty()) req.remote_root = root.toStdString();
  // Callbacks run on launch threads: hop to this object's thread through queued calls.
  QPointer<LaunchController> self(this);
  req.on_step = [self](const std::string& s) {
    QMetaObject::invokeMethod(self, handed_over([self, t = q(s)] { if (self) Q_EMIT self->launch_step(t); }), Qt::QueuedConnection);
  };
  req.on_deploy = [self](const remote::DeployProgress& d) {
    DeployUpdate u{static_cast<int>(d.node), q(d.host), q(d.stage), q(d.file),
                   static_cast<double>(d.bytes_done), static_cast<double>(d.bytes_total), q(d.message),
                   d.rate, d.eta_s};
    QMetaObject::invokeMethod(self, handed_over([self, u] { if (self) Q_EMIT self->deploy_progress(u); }), Qt::QueuedConnection);
  };
  req.on_probe = [self](const remote::ProbeProgress& p) {
    const QString t = QStringLiteral("probe %1: %2").arg(q(p.host), q(p.stage));
    QMetaObject::invokeMethod(self, handed_over([self, t] { if (self) Q_EMIT self->launch_step(t); }), Qt::QueuedConnection);
  };
  return req;
}

bool LaunchController::start_launch(std::function<std::variant<remote::LaunchedRun, remote::LaunchError>()> fn,
                                    bool slurm, const remote::LaunchRequest* base, ElasticChoice elastic) {
  if (launching_) {
    Q_EMIT launch_failed(tr("A launch is already in progress"), {});
    return false;
  }
  reap();
  if (launch_thread_.joinable()) launch_thread_.join();
  launching_ = true;
  QPointer<LaunchController> self(this);
  std::optional<remote::LaunchRequest> elastic_base;
  if (elastic.on && base) elastic_base = *base;
  launch_thread_ = std::thread([self, fn = std::move(fn), slurm, elastic_base = std::move(elastic_base), elastic] {
    auto result = fn();
    QMetaObject::invokeMethod(
        self,
        handed_over([self, slurm, result = std::move(result), elastic_base, elastic] {
          if (!self) return;
          self->launching_ = false;
          if (const auto* e = std::get_if<remote::LaunchError>(&result)) {
            QStringList details;
            for (const Error& m : e->more) details << q(m.message());
            Q_EMIT self->launch_failed(q(e->error.message()), details);
            return;
          }
          const auto& run = std::get<remote::LaunchedRun>(result);
          if (slurm) {
            self->follow_slurm(run.id, elastic_base ? &*elastic_base : nullptr, elastic);
          } else if (elastic_base) {
            self->follow_elastic(run.id, run.record, *elastic_base, elastic);
          } else {
            self->follow(run.id, remote::to_json(run.record));
          }
          Q_EMIT self->launched(run.id);
        }),
        Qt::QueuedConnection);
  });
  return true;
}

void LaunchController::probe_slurm(const QString& login) {
  QPointer<LaunchController> self(this);
  std::thread([self, login, ssh = ssh_] {
    QList<QVariantMap> rows;
    QString error;
    auto spec = remote::parse_host_spec(login.toStdString());
    if (!spec) {
      error = q(spec.error().message());
    } else {
      auto conn = remote::connect_node(*spec, ssh);
      if (auto* e = std::get_if<remote::ConnectError>(&conn)) {
        error = q(e->error.message());
      } else {
        auto info = remote::probe_slurm(*std::get<0>(conn));
        if (!info) {
          error = q(info.error().message());
        } else {
          for (const auto& p : info->partitions) {
            QVariantMap m;
            m["name"] = q(p.name);
            m["default"] = p.is_default;
            m["up"] = p.up;
            m["nodes"] = p.nodes;
            m["idle"] = p.idle_nodes();
            m["gpus_per_node"] = p.gpus_per_node.count;
            m["gpu_type"] = q(p.gpus_per_node.type);
            m["cpus_per_node"] = p.cpus_per_node;
            m["memory_mb"] = static_cast<qlonglong>(p.memory_mb_per_node);
            m["time_limit"] = q(p.time_limit);
            rows << m;
          }
        }
      }
    }
    QMetaObject::invokeMethod(self, handed_over([self, login, rows, error] {
      if (!self) return;
      if (error.isEmpty()) {
        Q_EMIT self->slurm_probed(login, rows);
      } else {
        Q_EMIT self->slurm_probe_failed(login, error);
      }
    }), Qt::QueuedConnection);
  }).detach();
}

void LaunchController::follow_slurm(store::RunId run, const remote::LaunchRequest* runtime, ElasticChoice elastic) {
  if (following(run)) return;
  if (runtime && elastic.on) return follow_elastic_slurm(run, *runtime, elastic);
  auto a = std::make_unique<Active>();
  QPointer<LaunchController> self(this);
  const remote::FollowOptions fo = follow_events_to(self, run);
  Active* raw = a.get();
  a->thread = std::thread([self, raw, run, fo, db = std::filesystem::path(db_.toStdString()), ssh = ssh_] {
    auto outcome = remote::follow_slurm_run(db, run, ssh, fo, [raw](remote::RunFollower* f) {
      std::lock_guard lock(raw->inner_mu);
      raw->inner_follower = f;
    });
    report_finished(self, raw->done, run, outcome);
  });
  active_[run] = std::move(a);
}

bool LaunchController::attach_slurm(store::RunId run) {
  reap();
  follow_slurm(run);
  return following(run);
}

void LaunchController::follow(store::RunId run, const nlohmann::json& launch_record) {
  if (following(run)) return;
  auto rec = remote::launch_record_from_json(launch_record);
  if (!rec) {
    Q_EMIT follow_event(run, "error", q(rec.error().message()));
    return;
  }
  auto a = std::make_unique<Active>();
  QPointer<LaunchController> self(this);
  const remote::FollowOptions fo = follow_events_to(self, run);
  const std::filesystem::path db = db_.toStdString();
  a->follower = std::make_unique<remote::RunFollower>(db, run, *rec, remote::make_connector(*rec, ssh_), fo);
  Active* raw = a.get();
  a->thread = std::thread([self, raw, run] {
    auto outcome = raw->follower->run();
    report_finished(self, raw->done, run, outcome);
  });
  active_[run] = std::move(a);
}

// As `meshwork launch --elastic` follows: remote::follow_elastic, whose notices (the lost nodes, the
// old and the new shape, where it resumes, or what would fit) go where the run's other follow
// events go.
void LaunchController::follow_elastic(store::RunId run, const remote::LaunchRecord& record,
                                      const remote::LaunchRequest& base, ElasticChoice elastic) {
  start_elastic_follow(run, elastic, [record, base](const std::filesystem::path& db, store::RunId id,
                                                    const remote::ElasticOptions& opt) {
    return remote::follow_elastic(db, id, record, base, opt);
  });
}

// As `meshwork launch --slurm --elastic` follows: remote::follow_elastic_slurm (a lost job node
// re-planned for and the job resubmitted without it), its notices as above.
void LaunchController::follow_elastic_slurm(store::RunId run, const remote::LaunchRequest& runtime,
                                            ElasticChoice elastic) {
  start_elastic_follow(run, elastic, [runtime](const std::filesystem::path& db, store::RunId id,
                                               const remote::ElasticOptions& opt) {
    return remote::follow_elastic_slurm(db, id, runtime, opt);
  });
}

void LaunchController::start_elastic_follow(
    store::RunId run, ElasticChoice elastic,
    std::function<Result<remote::ElasticOutcome>(const std::filesystem::path&, store::RunId,
                                                 const remote::ElasticOptions&)> follow) {
  if (following(run)) return;
  auto a = std::make_unique<Active>();
  a->elastic = elastic;
  QPointer<LaunchController> self(this);
  remote::ElasticOptions opt;
  opt.max_replans = elastic.max_replans;
  opt.follow = follow_events_to(self, run);
  opt.on_notice = opt.follow.on_event;
  Active* raw = a.get();
  opt.on_follower = [raw](remote::RunFollower* f) {
    std::lock_guard lock(raw->inner_mu);
    raw->inner_follower = f;
  };
  a->thread = std::thread([self, raw, run, opt, follow = std::move(follow), db = std::filesystem::path(db_.toStdString())] {
    auto outcome = follow(db, run, opt);
    Result<remote::FollowOutcome> last = outcome ? Result<remote::FollowOutcome>(outcome->last)
                                                 : Result<remote::FollowOutcome>(outcome.error());
    if (outcome && outcome->refused && !outcome->last.root_cause)
      last = Result<remote::FollowOutcome>(*outcome->refused);
    report_finished(self, raw->done, run, last);
  });
  active_[run] = std::move(a);
}

bool LaunchController::attach(store::RunId run, const nlohmann::json& launch_record) {
  reap();
  follow(run, launch_record);
  return following(run);
}

void LaunchController::stop(store::RunId run) {
  auto it = active_.find(run);
  if (it != active_.end() && !it->second->done) {
    it->second->with_follower([](remote::RunFollower& f) { f.stop_run(); });  // thread-safe; run() returns "stopped"
    return;
  }
  // Not followed by this workbench: stop it directly, off the GUI thread (store read included).
  QPointer<LaunchController> self(this);
  const std::string db = db_.toStdString();
  std::thread([self, run, db, ssh = ssh_] {
    const Status st = remote::stop_and_record(db, run, ssh, "the workbench");
    QMetaObject::invokeMethod(self, handed_over([self, run, ok = bool(st), msg = st ? QString() : q(st.error().message())] {
      if (self) Q_EMIT self->finished(run, ok ? QStringLiteral("stopped") : QStringLiteral("failed"), msg);
    }), Qt::QueuedConnection);
  }).detach();
}

bool LaunchController::following(store::RunId run) const {
  auto it = active_.find(run);
  return it != active_.end() && !it->second->done;
}

std::vector<store::RunId> LaunchController::followed_runs() const {
  std::vector<store::RunId> out;
  for (const auto& [id, a] : active_)
    if (!a->done) out.push_back(id);
  return out;
}

void LaunchController::detach_all() {
  for (auto& [id, a] : active_)
    if (!a->done) a->with_follower([](remote::RunFollower& f) { f.detach(); });
}

void LaunchController::reap() {
  for (auto it = active_.begin(); it != active_.end();) {
    if (it->second->done) {
      if (it->second->thread.joinable()) it->second->thread.join();
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace meshwork::ui
