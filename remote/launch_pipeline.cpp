#include "remote/launch_pipeline.h"

#include "core/shell_quote.h"

#include <ctime>
#include <random>

#include "core/model_spec.h"
#include "core/parallel_layout.h"
#include "core/store/run_segments.h"
#include "remote/data_placement.h"
#include "remote/deploy.h"
#include "remote/node_torch.h"
#include "remote/run_layout.h"

namespace meshwork::remote {

LaunchError launch_invalid(Error e) {
  e.kind = ErrorKind::invalid_input;
  return LaunchError{std::move(e), {}};
}

LaunchError launch_failed(Error e) {
  if (e.kind == ErrorKind::invalid_input) e.kind = ErrorKind::remote;
  return LaunchError{std::move(e), {}};
}

LaunchError launch_errors(std::vector<Error> errors, ErrorKind kind) {
  LaunchError out;
  out.more = std::move(errors);
  for (Error& e : out.more) e.kind = kind;
  if (!out.more.empty()) out.error = out.more.front();
  return out;
}

TempPath::~TempPath() {
  std::error_code ignored;  // nothing to tell anyone about a temporary file that would not go
  std::filesystem::remove_all(path_, ignored);
}

std::string new_run_dir_name() {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::random_device rd;
  char rnd[16];
  std::snprintf(rnd, sizeof rnd, "%06x", rd() & 0xffffff);
  return std::string("run-") + stamp + "-" + rnd;
}

std::variant<std::optional<BundleManifest>, LaunchError> choose_runtime(const LaunchRequest& req) {
  if (!req.bundle_path.empty() && !req.node_torch.empty()) {
    return launch_invalid(Error{"--node-torch", req.node_torch, "not with --bundle (a bundle carries its own LibTorch)"});
  }
  if (!req.bundle_path.empty()) {
    auto b = load_bundle(req.bundle_path);
    if (!b) return launch_invalid(b.error());
    return std::optional<BundleManifest>(*b);
  }
  if (req.trainer_path.empty() || !std::filesystem::exists(req.trainer_path)) {
    return launch_invalid(Error{"--meshtrain", req.trainer_path, "must be the meshtrain binary to deploy"});
  }
  // An installed meshtrain (bin/ beside share/meshwork/bundles, the Debian package) finds
  // LibTorch by a run path relative to itself, which a copy in a run directory loses: the
  // installed cpu bundle, the same meshtrain with its libraries, is what goes to the nodes.
  if (req.node_torch.empty()) {
    const auto installed = std::filesystem::path(req.trainer_path).parent_path() / ".." / "share" / "meshwork" /
                           "bundles" / "meshtrain-cpu.tar.zst";
    std::error_code ec;
    if (std::filesystem::exists(installed, ec)) {
      auto b = load_bundle(installed.lexically_normal().string());
      if (!b) return launch_invalid(b.error());
      return std::optional<BundleManifest>(*b);
    }
  }
  return std::optional<BundleManifest>();
}

std::variant<RunConfig, LaunchError> check_launch_layout(RunConfig config) {
  auto model = model_spec_from_run_model(config.model);
  if (!model) return launch_invalid(model.error());
  const LayoutCheck checked = ParallelLayout::check(config, &*model, Placement::of(config));
  if (!checked.ok()) {
    LaunchError e = launch_invalid(checked.report.first_error());
    for (const Diagnostic& d : checked.report.errors()) e.more.push_back(d.to_error());
    return e;
  }
  config.mesh = checked.layout->shape();  // the nodes run the resolved shape
  return config;
}

std::optional<LaunchError> check_bundle_flavour(const LaunchPlan& plan) {
  if (!plan.bundle || plan.config.training.device != DeviceKind::cuda || plan.bundle->flavour == "cuda") {
    return std::nullopt;
  }
  return launch_invalid(Error{"--bundle", plan.bundle->archive_path,
                              "is the " + plan.bundle->flavour + " flavour: a --device cuda run needs the cuda flavour "
                              "(scripts/bundle cuda)"});
}

std::variant<LaunchPlan, LaunchError> prepare_launch(const LaunchRequest& req, LaunchTarget& target,
                                                     const LaunchStepFn& step) {
  LaunchPlan plan;
  auto nproc = target.check_request(req);
  if (auto* e = std::get_if<LaunchError>(&nproc)) return *e;
  plan.nproc_per_node = std::get<int>(nproc);
  if (req.max_restarts < 0) {
    return launch_invalid(Error{"--max-restarts", std::to_string(req.max_restarts), "a whole number >= 0"});
  }
  auto runtime = choose_runtime(req);
  if (auto* e = std::get_if<LaunchError>(&runtime)) return *e;
  plan.bundle = std::get<0>(std::move(runtime));

  if (auto e = target.reach(req, step)) return *e;

  step("checking the layout");
  // The config as the nodes will run it: the target's nodes, nothing but host and slots.
  RunConfig config = req.config;
  if (config.name.empty()) config.name = "run";
  target.place(config, plan.nproc_per_node);
  auto checked = check_launch_layout(std::move(config));
  if (auto* e = std::get_if<LaunchError>(&checked)) return *e;
  plan.config = std::get<RunConfig>(std::move(checked));
  if (auto e = check_bundle_flavour(plan)) return *e;
  if (auto e = target.check_devices(plan, step)) return *e;
  if (req.max_restarts > 0 && plan.config.training.checkpoint_every <= 0) {
    step("warning: --max-restarts without --checkpoint-every K: a restart begins again at step 0");
  }
  return plan;
}

std::variant<StagedRun, LaunchError> stage_launch(const LaunchRequest& req, LaunchPlan& plan, LaunchSite& site,
                                                  const LaunchStepFn& step) {
  // Training and held-out data: on every node already, or uploaded with the run, or refused
  // here (data_placement.h).
  std::vector<Node*> nodes;
  for (auto& node : site.nodes) nodes.push_back(node.get());
  auto data_uploads = place_run_data(plan.config, nodes, step);
  if (!data_uploads) return launch_invalid(data_uploads.error());

  step("deploying to " + std::to_string(nodes.size()) + " node(s)");
  StagedRun staged;
  staged.run_name = new_run_dir_name();
  const auto tmp = std::filesystem::temp_directory_path();
  const TempPath config_file(tmp / ("meshwork-" + staged.run_name + ".json"));
  if (auto st = save_run_config(plan.config, config_file.path()); !st) return launch_failed(st.error());
  DeployFile trainer{req.trainer_path, staged.trainer, 0700, ""};
  const TempPath moved_trainer(tmp / ("meshwork-" + staged.run_name + "-trainer"));
  if (!req.node_torch.empty()) {
    auto moved = retarget_trainer(req.trainer_path, req.node_torch, moved_trainer.path());
    if (!moved) return launch_invalid(moved.error());
    trainer.local_path = *moved;
  }
  if (plan.bundle) {
    // The bundle first (once per node or shared filesystem); the run directory then links to it,
    // so meshtrain_command() stays `./meshtrain ...` either way.
    step("deploying the runtime bundle (" + req.bundle_root + ")");
    BundleDeployOptions opts;
    opts.root = req.bundle_root;
    opts.reconnect = [&](size_t i) { return connect_node(site.hosts[i], req.ssh); };
    std::vector<Error> failed;
    for (auto& r : deploy_bundle_all(site.nodes, *plan.bundle, opts, req.on_deploy)) {
      if (r) {
        staged.bundle.push_back(*r);
      } else {
        failed.push_back(r.error());
      }
    }
    if (!failed.empty()) return launch_errors(std::move(failed), ErrorKind::remote);
    trainer = DeployFile{"", staged.trainer, 0700, req.bundle_root + "/" + plan.bundle->sha256 + "/" + plan.bundle->trainer};
  }
  nodes.clear();
  for (auto& node : site.nodes) nodes.push_back(node.get());  // the bundle may have reconnected some
  std::vector<DeployFile> files = {trainer, DeployFile{config_file.path().string(), kRunConfigFile, 0600, ""}};
  files.insert(files.end(), data_uploads->begin(), data_uploads->end());
  auto deployed = deploy_all(nodes, req.remote_root, staged.run_name, files, staged.trainer, req.on_deploy);
  if (!deployed.ok()) {
    std::vector<Error> failed;
    for (const auto& r : deployed.nodes) {
      if (!r) failed.push_back(r.error());
    }
    return launch_errors(std::move(failed), ErrorKind::remote);
  }
  for (const auto& r : deployed.nodes) staged.run_dirs.push_back(r->run_dir);
  return staged;
}

int choose_master_port(int requested) {
  if (requested != 0) return requested;
  std::random_device rd;
  return 29500 + static_cast<int>(rd() % 2000);
}

std::variant<RecordedRun, LaunchError> record_launch(const std::filesystem::path& db, const LaunchPlan& plan,
                                                     const LaunchRecord& rec, const std::vector<NodeInfo>& probes,
                                                     const nlohmann::json& target_record) {
  RecordedRun out;
  auto store = store::RunStore::open(db);
  if (!store) return launch_failed(store.error());
  out.store = std::move(*store);
  nlohmann::json probed = nlohmann::json::array();
  for (const auto& info : probes) probed.push_back(to_json(info));
  nlohmann::json cluster = {{"launch", to_json(rec)}, {"probes", probed}};
  if (target_record.is_object()) cluster.update(target_record);
  auto id = out.store->create_run(plan.config.name, to_json(plan.config), cluster);
  if (!id) return launch_failed(id.error());
  out.id = *id;
  return out;
}

Result<int> next_segment_index(const std::filesystem::path& db, store::RunId run) {
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  auto segments = store::run_segments(**store, run);
  if (!segments) return segments.error();
  return segments->empty() ? 1 : static_cast<int>(segments->size());
}

std::variant<RecordedRun, LaunchError> record_segment(const std::filesystem::path& db, const LaunchPlan& plan,
                                                      const LaunchRecord& rec, const std::vector<NodeInfo>& probes,
                                                      const nlohmann::json& target_record, const SegmentOf& segment) {
  RecordedRun out;
  auto store = store::RunStore::open(db);
  if (!store) return launch_failed(store.error());
  out.store = std::move(*store);
  out.id = segment.run;
  auto info = out.store->get_run(segment.run);
  if (!info) return launch_failed(info.error());
  nlohmann::json probed = nlohmann::json::array();
  for (const auto& p : probes) probed.push_back(to_json(p));
  // The segment's own config (its nodes and shape): the run's stored config stays the one it
  // was launched with; a later re-plan starts from this one.
  nlohmann::json cluster = {{"launch", to_json(rec)}, {"probes", probed}, {"segment_config", to_json(plan.config)}};
  if (target_record.is_object()) cluster.update(target_record);
  nlohmann::json earlier = info->cluster.value("earlier", nlohmann::json::array());
  if (info->cluster.contains("launch")) earlier.push_back(info->cluster.at("launch"));
  cluster["earlier"] = earlier;
  std::vector<std::string> hosts;
  for (const NodeConfig& n : plan.config.nodes) hosts.push_back(n.host);
  auto begun = store::begin_segment(*out.store, segment.run, segment.from_step, plan.config.mesh, hosts,
                                    segment.cause, static_cast<double>(std::time(nullptr)));
  if (!begun) return launch_failed(begun.error());
  if (begun->segment != rec.segment)
    return launch_failed(Error{"segment", std::to_string(begun->segment),
                               "segment " + std::to_string(rec.segment) + " (another launch resumed the run meanwhile)"}
                             .as(ErrorKind::internal));
  if (Status st = store::set_run_cluster(*out.store, segment.run, cluster); !st) return launch_failed(st.error());
  (void)out.store->add_event(segment.run, "warning",
                             "segment " + std::to_string(rec.segment) + " from step " +
                                 std::to_string(segment.from_step) + " at " + plan.config.mesh.to_string() + " on " +
                                 std::to_string(rec.world_size()) + " rank(s): " + segment.cause);
  return out;
}

namespace {

// A resumed segment keeps its checkpoints in a directory of its own (<its run dir>/checkpoints),
// seeded with hard links to the complete checkpoint it resumes from. The ranks of a lost node may
// still run (its link was cut, not its processes) and write into the directory they were started
// with, perhaps much later (a blocked network filesystem flushing once the link is back); nothing
// they write can then replace a file of this segment's checkpoints. They cannot make a checkpoint
// COMPLETE either: rank 0 writes it only after a barrier of their whole (old) world. Each file is
// written to a temporary name and renamed (trainer/checkpoint.h), so a late write to the old
// directory replaces its entry there and never changes the linked file. A copy where links fail
// (another filesystem). Returns the segment's checkpoint directory.
Result<std::string> seed_checkpoints(Node& node, const std::string& run_dir, const SegmentOf& seg) {
  const std::string dest = run_dir + "/checkpoints";
  const int64_t step = seg.from_step - 1;
  std::string cmd = "mkdir -p -- " + shell_quote(dest);
  if (step > 0) {
    // The step directory as named (step-%08lld; a step-<k> reads the same), with COMPLETE only.
    const std::string k = std::to_string(step), to = shell_quote(dest + "/");
    cmd += " && cd -- " + shell_quote(seg.checkpoint_dir) + R"( && found= && for d in step-*; do )" +
           R"([ -e "$d/COMPLETE" ] || continue; n="${d#step-}"; n="${n#"${n%%[!0]*}"}"; [ "$n" = )" + k +
           R"( ] || continue; cp -al -- "$d" )" + to + R"( 2>/dev/null || cp -a -- "$d" )" + to +
           R"( || exit 1; found=1; done; [ -n "$found" ] || { echo "no complete step-)" + k + R"( there" >&2; exit 1; })";
  }
  auto r = node.exec(cmd, std::chrono::seconds(600));
  if (!r) return r.error();
  if (r->exit_code != 0)
    return Error{"checkpoint directory", seg.checkpoint_dir,
                 "the complete checkpoint of step " + std::to_string(step) + ", linked or copied into " + dest + ": " +
                     r->err};
  return dest;
}

}  // namespace

std::variant<LaunchedRun, LaunchError> launch_through(const std::filesystem::path& db, const LaunchRequest& req,
                                                      LaunchTarget& target) {
  const LaunchStepFn step = [&](const std::string& s) {
    if (req.on_step) req.on_step(s);
  };
  auto prepared = prepare_launch(req, target, step);
  if (auto* e = std::get_if<LaunchError>(&prepared)) return *e;
  LaunchPlan& plan = std::get<LaunchPlan>(prepared);

  auto staged_or = stage_launch(req, plan, target.site, step);
  if (auto* e = std::get_if<LaunchError>(&staged_or)) return *e;
  const StagedRun& staged = std::get<StagedRun>(staged_or);

  LaunchRecord rec;
  rec.trainer = staged.trainer;
  rec.max_restarts = req.max_restarts;
  rec.subcommand = req.subcommand;
  rec.master_port = choose_master_port(req.master_port);
  if (req.segment_of) {
    auto index = next_segment_index(db, req.segment_of->run);
    if (!index) return launch_failed(index.error());
    rec.segment = *index;
    auto seeded = seed_checkpoints(*target.site.nodes.front(), staged.run_dirs.front(), *req.segment_of);
    if (!seeded) return launch_failed(seeded.error().as(ErrorKind::remote));
    rec.checkpoint_dir = *seeded;
    rec.resume = true;
  }
  target.describe(req, plan, staged, rec);
  auto submitted = target.submit(plan, staged, rec, step);
  if (auto* e = std::get_if<LaunchError>(&submitted)) return *e;

  step("recording the run");
  auto recorded = req.segment_of ? record_segment(db, plan, rec, target.site.probes,
                                                  std::get<nlohmann::json>(submitted), *req.segment_of)
                                 : record_launch(db, plan, rec, target.site.probes, std::get<nlohmann::json>(submitted));
  if (auto* e = std::get_if<LaunchError>(&recorded)) {
    target.withdraw();
    return *e;
  }
  RecordedRun& run = std::get<RecordedRun>(recorded);
  if (auto e = target.start(*run.store, run.id, plan, staged, rec, step)) return *e;

  LaunchedRun out;
  out.id = run.id;
  out.record = rec;
  out.probes = target.site.probes;
  out.bundle = staged.bundle;
  return out;
}

}  // namespace meshwork::remote
