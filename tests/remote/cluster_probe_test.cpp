// Sessions and probe against real sshd's in network namespaces (tests/cluster).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "remote/node.h"
#include "remote/probe.h"
#include "test_util.h"

namespace meshwork::remote {
namespace {

#define REQUIRE_CLUSTER(c)                                                            \
  auto c##_opt = test::cluster();                                                     \
  if (!c##_opt) GTEST_SKIP() << "no test cluster (run under ctest: fixture cluster_up)"; \
  const test::Cluster& c = *c##_opt

TEST(ClusterProbe, ProbesEveryNodeInParallelByAlias) {
  REQUIRE_CLUSTER(c);
  const auto tmp = test::temp_dir("probe");
  std::vector<HostSpec> hosts = {*parse_host_spec("node0"), *parse_host_spec("node1")};
  std::mutex mu;
  std::vector<std::string> stages;
  auto results = probe_hosts(hosts, c.options(tmp / "known_hosts"), [&](const ProbeProgress& p) {
    std::lock_guard lock(mu);
    stages.push_back(p.host + ":" + p.stage);
  });
  ASSERT_EQ(results.size(), 2u);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].info) << results[i].error->error.message();
    const NodeInfo& n = *results[i].info;
    EXPECT_GT(n.cpus, 0);
    EXPECT_GT(n.mem_total_bytes, 0);
    EXPECT_GT(n.mem_available_bytes, 0);
    EXPECT_EQ(n.address, c.addresses[i]);  // the node's address, via the alias's HostName
    EXPECT_TRUE(n.is_cpu_node());
    EXPECT_EQ(n.fingerprint.rfind("SHA256:", 0), 0u);
    // The fingerprint is the node's own host key.
    auto fp = public_key_file_fingerprint((c.dir / ("node" + std::to_string(i)) / "ssh_host_ed25519_key.pub").string());
    ASSERT_TRUE(fp.ok());
    EXPECT_EQ(n.fingerprint, *fp);
  }
  EXPECT_EQ(std::count(stages.begin(), stages.end(), "node0:done"), 1);
  EXPECT_EQ(std::count(stages.begin(), stages.end(), "node1:done"), 1);
}

TEST(ClusterProbe, UserAtHostPortWithoutConfig) {
  REQUIRE_CLUSTER(c);
  const auto tmp = test::temp_dir("direct");
  SshOptions o = c.options(tmp / "known_hosts");
  o.ssh_config = (tmp / "empty_config").string();
  std::ofstream(o.ssh_config) << "";
  auto spec = parse_host_spec("root@" + c.addresses[1] + ":22");
  auto conn = connect_node(*spec, o);
  ASSERT_TRUE(std::holds_alternative<std::unique_ptr<Node>>(conn)) << std::get<ConnectError>(conn).error.message();
  auto r = std::get<0>(conn)->exec("echo $SSH_CONNECTION", std::chrono::seconds(10), {});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->out.find(c.addresses[1] + " 22"), std::string::npos) << r->out;
}

TEST(ClusterHostKeys, UnknownIsRefusedUntilAcceptedThenRemembered) {
  REQUIRE_CLUSTER(c);
  const auto tmp = test::temp_dir("tofu");
  const auto kh = tmp / "known_hosts";
  auto spec = *parse_host_spec("node0");
  // 1. No consent: refused, and the fingerprint is reported for the user to check.
  auto r1 = connect_node(spec, c.options(kh, /*accept_new=*/false));
  ASSERT_TRUE(std::holds_alternative<ConnectError>(r1));
  const ConnectError& e = std::get<ConnectError>(r1);
  EXPECT_EQ(e.kind, ConnectFailure::host_key_unknown);
  auto fp = public_key_file_fingerprint((c.dir / "node0" / "ssh_host_ed25519_key.pub").string());
  EXPECT_EQ(e.fingerprint, *fp);
  EXPECT_NE(e.error.message().find(*fp), std::string::npos);
  // 2. The caller is shown the fingerprint and accepts exactly that one.
  SshOptions o = c.options(kh, false);
  std::string shown;
  o.on_unknown_host_key = [&](const std::string&, const std::string& f) {
    shown = f;
    return f == e.fingerprint;
  };
  auto r2 = connect_node(spec, o);
  ASSERT_TRUE(std::holds_alternative<std::unique_ptr<Node>>(r2));
  EXPECT_EQ(shown, *fp);
  // 3. Now known: no prompt needed.
  auto r3 = connect_node(spec, c.options(kh, false));
  EXPECT_TRUE(std::holds_alternative<std::unique_ptr<Node>>(r3));
}

TEST(ClusterHostKeys, ChangedKeyIsRefusedEvenWithAcceptNew) {
  REQUIRE_CLUSTER(c);
  const auto tmp = test::temp_dir("changed");
  // known_hosts records another key for node0's address: what a reinstalled node or a man in
  // the middle looks like.
  ASSERT_EQ(std::system(("ssh-keygen -q -t ed25519 -N '' -f " + (tmp / "other").string()).c_str()), 0);
  std::string other = test::read_text(tmp / "other.pub");
  other = other.substr(0, other.rfind(' '));  // "ssh-ed25519 AAAA..."
  std::ofstream(tmp / "known_hosts") << c.addresses[0] << " " << other << "\n";
  bool prompted = false;
  SshOptions o = c.options(tmp / "known_hosts");
  o.on_unknown_host_key = [&](const std::string&, const std::string&) { return prompted = true; };
  auto r = connect_node(*parse_host_spec("node0"), o);
  ASSERT_TRUE(std::holds_alternative<ConnectError>(r));
  EXPECT_EQ(std::get<ConnectError>(r).kind, ConnectFailure::host_key_changed);
  EXPECT_NE(std::get<ConnectError>(r).error.message().find("refused"), std::string::npos);
  EXPECT_FALSE(prompted);
}

TEST(ClusterAuth, WrongKeyIsAnAuthError) {
  REQUIRE_CLUSTER(c);
  const auto tmp = test::temp_dir("auth");
  ASSERT_EQ(std::system(("ssh-keygen -q -t ed25519 -N '' -f " + (tmp / "stranger").string()).c_str()), 0);
  SshOptions o = c.options(tmp / "known_hosts");
  o.ssh_config = (tmp / "cfg").string();
  std::ofstream(o.ssh_config) << "Host *\n  IdentityFile " << (tmp / "stranger").string() << "\n";
  o.identity = (tmp / "stranger").string();
  auto r = connect_node(*parse_host_spec("root@" + c.addresses[0]), o);
  ASSERT_TRUE(std::holds_alternative<ConnectError>(r));
  EXPECT_EQ(std::get<ConnectError>(r).kind, ConnectFailure::auth);
}

TEST(ClusterSftp, UploadAndReadRanges) {
  REQUIRE_CLUSTER(c);
  const auto tmp = test::temp_dir("sftp");
  auto conn = connect_node(*parse_host_spec("node1"), c.options(tmp / "known_hosts"));
  ASSERT_TRUE(std::holds_alternative<std::unique_ptr<Node>>(conn));
  Node& node = *std::get<0>(conn);
  std::string payload;
  for (int i = 0; i < 300000; ++i) payload += static_cast<char>('a' + i % 26);
  std::ofstream(tmp / "src", std::ios::binary) << payload;
  uint64_t last = 0;
  ASSERT_TRUE(node.upload_file((tmp / "src").string(), (tmp / "dst").string(), 0700,
                               [&](uint64_t done, uint64_t) { last = done; }).ok());
  EXPECT_EQ(last, payload.size());
  EXPECT_EQ(test::read_text(tmp / "dst"), payload);  // shared filesystem
  auto part = node.read_range((tmp / "dst").string(), 1000, 10);
  ASSERT_TRUE(part.ok());
  ASSERT_TRUE(part->has_value());
  EXPECT_EQ(**part, payload.substr(1000, 10));
  auto eof = node.read_range((tmp / "dst").string(), payload.size(), 10);
  ASSERT_TRUE(eof.ok() && eof->has_value());
  EXPECT_EQ(**eof, "");
  auto missing = node.read_range((tmp / "nope").string(), 0, 10);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

// ProxyJump from the --ssh-config: node1 reached through node0. The target sees the connection
// come from node0's address (not from the bridge, as a direct connection does), and the jump's
// own host key is checked against our --known-hosts: an untrusted jump host is refused.
TEST(ClusterProbe, ProxyJumpThroughANodeWithOurConfigAndKnownHosts) {
  REQUIRE_CLUSTER(c);
  const auto tmp = test::temp_dir("jump");
  SshOptions o = c.options(tmp / "known_hosts");
  o.ssh_config = (tmp / "ssh config with space").string();
  {
    std::ofstream cfg(o.ssh_config);
    cfg << test::read_text(c.ssh_config()) << "Host viajump\n  HostName " << c.addresses[1]
        << "\n  User root\n  IdentityFile " << c.identity() << "\n  ProxyJump node0\n";
  }
  // Not trusted yet: the jump host's key is not in known_hosts, so the jump is refused even
  // though the caller would accept the target's key.
  auto refused = connect_node(*parse_host_spec("viajump"), o);
  ASSERT_TRUE(std::holds_alternative<ConnectError>(refused));
  // Trust node0 (a direct connection, first use accepted), then jump through it.
  ASSERT_TRUE(std::holds_alternative<std::unique_ptr<Node>>(connect_node(*parse_host_spec("node0"), o)));
  auto direct = connect_node(*parse_host_spec("node1"), o);
  ASSERT_TRUE(std::holds_alternative<std::unique_ptr<Node>>(direct)) << std::get<ConnectError>(direct).error.message();
  auto d = std::get<0>(direct)->exec("echo $SSH_CONNECTION", std::chrono::seconds(10), {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->out.rfind(c.addresses[0] + " ", 0), std::string::npos) << d->out;  // from the bridge
  auto conn = connect_node(*parse_host_spec("viajump"), o);
  ASSERT_TRUE(std::holds_alternative<std::unique_ptr<Node>>(conn)) << std::get<ConnectError>(conn).error.message();
  auto r = std::get<0>(conn)->exec("echo $SSH_CONNECTION", std::chrono::seconds(10), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out.rfind(c.addresses[0] + " ", 0), 0u) << r->out;    // from node0: jumped
  EXPECT_NE(r->out.find(c.addresses[1] + " 22"), std::string::npos) << r->out;
  auto info = probe_node(*std::get<0>(conn));
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_GT(info->cpus, 0);
}

}  // namespace
}  // namespace meshwork::remote
