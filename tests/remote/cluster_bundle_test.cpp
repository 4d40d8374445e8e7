// The runtime bundle on the namespace cluster (docs/remote.md, "Runtime bundle"). bare0 and bare1
// are nodes 0 and 1 reached through a second sshd that lives in a mount namespace where the
// workbench's torch environment, the checkout and the build tree are hidden and the bundle
// directory is the node's own (tests/cluster/cluster.sh, MESHWORK_CLUSTER_BARE): only the bundle
// can make meshtrain run there. node0 and node1 share the filesystem (and so a bundle directory).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include "core/store/run_store.h"
#include "remote/bundle.h"
#include "remote/node_torch.h"
#include "remote/run_control.h"
#include "core/shell_quote.h"
#include "cli_process.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

namespace fs = std::filesystem;
using test::Cli;
using test::run_cli;

int parent_of(pid_t pid) {
  const std::string stat = test::read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream in(stat.substr(paren + 2));
  std::string state;
  int ppid = -1;
  in >> state >> ppid;
  return ppid;
}

class ClusterBundle : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = test::cluster();
    if (!c) GTEST_SKIP() << "no test cluster (run under ctest: fixture cluster_up)";
    cluster_ = *c;
    ASSERT_NE(test::read_text(cluster_.dir / "ssh_config").find("Host bare1"), std::string::npos)
        << "the test cluster has no bare nodes (cluster.sh with MESHWORK_CLUSTER_BARE=\"0 1\")";
    bundle_path_ = std::string(MESHWORK_BUNDLE_DIR) + "/meshtrain-cpu.tar.zst";
    auto b = load_bundle(bundle_path_);
    ASSERT_TRUE(b.ok()) << b.error().message() << " (build the bundle-cpu target)";
    bundle_ = *b;
    tmp_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    root_ = tmp_ / "runs it's \"q\"; $(touch pwned)";
    db_ = tmp_ / "runs.db";
  }

  // The bundles a test unpacked under its temporary directory are ~0.5 GB: not left behind.
  void TearDown() override {
    std::error_code ec;
    if (!tmp_.empty()) fs::remove_all(tmp_ / "shared bundles", ec);
  }

  SshOptions ssh() const { return cluster_.options(tmp_ / "known_hosts_lib"); }

  std::unique_ptr<Node> connect(const std::string& host) {
    auto spec = parse_host_spec(host);
    EXPECT_TRUE(spec.ok());
    auto conn = connect_node(*spec, ssh());
    if (auto* e = std::get_if<ConnectError>(&conn)) {
      ADD_FAILURE() << e->error.message();
      return nullptr;
    }
    return std::move(std::get<0>(conn));
  }

  std::string exec(Node& node, const std::string& cmd) {
    auto r = node.exec(cmd);
    EXPECT_TRUE(r.ok());
    return r ? r->out : std::string();
  }

  // Empties a bare node's own bundle directory (the bundles and partial uploads; .fsid stays).
  void clear_bundles(const std::string& host) {
    auto node = connect(host);
    ASSERT_TRUE(node);
    exec(*node, "cd .cache/meshwork/bundles 2>/dev/null && rm -rf -- ./*; echo");
  }

  std::vector<std::string> launch_args(const std::string& name, const std::string& trainer_flag,
                                       const std::string& trainer_value) const {
    return {"launch", "--hosts", "bare0,bare1", "--nproc-per-node", "2", "--dp-replicate", "2", "--dp-shard", "2",
            "--model", "tiny", "--steps", "4", "--seq-len", "64", "--global-batch", "4", "--name", name,
            "--remote-root", root_.string(), trainer_flag, trainer_value, "--master-port",
            std::to_string(29000 + (::getpid() + static_cast<int>(name.size())) % 900),
            "--ssh-config", cluster_.ssh_config(), "--known-hosts", (tmp_ / "known_hosts").string(),
            "--identity", cluster_.identity(), "--accept-new-host-keys", "--db", db_.string()};
  }

  // Kills every sshd process serving a connection of node i's bare sshd (a cut link).
  int cut_bare_link(int i) {
    const fs::path d = cluster_.dir / ("node" + std::to_string(i));
    const pid_t listener = std::stoi(test::read_text(d / "sshd-bare.pid"));
    const std::string ns = test::read_text(d / "ns");
    const std::string list = (tmp_ / "pids").string();
    std::system(("ip netns pids " + shell_quote(ns.substr(0, ns.find('\n'))) + " > " + shell_quote(list)).c_str());
    std::ifstream in(list);
    int killed = 0;
    pid_t pid;
    while (in >> pid) {
      if (pid == listener) continue;
      bool served = false;  // a descendant of the bare listener
      for (int p = parent_of(pid), hops = 0; p > 1 && hops < 8; p = parent_of(p), ++hops) {
        if (p == listener) served = true;
      }
      if (served && ::kill(pid, SIGKILL) == 0) ++killed;
    }
    return killed;
  }

  test::Cluster cluster_;
  std::string bundle_path_;
  BundleManifest bundle_;
  fs::path tmp_, root_, db_;
};

TEST_F(ClusterBundle, BareNodesRunOnlyFromTheBundleAndASecondLaunchUploadsNothing) {
  // The bare node really is bare: no torch environment, no build tree.
  auto bare = connect("bare1");
  ASSERT_TRUE(bare);
  const std::string venv = std::string(std::getenv("HOME") ? std::getenv("HOME") : "/root") + "/.cache/meshwork/torch-2.15.0";
  EXPECT_EQ(exec(*bare, "ls -A " + shell_quote(venv) + " | wc -l"), "0\n");
  EXPECT_EQ(exec(*bare, "[ -e " + shell_quote(std::string(MESHWORK_BIN_DIR) + "/meshtrain") + " ] && echo visible || echo hidden"),
            "hidden\n");
  // So the workbench's meshtrain cannot run there: deploy refuses it, naming a library.
  const Cli plain = run_cli(launch_args("plain", "--meshtrain", std::string(MESHWORK_BIN_DIR) + "/meshtrain"), tmp_);
  EXPECT_EQ(plain.code, 1) << plain.err;
  EXPECT_NE(plain.err.find("missing libraries"), std::string::npos) << plain.err;

  clear_bundles("bare0");
  clear_bundles("bare1");
  const Cli first = run_cli(launch_args("first", "--bundle", bundle_path_), tmp_);
  ASSERT_EQ(first.code, 0) << first.err;
  // Two filesystems (each bare node has its own bundle directory): two whole uploads.
  const std::string full = "done, " + std::to_string(bundle_.archive_size) + " bytes";
  EXPECT_NE(first.err.find("bundle bare0: " + full), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("bundle bare1: " + full), std::string::npos) << first.err;
  // Per-node progress: bytes done of the bundle's size, the percentage, the rate and the ETA;
  // the last report of each node's upload is the whole bundle, at a rate, 0 s left.
  const double size_mib = std::round(static_cast<double>(bundle_.archive_size) / (1024.0 * 1024.0) * 10) / 10;
  for (const char* host : {"bare0", "bare1"}) {
    const auto lines = test::bundle_progress_lines(first.err, host);
    ASSERT_FALSE(lines.empty()) << "no progress line with bytes, rate and ETA for " << host << ": " << first.err;
    for (const auto& l : lines) {
      EXPECT_NEAR(l.total_mib, size_mib, 0.051) << host;
      EXPECT_LE(l.done_mib, l.total_mib) << host;
      EXPECT_NEAR(l.percent, l.done_mib / l.total_mib * 100, 1.0) << host;  // of the bytes, MiB rounded
      EXPECT_GT(l.rate_mib_s, 0) << host;
      EXPECT_GE(l.eta_s, 0) << host;
    }
    EXPECT_NEAR(lines.back().done_mib, size_mib, 0.051) << host;
    EXPECT_EQ(lines.back().percent, 100) << host;
    EXPECT_EQ(lines.back().eta_s, 0) << host;
  }

  const Cli second = run_cli(launch_args("second", "--bundle", bundle_path_), tmp_);
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_NE(second.err.find("bundle bare0: skipped, 0 bytes uploaded"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find("bundle bare1: skipped, 0 bytes uploaded"), std::string::npos) << second.err;
  EXPECT_EQ(second.err.find("bundle bare0: uploading"), std::string::npos) << second.err;
  EXPECT_EQ(second.err.find("bundle bare1: uploading"), std::string::npos) << second.err;

  // Both runs ran every step of every rank; meshtrain in the run directory is the bundle's.
  auto store = store::RunStore::open(db_);
  ASSERT_TRUE(store.ok());
  auto runs = (*store)->list_runs();
  ASSERT_TRUE(runs.ok());
  int ok_runs = 0;
  for (const auto& r : *runs) ok_runs += r.status == store::kStatusOk;
  EXPECT_EQ(ok_runs, 2);
  int links = 0;
  for (const auto& e : fs::directory_iterator(root_)) {
    if (!fs::is_symlink(e.path() / "meshtrain")) continue;
    EXPECT_NE(fs::read_symlink(e.path() / "meshtrain").string().find("/bundles/" + bundle_.sha256 + "/" + bundle_.trainer),
              std::string::npos);
    ++links;
  }
  EXPECT_EQ(links, 2);
}

TEST_F(ClusterBundle, LinkCutMidUploadResumesWhereItStoppedAndTheLaunchSucceeds) {
  clear_bundles("bare1");
  clear_bundles("bare0");
  {
    // bare0 has it already: only bare1's upload is cut.
    std::vector<std::unique_ptr<Node>> nodes;
    nodes.push_back(connect("bare0"));
    auto pre = deploy_bundle_all(nodes, bundle_, BundleDeployOptions{});
    ASSERT_TRUE(pre[0].ok()) << pre[0].error().message();
  }
  LaunchRequest req;
  req.config.model = "tiny";
  req.config.name = "cut";
  req.config.mesh[Axis::dp_replicate] = 2;
  req.config.mesh[Axis::dp_shard] = 2;
  req.config.training.steps = 4;
  req.config.training.seq_len = 64;
  req.config.training.global_batch = 4;
  req.config.nodes = {NodeConfig{"bare0", 2, {}}, NodeConfig{"bare1", 2, {}}};
  req.bundle_path = bundle_path_;
  req.remote_root = root_.string();
  req.master_port = 29000 + (::getpid() + 7) % 900;
  req.ssh = ssh();
  const uint64_t cut_at = bundle_.archive_size / 3;
  bool cut = false;
  int killed = 0;
  uint64_t resumed_at = 0;
  bool reconnected = false;
  req.on_deploy = [&](const DeployProgress& d) {
    if (d.node != 1) return;
    // Runs on the uploading thread: the upload waits while its link is cut, so the cut always
    // lands mid-upload.
    if (d.stage == "uploading" && !cut && d.bytes_done >= cut_at && d.bytes_done < d.bytes_total) {
      cut = true;
      killed = cut_bare_link(1);
    }
    if (d.stage == "reconnecting") reconnected = true;
    if (d.stage == "uploading" && d.message.rfind("resuming at byte ", 0) == 0) {
      resumed_at = std::stoull(d.message.substr(17));
    }
  };
  auto launched = launch_run(db_, req);
  ASSERT_TRUE(std::holds_alternative<LaunchedRun>(launched)) << std::get<LaunchError>(launched).error.message();
  const LaunchedRun& run = std::get<LaunchedRun>(launched);
  ASSERT_TRUE(cut);
  EXPECT_GT(killed, 0);
  EXPECT_TRUE(reconnected);
  ASSERT_EQ(run.bundle.size(), 2u);
  EXPECT_TRUE(run.bundle[0].skipped);
  EXPECT_GE(run.bundle[1].reconnects, 1);
  // Resumed where it stopped: from what had reached the node's disk (the bytes sent before the
  // cut, less what was still in flight: at most SSH's channel window and a pipe buffer, a few
  // MiB), and the resumed attempt sent only the rest.
  EXPECT_GE(resumed_at, cut_at / 2);
  EXPECT_EQ(run.bundle[1].bytes_uploaded, bundle_.archive_size - resumed_at);
  EXPECT_LT(run.bundle[1].bytes_uploaded, bundle_.archive_size);

  // The run itself succeeds (attach follows it to the end: exit 0 only for a run that succeeded).
  const Cli attach = run_cli({"attach", std::to_string(run.id), "--db", db_.string(), "--ssh-config",
                              cluster_.ssh_config(), "--known-hosts", (tmp_ / "known_hosts_lib").string(),
                              "--identity", cluster_.identity()},
                             tmp_);
  EXPECT_EQ(attach.code, 0) << attach.err;
}

TEST_F(ClusterBundle, NodesSharingAFilesystemUploadOnce) {
  // node0 and node1 see the same directory: one upload, the other node finds it there.
  const std::string root = (tmp_ / "shared bundles").string();
  std::vector<std::unique_ptr<Node>> nodes;
  nodes.push_back(connect("node0"));
  nodes.push_back(connect("node1"));
  BundleDeployOptions opts;
  opts.root = root;
  auto r = deploy_bundle_all(nodes, bundle_, opts);
  ASSERT_TRUE(r[0].ok()) << r[0].error().message();
  ASSERT_TRUE(r[1].ok()) << r[1].error().message();
  EXPECT_EQ(r[0]->fsid, r[1]->fsid);
  EXPECT_EQ(r[0]->bytes_uploaded, bundle_.archive_size);
  EXPECT_EQ(r[1]->bytes_uploaded, 0u);
  EXPECT_TRUE(r[1]->shared);
  EXPECT_TRUE(fs::exists(fs::path(root) / bundle_.sha256 / ".complete"));
  EXPECT_FALSE(fs::exists(fs::path(root) / (bundle_.sha256 + ".tar.zst.part")));
  // bare0 and bare1 have bundle directories of their own: different ids.
  std::vector<std::unique_ptr<Node>> bare;
  bare.push_back(connect("bare0"));
  bare.push_back(connect("bare1"));
  BundleDeployOptions bare_opts;
  bare_opts.root = ".cache/meshwork/bundles";
  auto b = deploy_bundle_all(bare, bundle_, bare_opts);
  ASSERT_TRUE(b[0].ok() && b[1].ok());
  EXPECT_NE(b[0]->fsid, b[1]->fsid);
  EXPECT_NE(b[0]->fsid, r[0]->fsid);
}

TEST_F(ClusterBundle, APartThatIsNotOursIsUploadedAgainFromTheStart) {
  // A leftover part of the right name but wrong bytes (zeros): resumed from its size, the hash
  // then differs, so the part is dropped and the whole bundle uploaded again, once.
  clear_bundles("bare1");
  std::vector<std::unique_ptr<Node>> nodes;
  nodes.push_back(connect("bare1"));
  ASSERT_TRUE(nodes[0]);
  const uint64_t junk = bundle_.archive_size / 2;
  exec(*nodes[0], "head -c " + std::to_string(junk) + " /dev/zero > .cache/meshwork/bundles/" + bundle_.sha256 +
                      ".tar.zst.part");
  auto r = deploy_bundle_all(nodes, bundle_, BundleDeployOptions{});
  ASSERT_TRUE(r[0].ok()) << r[0].error().message();
  EXPECT_EQ(r[0]->bytes_uploaded, (bundle_.archive_size - junk) + bundle_.archive_size);
  EXPECT_EQ(exec(*nodes[0], "cd .cache/meshwork/bundles && [ -f " + bundle_.sha256 + "/.complete ] && [ ! -e " +
                                bundle_.sha256 + ".tar.zst.part ] && echo whole"),
            "whole\n");
}

TEST_F(ClusterBundle, NodeTorchMovesMeshtrainsLibraryPathToTheNodesWheel) {
  // The nodes' "own" wheel: this machine's, seen under another path (a link named with a space).
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "/root";
  fs::path site;
  for (const auto& e : fs::directory_iterator(home + "/.cache/meshwork/torch-2.15.0/lib")) {
    if (fs::exists(e.path() / "site-packages" / "torch" / "lib")) site = e.path() / "site-packages";
  }
  ASSERT_FALSE(site.empty());
  const fs::path node_site = tmp_ / "node wheel";
  fs::create_directory_symlink(site, node_site);
  EXPECT_FALSE(retarget_trainer(std::string(MESHWORK_BIN_DIR) + "/meshtrain", "relative/site-packages", tmp_ / "x").ok());

  std::vector<std::string> args = launch_args("node-torch", "--meshtrain", std::string(MESHWORK_BIN_DIR) + "/meshtrain");
  args[2] = "node0,node1";
  args.push_back("--node-torch");
  args.push_back(node_site.string());
  const Cli r = run_cli(args, tmp_);
  ASSERT_EQ(r.code, 0) << r.err;
  // The deployed meshtrain names the node's wheel, not this machine's.
  int checked = 0;
  for (const auto& e : fs::directory_iterator(root_)) {
    if (!fs::exists(e.path() / "meshtrain")) continue;
    const std::string out = (tmp_ / "rpath.txt").string();
    ASSERT_EQ(std::system(("patchelf --print-rpath " + shell_quote((e.path() / "meshtrain").string()) + " > " +
                           shell_quote(out)).c_str()),
              0);
    const std::string rpath = test::read_text(out);
    EXPECT_NE(rpath.find(node_site.string() + "/torch/lib"), std::string::npos) << rpath;
    EXPECT_NE(rpath.find(node_site.string() + "/nvidia/"), std::string::npos) << rpath;
    EXPECT_EQ(rpath.find(site.string()), std::string::npos) << rpath;
    ++checked;
  }
  EXPECT_EQ(checked, 1);
}

}  // namespace
}  // namespace meshwork::remote
