#include "remote/bundle.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "remote/parse_util.h"
#include "remote/probe_parsers.h"
#include "core/resource_dir.h"
#include "core/shell_quote.h"

namespace meshwork::remote {

using namespace detail;
namespace fs = std::filesystem;

std::string default_bundle_path(const std::string& flavour) {
  const std::string name = "meshtrain-" + flavour + ".tar.zst";
  const fs::path installed = resource_dir() / "bundles" / name;
  std::error_code ec;
  if (fs::exists(installed, ec)) return installed.string();
  if (fs::path exe = executable_dir(); !exe.empty()) {
    const fs::path built = (exe.parent_path() / "bundles" / name).lexically_normal();
    if (fs::exists(built, ec)) return built.string();
  }
  return installed.string();
}

Result<BundleManifest> load_bundle(const std::string& named) {
  const std::string path = (named == "cpu" || named == "cuda") ? default_bundle_path(named) : named;
  std::string json_path = path;
  const std::string suffix = ".tar.zst";
  if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    json_path = path.substr(0, path.size() - suffix.size()) + ".json";
  }
  std::ifstream in(json_path);
  if (!in) return Error{"--bundle", path, "must be a bundle built by scripts/bundle (its manifest " + json_path + " is missing)"};
  BundleManifest m;
  try {
    const auto j = nlohmann::json::parse(in);
    m.sha256 = j.at("sha256").get<std::string>();
    m.archive_size = j.at("archive_size").get<uint64_t>();
    m.flavour = j.at("flavour").get<std::string>();
    m.torch_version = j.value("torch_version", std::string());
    m.cuda_requirement = j.value("cuda_requirement", std::string());
    m.trainer = j.value("trainer", std::string("meshtrain"));
    // The archive is named in the manifest; beside it (symbolic links are followed).
    m.archive_path = (fs::path(json_path).parent_path() / j.at("archive").get<std::string>()).string();
  } catch (const std::exception& e) {
    return Error{"--bundle", json_path, std::string("is not a bundle manifest: ") + e.what()};
  }
  if (m.sha256.size() != 64 || m.sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Error{"--bundle", json_path, "sha256 must be 64 lowercase hex digits"};
  }
  if (m.flavour != "cpu" && m.flavour != "cuda") return Error{"--bundle", m.flavour, "flavour must be cpu or cuda"};
  std::error_code ec;
  const uint64_t size = fs::file_size(m.archive_path, ec);
  if (ec || size != m.archive_size) {
    return Error{"--bundle", m.archive_path, "must exist with the manifest's size " + std::to_string(m.archive_size) +
                                                 " bytes (rebuild with scripts/bundle)"};
  }
  return m;
}

namespace {

// A failed step: `link` says whether the connection was lost (then reconnecting may help).
struct StepError {
  Error error;
  bool link = false;
};
template <class T>
using Step = std::variant<T, StepError>;

Step<std::string> run(Node& node, const std::string& cmd, const std::string& what,
                      std::chrono::seconds timeout = std::chrono::seconds(120)) {
  auto r = node.exec(cmd, timeout, {});
  if (!r) return StepError{r.error(), true};
  if (r->exit_code != 0) {
    return StepError{Error{node.name(), what, "failed (exit " + std::to_string(r->exit_code) + "): " +
                                                  std::string(trim(r->err)).substr(0, 400)}};
  }
  return r->out;
}

std::string random_hex(size_t bytes) {
  std::random_device rd;
  std::string s;
  const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned v = rd() & 0xff;
    s += hex[v >> 4];
    s += hex[v & 15];
  }
  return s;
}

// What a node's bundle directory says before anything is uploaded.
struct NodeState {
  std::string root;  // absolute
  std::string fsid;
  bool present = false;
  bool has_zstd = false;
};

Step<NodeState> inspect(Node& node, const std::string& root, const std::string& sha) {
  // .fsid: the first node to look creates it under a private name and hard-links it into place
  // (atomic, also on NFS); every node then reads the winner's id.
  const std::string cmd =
      "cd && umask 022 && mkdir -p -- " + shell_quote(root) + " && cd -- " + shell_quote(root) + " && pwd -P && " +
      "if [ ! -f .fsid ]; then t=.fsid.$$.$(date +%s%N); " + shell_join({"echo", random_hex(16)}) +
      " > \"$t\" && { ln \"$t\" .fsid 2>/dev/null; rm -f \"$t\"; }; fi && cat .fsid && " +
      "if [ -f " + shell_quote(sha + "/.complete") + " ]; then echo present; else echo absent; fi && " +
      "if command -v zstd >/dev/null 2>&1; then echo zstd; else echo nozstd; fi";
  auto out = run(node, cmd, "prepare the bundle directory " + root);
  if (auto* e = std::get_if<StepError>(&out)) return *e;
  const auto lines = split_lines(std::get<std::string>(out));
  if (lines.size() < 4) return StepError{Error{node.name(), "bundle directory", "unexpected answer: " + std::get<std::string>(out)}};
  NodeState s;
  s.root = std::string(trim(lines[0]));
  s.fsid = std::string(trim(lines[1]));
  s.present = trim(lines[2]) == "present";
  s.has_zstd = trim(lines[3]) == "zstd";
  return s;
}

class NodeUploader {
 public:
  NodeUploader(std::unique_ptr<Node>& node, size_t index, const BundleManifest& bundle,
               const BundleDeployOptions& options, const DeployProgressFn& progress)
      : node_(node), index_(index), bundle_(bundle), options_(options), progress_(progress) {}

  // Uploads (resuming after cut links) and unpacks; reconnects up to max_attempts times.
  Result<BundleNodeResult> deploy(const NodeState& first) {
    NodeState state = first;
    BundleNodeResult result;
    result.fsid = state.fsid;
    for (int attempt = 1;; ++attempt) {
      auto st = attempt_once(state, result);
      if (!st) {
        result.dir = state.root + "/" + bundle_.sha256;
        report("done", result.bytes_uploaded, result.bytes_uploaded);
        return result;
      }
      if (!st->link || !options_.reconnect || attempt >= options_.max_attempts) {
        report("failed", 0, 0, st->error.message());
        return st->error;
      }
      report("reconnecting", 0, 0, "link lost (" + st->error.message() + "); reconnecting");
      auto conn = options_.reconnect(index_);
      if (auto* e = std::get_if<ConnectError>(&conn)) {
        report("failed", 0, 0, e->error.message());
        return e->error;
      }
      node_ = std::move(std::get<0>(conn));
      ++result.reconnects;
    }
  }

 private:
  void report(const std::string& stage, uint64_t done, uint64_t total, const std::string& msg = {},
              double rate = 0, double eta = -1) {
    if (progress_) {
      DeployProgress p{index_, node_ ? node_->name() : std::string(), stage, archive_name(), done, total, msg};
      p.rate = rate;
      p.eta_s = eta;
      progress_(p);
    }
  }
  std::string archive_name() const { return fs::path(bundle_.archive_path).filename().string(); }

  // nullopt: done.
  std::optional<StepError> attempt_once(NodeState& state, BundleNodeResult& result) {
    Node& node = *node_;
    const std::string dir = state.root + "/" + bundle_.sha256;
    const std::string part = dir + ".tar.zst.part";
    // Present (maybe put there meanwhile by a node of the same filesystem)? And how much of the
    // part is there already.
    auto have = run(node, "if [ -f " + shell_quote(dir + "/.complete") + " ]; then echo present; else stat -c %s -- " +
                              shell_quote(part) + " 2>/dev/null || echo 0; fi",
                    "look for the bundle");
    if (auto* e = std::get_if<StepError>(&have)) return *e;
    const std::string answer(trim(std::get<std::string>(have)));
    if (answer == "present") return std::nullopt;
    uint64_t offset = static_cast<uint64_t>(to_int(answer).value_or(0));
    if (offset > bundle_.archive_size) offset = 0;  // not ours: start again

    std::string zstd = "zstd";
    if (!state.has_zstd) {
      auto tool = ship_zstd(node, state.root);
      if (auto* e = std::get_if<StepError>(&tool)) return *e;
      zstd = std::get<std::string>(tool);
    }

    for (int pass = 0; pass < 2; ++pass) {
      if (offset < bundle_.archive_size) {
        const auto start = std::chrono::steady_clock::now();
        auto last = start - std::chrono::seconds(1);
        uint64_t last_bytes = 0;
        const uint64_t from = offset;
        report("uploading", offset, bundle_.archive_size, offset ? "resuming at byte " + std::to_string(offset) : "");
        auto st = node.append_file(bundle_.archive_path, part, offset, [&](uint64_t done, uint64_t total) {
          const auto now = std::chrono::steady_clock::now();
          // Every 200 ms or 4 MiB, whichever comes first (the bytes bound makes the reports of a
          // fast link as regular as a slow one's), and the last.
          if (done != total && now - last < std::chrono::milliseconds(200) && done - last_bytes < (4u << 20)) return;
          last = now;
          last_bytes = done;
          const double secs = std::chrono::duration<double>(now - start).count();
          const double rate = secs > 0 ? static_cast<double>(done - from) / secs : 0;
          report("uploading", done, total, {}, rate, rate > 0 ? static_cast<double>(total - done) / rate : -1);
        });
        // What this attempt put on the node, read back (after a cut link this fails: the bytes
        // are then counted by the attempt that resumes from them).
        auto size_now = node.exec("stat -c %s -- " + shell_quote(part) + " 2>/dev/null || echo 0",
                                  std::chrono::seconds(30), {});
        if (size_now && size_now->exit_code == 0) {
          const auto s = to_int(trim(size_now->out));
          if (s && static_cast<uint64_t>(*s) >= from) result.bytes_uploaded += static_cast<uint64_t>(*s) - from;
        }
        if (!st) return StepError{st.error(), !size_now};
        if (!size_now) return StepError{size_now.error(), true};
      }
      // The SHA-256 check and the unpacking read the part at the same time (two processes, the
      // second read from the page cache): one pass instead of two. Unpacked beside, the marker
      // written inside only when the hash matched, then renamed into place: <sha>/.complete
      // exists only for a whole bundle. A node of the same filesystem may win the rename: then
      // ours goes.
      report("unpacking", bundle_.archive_size, bundle_.archive_size);
      const std::string tmp = dir + ".unpack-" + random_hex(6);
      const std::string q_tmp = shell_quote(tmp), q_part = shell_quote(part), q_sum = shell_quote(tmp + ".sum");
      auto unpack = run(node,
                        "rm -rf -- " + q_tmp + " && mkdir -p -- " + q_tmp + " && { sha256sum -- " + q_part + " > " +
                            q_sum + " & } ; " + shell_quote(zstd) + " -dcq -- " + q_part + " | tar -xf - -C " + q_tmp +
                            "; x=$?; wait; s=$(cut -c1-64 " + q_sum + "); rm -f -- " + q_sum + "; " +
                            "if [ \"$s\" != " + bundle_.sha256 + " ]; then rm -rf -- " + q_tmp +
                            "; echo mismatch; exit 0; fi; [ $x -eq 0 ] && [ -x " + shell_quote(tmp + "/" + bundle_.trainer) +
                            " ] && : > " + shell_quote(tmp + "/.complete") + " && { mv -T -- " + q_tmp + " " +
                            shell_quote(dir) + " 2>/dev/null || rm -rf -- " + q_tmp + "; } && [ -f " +
                            shell_quote(dir + "/.complete") + " ] && rm -f -- " + q_part + " && echo unpacked",
                        "unpack the bundle", std::chrono::seconds(600));
      if (auto* e = std::get_if<StepError>(&unpack)) return *e;
      if (trim(std::get<std::string>(unpack)) == "unpacked") return std::nullopt;
      if (pass == 1) {
        return StepError{Error{node.name(), archive_name(), "arrived corrupted twice (SHA-256 differs); check the disk and retry"}};
      }
      // A part that is not a prefix of ours (another bundle's leftover, a corrupted write):
      // upload from the start once.
      auto rm = run(node, shell_join({"rm", "-f", "--", part}), "remove a corrupted partial bundle");
      if (auto* e = std::get_if<StepError>(&rm)) return *e;
      offset = 0;
    }
    return StepError{Error{node.name(), archive_name(), "could not be unpacked"}};
  }

  // Puts this machine's zstd on a node that has none; returns its path there.
  Step<std::string> ship_zstd(Node& node, const std::string& root) {
    std::string local = options_.local_zstd;
    if (local.empty()) {
      for (const char* d : {"/usr/bin/zstd", "/usr/local/bin/zstd", "/bin/zstd"}) {
        if (fs::exists(d)) {
          local = d;
          break;
        }
      }
    }
    if (local.empty()) {
      return StepError{Error{node.name(), "zstd", "is missing on the node and on this machine: install zstd on either"}};
    }
    auto hash = sha256_file(local);
    if (!hash) return StepError{hash.error()};
    const std::string remote = root + "/.tools/zstd-" + hash->substr(0, 12);
    auto have = run(node, "[ -x " + shell_quote(remote) + " ] && echo yes || echo no", "look for zstd");
    if (auto* e = std::get_if<StepError>(&have)) return *e;
    if (trim(std::get<std::string>(have)) == "yes") return remote;
    const std::string tmp = remote + ".tmp-" + random_hex(4);
    auto mk = run(node, shell_join({"mkdir", "-p", "--", root + "/.tools"}), "create " + root + "/.tools");
    if (auto* e = std::get_if<StepError>(&mk)) return *e;
    if (auto st = node.upload_file(local, tmp, 0755); !st) return StepError{st.error(), true};
    auto mv = run(node, shell_join({"mv", "-f", "--", tmp, remote}) + " && " + shell_quote(remote) + " -V >/dev/null",
                  "install zstd on the node");
    if (auto* e = std::get_if<StepError>(&mv)) return *e;
    return remote;
  }

  std::unique_ptr<Node>& node_;
  size_t index_;
  const BundleManifest& bundle_;
  const BundleDeployOptions& options_;
  const DeployProgressFn& progress_;
};

template <class F>
void each_parallel(const std::vector<size_t>& which, F&& f) {
  std::vector<std::thread> threads;
  for (size_t i : which) threads.emplace_back([&f, i] { f(i); });
  for (auto& t : threads) t.join();
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::string bundle_progress_text(const DeployProgress& d) {
  if (d.stage == "uploading") {
    std::string s = "uploading " + mib(d.bytes_done) + " of " + mib(d.bytes_total);
    if (d.bytes_total > 0) s += " (" + std::to_string(d.bytes_done * 100 / d.bytes_total) + "%)";
    if (d.rate > 0) s += ", " + mib(static_cast<uint64_t>(d.rate)) + "/s";
    if (d.eta_s >= 0) s += ", ETA " + std::to_string(static_cast<long>(d.eta_s + 0.5)) + " s";
    if (!d.message.empty()) s += " (" + d.message + ")";
    return s;
  }
  if (d.stage == "done") {
    return d.bytes_done ? "done, " + std::to_string(d.bytes_done) + " bytes (" + mib(d.bytes_done) + ") uploaded"
                        : "done, 0 bytes uploaded";
  }
  if (d.stage == "skipped") return "skipped, 0 bytes uploaded (" + d.message + ")";
  return d.stage + (d.message.empty() ? "" : ": " + d.message);
}

std::vector<Result<BundleNodeResult>> deploy_bundle_all(std::vector<std::unique_ptr<Node>>& nodes,
                                                        const BundleManifest& bundle,
                                                        const BundleDeployOptions& options,
                                                        const DeployProgressFn& progress) {
  const size_t n = nodes.size();
  std::vector<std::optional<Result<BundleNodeResult>>> out(n);
  std::vector<std::optional<NodeState>> states(n);
  std::vector<size_t> all;
  for (size_t i = 0; i < n; ++i) all.push_back(i);
  auto say = [&](size_t i, const std::string& stage, uint64_t done = 0, uint64_t total = 0, const std::string& msg = {}) {
    if (progress) {
      progress(DeployProgress{i, nodes[i] ? nodes[i]->name() : std::string(), stage,
                              fs::path(bundle.archive_path).filename().string(), done, total, msg});
    }
  };

  // 1. Every node: its bundle directory's id, and whether the bundle is there.
  each_parallel(all, [&](size_t i) {
    say(i, "preparing");
    for (int attempt = 1;; ++attempt) {
      auto s = inspect(*nodes[i], options.root, bundle.sha256);
      if (auto* st = std::get_if<NodeState>(&s)) {
        states[i] = *st;
        return;
      }
      const StepError& e = std::get<StepError>(s);
      if (!e.link || !options.reconnect || attempt >= options.max_attempts) {
        say(i, "failed", 0, 0, e.error.message());
        out[i] = e.error;
        return;
      }
      auto conn = options.reconnect(i);
      if (auto* ce = std::get_if<ConnectError>(&conn)) {
        out[i] = ce->error;
        return;
      }
      nodes[i] = std::move(std::get<0>(conn));
    }
  });

  // 2. One uploader per filesystem that lacks the bundle (the first node of each id).
  std::map<std::string, size_t> leader_of;
  std::vector<size_t> leaders, followers;
  for (size_t i = 0; i < n; ++i) {
    if (out[i]) continue;  // failed already
    BundleNodeResult r;
    r.fsid = states[i]->fsid;
    r.dir = states[i]->root + "/" + bundle.sha256;
    if (states[i]->present) {
      r.skipped = true;
      say(i, "skipped", 0, 0, "bundle already on the node");
      out[i] = r;
      continue;
    }
    auto [it, inserted] = leader_of.emplace(states[i]->fsid, i);
    (inserted ? leaders : followers).push_back(i);
  }
  each_parallel(leaders, [&](size_t i) {
    out[i] = NodeUploader(nodes[i], i, bundle, options, progress).deploy(*states[i]);
  });
  // 3. The others: the bundle is there now (shared filesystem), else they upload it themselves.
  each_parallel(followers, [&](size_t i) {
    say(i, "waiting", 0, 0, "shares its bundle directory with node " + std::to_string(leader_of.at(states[i]->fsid)));
    auto r = NodeUploader(nodes[i], i, bundle, options, progress).deploy(*states[i]);
    if (r && r->bytes_uploaded == 0) r->shared = true;
    out[i] = std::move(r);
  });

  std::vector<Result<BundleNodeResult>> results;
  for (auto& o : out) results.push_back(std::move(*o));
  return results;
}

}  // namespace meshwork::remote
