// Launching and following runs from the workbench, off the GUI thread. Uses remote's run control
// (remote/run_control.h) exactly as `meshwork launch` / `attach` / `stop` do: launch_run() on a
// worker thread with its progress callbacks turned into queued signals, then a RunFollower per
// run that streams every rank's metrics into the store until the run ends.
//
// An elastic launch (the Launch form's Elastic box) is followed by remote::follow_elastic (SSH
// nodes) or remote::follow_elastic_slurm (a Slurm job), as `meshwork launch --elastic` is: a lost
// node re-plans and resumes (or resubmits) at once. A failed run that lost
// a node can be resumed by hand: plan_resume() asks remote::plan_resume (the re-plan `meshwork
// resume --dry-run` prints) and resume() launches it as the run's next segment (remote's
// launch_segment, as `meshwork resume` does).
//
// Runs outlive the workbench: closing the window detaches the followers (the supervisors keep
// running, detached by setsid on their nodes); on the next start MainWindow::attach_running()
// reads the runs the store still marks as running (on the store worker) and attach() follows
// each, resuming from the byte offsets the store kept. Nothing here reads the store on the GUI
// thread.
#pragma once

#include <QObject>
#include <QString>
#include <QVariantMap>
#include <filesystem>
#include <functional>
#include <map>
#include <variant>
#include <memory>
#include <thread>

#include "core/run_config.h"
#include "core/store/run_store.h"
#include "remote/deploy.h"
#include "remote/run_control.h"
#include "remote/slurm_script.h"
#include "remote/ssh_session.h"

namespace meshwork::remote {
class RunFollower;
struct ResumePlan;
struct ElasticOptions;
struct ElasticOutcome;
}

namespace meshwork::ui {

struct DeployUpdate {
  int node = 0;
  QString host;
  QString stage;   // remote's words: preparing, uploading, skipped, checking, done, failed
  QString file;
  double bytes_done = 0;
  double bytes_total = 0;
  QString message;
  double rate = 0;    // bytes/s, from remote (0: unknown)
  double eta_s = -1;  // seconds left (-1: unknown)
};

// The Launch form's Elastic box: follow with remote::follow_elastic, re-planning at most
// max_replans times.
struct ElasticChoice {
  bool on = false;
  int max_replans = 3;
  bool operator==(const ElasticChoice&) const = default;
};

// What resuming a failed run on its surviving nodes would do, for the run page's resume panel.
struct ResumeOffer {
  qint64 run = 0;
  QString lost;        // "node 1 (node1) lost: its supervisor and ranks were killed (...)"
  MeshShape old_shape;
  MeshShape new_shape;
  QString plan_text;   // remote::ResumePlan::text(): the table `meshwork resume --dry-run` prints
  qint64 checkpoint_step = 0;  // 0: no complete checkpoint, the segment trains from step 1
  bool fits = false;
  QString refusal;     // when nothing fits: the re-plan's words, naming what would
};

class LaunchController : public QObject {
  Q_OBJECT
 public:
  explicit LaunchController(QString db, QObject* parent = nullptr);
  ~LaunchController() override;  // detaches every follower: the runs go on

  // Starts launching `config` on its nodes (config.nodes; empty = the local machine with the
  // mesh's world size). Returns false (and says why through launch_failed) when one is already
  // launching.
  bool launch(const RunConfig& config, ElasticChoice elastic = {});
  // How the run is followed: elastic (and its re-plan budget) or not; {} when not followed.
  ElasticChoice elastic_of(store::RunId run) const;
  // For a failed run: which nodes were lost and the re-plan for the survivors (off the GUI
  // thread); answers with resume_offered, or resume_unavailable (no node lost, ...). A Slurm
  // run's lost job nodes are found as `meshwork resume` finds them, and resume() resubmits it.
  void plan_resume(store::RunId run);
  // Launches the offer plan_resume() made for `run` as its next segment from the last complete
  // checkpoint and follows it (launched(run) when started). False when there is no such offer
  // or a launch is already running.
  bool resume(store::RunId run);
  // The same run on a Slurm cluster through its login node ("local" = this machine):
  // remote::launch_slurm_run (sbatch), then followed with Slurm's state (remote/slurm_run.h);
  // with `elastic` on, by remote::follow_elastic_slurm: a lost job node is re-planned for and
  // the job resubmitted without it, as `meshwork launch --slurm --elastic` does.
  bool launch_slurm(const RunConfig& config, const QString& login, const remote::SlurmJobOptions& job,
                    ElasticChoice elastic = {});
  // Reads the partitions of a Slurm cluster (sinfo on its login node); answers with
  // slurm_probed or slurm_probe_failed.
  void probe_slurm(const QString& login);
  bool launching() const { return launching_; }
  // Follows a stored run that was launched earlier, from its launch record (the store's
  // runs.cluster["launch"], read by the caller on the store worker). False when it cannot.
  bool attach(store::RunId run, const nlohmann::json& launch_record);
  // Follows a stored Slurm run (the store's runs.cluster has "slurm").
  bool attach_slurm(store::RunId run);
  // SIGTERM then SIGKILL to every rank of the run (the follower records it as stopped).
  void stop(store::RunId run);
  bool following(store::RunId run) const;
  std::vector<store::RunId> followed_runs() const;  // the runs this workbench follows now
  void detach_all();  // stop following; the runs go on

  // SSH options for launch, follow and stop (the prober's: the same ssh_config, identity and
  // known_hosts whose keys the user reviewed on the node cards). Unknown keys are refused here.
  void set_ssh_options(const remote::SshOptions& options);
  const remote::SshOptions& ssh_options() const { return ssh_; }

  // The meshtrain binary to deploy: $MESHWORK_MESHTRAIN, else next to this executable.
  static QString trainer_path();
  // The runtime the nodes use (the Cluster mode's Runtime choice, RuntimePanel): a runtime
  // bundle to launch instead of the plain meshtrain (docs/remote.md "Runtime bundle"), or the
  // nodes' own torch site-packages (--node-torch); both empty = this machine's LibTorch.
  void set_runtime(const QString& bundle, const QString& node_torch);
  // $MESHWORK_BUNDLE (tests use it): when set it wins over set_runtime (and no node torch).
  static QString env_bundle_path();
  // What launches use: $MESHWORK_BUNDLE, else the bundle of set_runtime, else empty.
  QString bundle_path() const;
  QString node_torch() const;  // empty with a bundle
  // The request launch() hands to remote::launch_run for `config` (progress callbacks included).
  remote::LaunchRequest request(const RunConfig& config);

 Q_SIGNALS:
  void launch_step(const QString& text);             // "probing 1 node(s)", "deploying", ...
  void deploy_progress(const meshwork::ui::DeployUpdate& update);
  void launched(qint64 run);                         // recorded in the store and started
  // One row per partition: name, default, nodes, idle nodes, GPUs per node (+ type), CPUs per
  // node, memory per node (MiB), time limit.
  void slurm_probed(const QString& login, const QList<QVariantMap>& partitions);
  void slurm_probe_failed(const QString& login, const QString& message);
  void launch_failed(const QString& message, const QStringList& details);
  void follow_event(qint64 run, const QString& level, const QString& text);
  void resume_offered(const meshwork::ui::ResumeOffer& offer);
  void resume_unavailable(qint64 run, const QString& why);
  // The follower returned: state is ok / failed / stopped / detached.
  void finished(qint64 run, const QString& state, const QString& root_cause);

 private:
  struct Active;
  void follow(store::RunId run, const nlohmann::json& launch_record);
  void follow_elastic(store::RunId run, const remote::LaunchRecord& record, const remote::LaunchRequest& base,
                      ElasticChoice elastic);
  void follow_elastic_slurm(store::RunId run, const remote::LaunchRequest& runtime, ElasticChoice elastic);
  // The thread of an elastic follow: `follow` runs there with options whose notices and follower
  // reach this controller.
  void start_elastic_follow(store::RunId run, ElasticChoice elastic,
                            std::function<Result<remote::ElasticOutcome>(const std::filesystem::path&, store::RunId,
                                                                         const remote::ElasticOptions&)> follow);
  // `runtime` and `elastic`: followed by follow_elastic_slurm when elastic.on.
  void follow_slurm(store::RunId run, const remote::LaunchRequest* runtime = nullptr, ElasticChoice elastic = {});
  // `base` and `elastic`: the launch is followed elastic (follow_elastic, or follow_elastic_slurm
  // for a Slurm job) when elastic.on.
  bool start_launch(std::function<std::variant<remote::LaunchedRun, remote::LaunchError>()> fn, bool slurm,
                    const remote::LaunchRequest* base = nullptr, ElasticChoice elastic = {});
  void reap();

  QString db_;
  remote::SshOptions ssh_;
  QString bundle_;
  QString node_torch_;
  bool launching_ = false;
  std::thread launch_thread_;
  std::map<store::RunId, std::unique_ptr<Active>> active_;
  struct OfferedResume;
  std::map<store::RunId, std::shared_ptr<const OfferedResume>> resume_plans_;  // offered, not yet taken
};

}  // namespace meshwork::ui

Q_DECLARE_METATYPE(meshwork::ui::DeployUpdate)
Q_DECLARE_METATYPE(meshwork::ui::ResumeOffer)
