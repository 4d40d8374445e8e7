#include "ui/calibrate_controller.h"

#include <QMetaObject>
#include <QPointer>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "core/calibration_records.h"
#include "core/store/calibration_store.h"
#include "core/store/run_store.h"
#include "remote/run_control.h"
#include "ui/launch_controller.h"
#include "core/handover.h"

namespace meshwork::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

// What the worker thread and the GUI thread share: the follower while it runs (for stop and for
// the destructor's detach) and whether a stop was asked before it existed.
struct CalibrateController::Shared {
  std::mutex mu;
  remote::RunFollower* follower = nullptr;
  bool stop_requested = false;
  bool detach_requested = false;
};

CalibrateController::CalibrateController(QString db, LaunchController* launcher, QObject* parent)
    : QObject(parent), db_(std::move(db)), launcher_(launcher) {}

CalibrateController::~CalibrateController() {
  if (shared_) {
    std::lock_guard lock(shared_->mu);
    shared_->detach_requested = true;
    if (shared_->follower) shared_->follower->detach();  // the ranks go on; the store keeps the run
  }
  if (thread_.joinable()) thread_.join();
}

RunConfig CalibrateController::calibration_config(RunConfig c) {
  if (c.nodes.empty()) c.nodes.push_back(NodeConfig{"local", 2, nlohmann::json::object()});
  c.name = "calibrate";
  // meshtrain calibrate builds its own groups: any valid shape of the world will do (as the CLI).
  c.mesh = MeshShape{1, -1, 1, 1};
  int world = 0;
  for (const NodeConfig& n : c.nodes) world += n.slots;
  // The matmuls are micro_batch x seq_len tokens of the model's layers; the batch only has to be
  // one the shape accepts.
  c.training.global_batch = std::max(1, c.training.micro_batch) * std::max(1, world);
  c.training.checkpoint_every = 0;
  c.data = nullptr;
  c.eval_data = nullptr;
  c.save_hf.clear();
  return c;
}

bool CalibrateController::calibrate(const RunConfig& config) {
  if (running_) {
    Q_EMIT failed(tr("A calibration is already running"));
    return false;
  }
  if (thread_.joinable()) thread_.join();
  remote::LaunchRequest req = launcher_->request(calibration_config(config));
  req.subcommand = "calibrate";
  QPointer<CalibrateController> self(this);
  auto say = [self](const QString& text) {
    QMetaObject::invokeMethod(self, handed_over([self, text] { if (self) Q_EMIT self->progress(text); }), Qt::QueuedConnection);
  };
  // The launcher's callbacks would report on its own signals (the Runs page's launch): ours.
  req.on_step = [say](const std::string& s) { say(q(s)); };
  req.on_probe = [say](const remote::ProbeProgress& p) {
    say(QStringLiteral("probe %1: %2").arg(q(p.host), q(p.stage)));
  };
  req.on_deploy = [say](const remote::DeployProgress& d) {
    QString line = QStringLiteral("deploy %1: %2").arg(q(d.host), q(d.stage));
    if (d.bytes_total > 0 && d.stage == "uploading")
      line += QStringLiteral(" %1 %").arg(100.0 * double(d.bytes_done) / double(d.bytes_total), 0, 'f', 0);
    say(line);
  };
  running_ = true;
  shared_ = std::make_shared<Shared>();
  auto shared = shared_;
  const std::filesystem::path db = db_.toStdString();
  thread_ = std::thread([self, shared, db, req, say] {
    auto fail = [self](const QString& message) {
      QMetaObject::invokeMethod(self, handed_over([self, message] {
        if (!self) return;
        self->running_ = false;
        Q_EMIT self->failed(message);
        Q_EMIT self->finished();
      }), Qt::QueuedConnection);
    };
    auto launched = remote::launch_run(db, req);
    if (auto* e = std::get_if<remote::LaunchError>(&launched)) {
      QString message = q(e->error.message());
      for (size_t i = 1; i < e->more.size(); ++i) message += "\n" + q(e->more[i].message());
      return fail(message);
    }
    const remote::LaunchedRun& run = std::get<remote::LaunchedRun>(launched);
    const store::RunId id = run.id;
    QMetaObject::invokeMethod(self, handed_over([self, id] { if (self) Q_EMIT self->started(id); }), Qt::QueuedConnection);
    say(CalibrateController::tr("run %1: measuring on %n node(s)", nullptr, int(run.record.nodes.size())).arg(id));

    remote::FollowOptions fo;
    fo.on_event = [say](const std::string& level, const std::string& text) {
      say(level == "info" ? q(text) : QStringLiteral("%1: %2").arg(q(level), q(text)));
    };
    remote::RunFollower follower(db, id, run.record, remote::make_connector(run.record, req.ssh), fo);
    {
      std::lock_guard lock(shared->mu);
      if (shared->detach_requested) return;  // the workbench is closing: the run goes on
      shared->follower = &follower;
      if (shared->stop_requested) follower.stop_run();
    }
    auto outcome = follower.run();
    {
      std::lock_guard lock(shared->mu);
      shared->follower = nullptr;
      if (shared->detach_requested) return;
    }
    if (!outcome) return fail(q(outcome.error().message()));
    if (outcome->state != remote::FollowOutcome::State::succeeded) {
      QString message = QStringLiteral("the calibration run %1 %2").arg(id).arg(q(outcome->state_name()));
      if (outcome->root_cause) message += ": " + q(outcome->root_cause->text());
      return fail(message);
    }

    // As `meshwork calibrate` does after its follow: fit the run's records, store the result.
    say(QStringLiteral("fitting the measurements"));
    auto st = store::RunStore::open(db);
    if (!st) return fail(q(st.error().message()));
    auto records = store::calibration_records(**st, id);
    if (!records) return fail(q(records.error().message()));
    std::vector<std::string> hosts;  // the launcher's names; a local node keeps its hostname
    for (const auto& n : run.record.nodes) hosts.push_back(n.host == "local" ? "" : n.host);
    auto cal = calibration_from_records(*records, hosts);
    if (!cal) return fail(q(cal.error().message()));
    auto saved = store::save_calibration(**st, *cal, id);
    if (!saved) return fail(q(saved.error().message()));
    const qint64 row = *saved;
    const QString summary =
        CalibrateController::tr("calibration %1 of %n node(s): %2 matmul rate(s), %3 collective fit(s)", nullptr,
                                int(cal->fingerprint.nodes.size()))
            .arg(q(cal->fingerprint.id()).left(8))
            .arg(cal->matmul.size())
            .arg(cal->collectives.size());
    QMetaObject::invokeMethod(self, handed_over([self, row, summary] {
      if (!self) return;
      self->running_ = false;
      Q_EMIT self->calibrated(row, summary);
      Q_EMIT self->finished();
    }), Qt::QueuedConnection);
  });
  return true;
}

void CalibrateController::stop() {
  if (!running_ || !shared_) return;
  std::lock_guard lock(shared_->mu);
  shared_->stop_requested = true;
  if (shared_->follower) shared_->follower->stop_run();
}

}  // namespace meshwork::ui
