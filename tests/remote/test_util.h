// Helpers shared by the remote tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

namespace meshwork::remote::test {

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::filesystem::path data_dir() { return std::filesystem::path(MESHWORK_TEST_DATA_DIR) / "gpu-cluster"; }
inline std::string data(const std::string& name) { return read_text(data_dir() / name); }

}  // namespace meshwork::remote::test

#include <optional>
#include <vector>

#include "remote/ssh_session.h"
#include "tests/scratch_dirs.h"

namespace meshwork::remote::test {

// The namespace cluster of tests/cluster/cluster.sh (the ctest fixture meshwork_test_cluster).
struct Cluster {
  std::filesystem::path dir;
  std::vector<std::string> addresses;  // node i's address
  std::string ssh_config() const { return (dir / "ssh_config").string(); }
  std::string identity() const { return (dir / "id_ed25519").string(); }
  // SSH options with a known_hosts file of the test's own (empty at first) that trusts every key
  // on first use, as --accept-new-host-keys does.
  SshOptions options(const std::filesystem::path& known_hosts, bool accept_new = true) const {
    SshOptions o;
    o.ssh_config = ssh_config();
    o.known_hosts = known_hosts.string();
    o.identity = identity();
    if (accept_new) o.on_unknown_host_key = [](const std::string&, const std::string&) { return true; };
    return o;
  }
};

inline std::optional<Cluster> cluster() {
  Cluster c;
  c.dir = MESHWORK_TEST_CLUSTER_DIR;
  std::ifstream in(c.dir / "nodes");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) c.addresses.push_back(line);
  }
  if (c.addresses.size() < 2) return std::nullopt;
  return c;
}

// A fresh temporary directory for one test, removed when the program's tests all passed
// (tests/scratch_dirs.h).
inline std::filesystem::path temp_dir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("meshwork-test-" + name + "-" + std::to_string(::getpid()));
  return ::meshwork::test::fresh_scratch_dir(p, p);
}

}  // namespace meshwork::remote::test
