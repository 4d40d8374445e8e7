#include "remote/deploy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "remote/parse_util.h"
#include "remote/probe_parsers.h"
#include "core/shell_quote.h"

namespace meshwork::remote {

using namespace detail;

Result<std::string> sha256_file(const std::string& path) {
  // coreutils' sha256sum: no crypto library to link for one hash per deploy.
  auto local = make_local_node();
  auto r = local->exec(shell_join({"sha256sum", "--", path}), std::chrono::seconds(60), {});
  if (!r || r->exit_code != 0) return Error{"deploy", path, "must be a readable file (sha256sum failed)"};
  auto w = words(r->out);
  if (w.empty() || w[0].size() != 64) return Error{"deploy", path, "sha256sum gave no hash"};
  return w[0];
}

namespace {

// Runs a command on the node; an Error for a link failure or a non-zero status (with stderr).
Result<std::string> run(Node& node, const std::string& cmd, const std::string& what) {
  auto r = node.exec(cmd, std::chrono::seconds(120), {});
  if (!r) return r.error();
  if (r->exit_code != 0) {
    return Error{node.name(), what, "failed (exit " + std::to_string(r->exit_code) + "): " +
                                        std::string(trim(r->err)).substr(0, 400)};
  }
  return r->out;
}

}  // namespace

Result<DeployResult> deploy_node(Node& node, size_t index, const std::string& root,
                                 const std::string& run_name, const std::vector<DeployFile>& files,
                                 const std::string& check_runtime, const DeployProgressFn& progress) {
  const std::string host = node.name();
  auto report = [&](const std::string& stage, const std::string& file, uint64_t done = 0,
                    uint64_t total = 0, const std::string& msg = {}) {
    if (progress) progress(DeployProgress{index, host, stage, file, done, total, msg});
  };
  report("preparing", "");
  // `cd` first: a relative root is relative to the login directory on every node, the local one
  // included. umask 077 + chmod 700: the run directory is private to the user.
  const std::string prep = "cd && umask 077 && mkdir -p -- " + shell_quote(root) + "/.deploy " +
                           shell_quote(root) + "/" + shell_quote(run_name) + " && chmod 700 -- " +
                           shell_quote(root) + "/" + shell_quote(run_name) + " && cd -- " +
                           shell_quote(root) + " && pwd -P";
  auto abs_root = run(node, prep, "create the run directory under " + root);
  if (!abs_root) {
    report("failed", "", 0, 0, abs_root.error().message());
    return abs_root.error();
  }
  const std::string root_dir(trim(*abs_root));
  DeployResult result;
  result.run_dir = root_dir + "/" + run_name;

  for (const DeployFile& f : files) {
    if (!f.link_to.empty()) {
      // The target's directory made absolute on the node (a relative one is under the login
      // directory), so the link works from the run directory and /proc/self/exe names the bundle.
      const std::filesystem::path target(f.link_to);
      auto link = run(node, "cd && cd -- " + shell_quote(target.parent_path().string()) + " && t=\"$(pwd -P)\" && " +
                                "[ -x \"$t\"/" + shell_quote(target.filename().string()) + " ] && ln -sfn -- \"$t\"/" +
                                shell_quote(target.filename().string()) + " " + shell_quote(result.run_dir + "/" + f.name),
                      "link " + f.name + " to " + f.link_to);
      if (!link) return link.error();
      continue;
    }
    auto hash = sha256_file(f.local_path);
    if (!hash) return hash.error();
    // A name may hold a directory (data/<dir>/<shard>, data_placement.h): the cache is flat.
    const std::string cached = root_dir + "/.deploy/" + *hash + "-" + std::filesystem::path(f.name).filename().string();
    // Already there with the same content? (The hash is recomputed, not trusted from the name.)
    auto have = node.exec(shell_join({"sha256sum", "--", cached}) + " 2>/dev/null", std::chrono::seconds(120), {});
    if (!have) return have.error();
    auto hw = words(have->out);
    if (have->exit_code == 0 && !hw.empty() && hw[0] == *hash) {
      ++result.files_skipped;
      report("skipped", f.name);
    } else {
      // Upload to a name of this node's own, then rename: nodes sharing a filesystem may deploy
      // the same file at once, and a reader never sees a half-written file.
      const std::string tmp = cached + ".tmp-" + std::to_string(index) + "-" + std::to_string(::getpid());
      std::error_code ec;
      const uint64_t size = std::filesystem::file_size(f.local_path, ec);
      report("uploading", f.name, 0, size);
      auto st = node.upload_file(f.local_path, tmp, f.mode, [&](uint64_t done, uint64_t total) {
        report("uploading", f.name, done, total);
      });
      if (!st) {
        report("failed", f.name, 0, size, st.error().message());
        return st.error();
      }
      auto check = run(node, shell_join({"sha256sum", "--", tmp}) + " && " + shell_join({"mv", "-f", "--", tmp, cached}),
                       "verify the upload of " + f.name);
      if (!check) return check.error();
      auto cw = words(*check);
      if (cw.empty() || cw[0] != *hash) {
        return Error{host, f.name, "arrived corrupted (SHA-256 differs after upload); retry the deploy"};
      }
      result.bytes_uploaded += size;
    }
    char mode[8];
    std::snprintf(mode, sizeof mode, "%o", f.mode);
    const std::string dest = result.run_dir + "/" + f.name;
    const std::string dest_dir = std::filesystem::path(dest).parent_path().string();
    auto link = run(node, shell_join({"mkdir", "-p", "--", dest_dir}) + " && { " +
                              shell_join({"ln", "-f", "--", cached, dest}) + " 2>/dev/null || " +
                              shell_join({"cp", "-f", "--", cached, dest}) + "; } && " +
                              shell_join({"chmod", mode, "--", dest}),
                    "place " + f.name + " in the run directory");
    if (!link) return link.error();
  }

  if (!check_runtime.empty()) {
    report("checking", check_runtime);
    // Through a symbolic link (a runtime bundle's meshtrain), ldd must see the real path: it runs
    // the loader on the path it is given, and $ORIGIN (the bundle's ../lib) is taken from it.
    auto ldd = node.exec("cd -- " + shell_quote(result.run_dir) + " && ldd \"$(readlink -f ./" +
                             shell_quote(check_runtime) + ")\" 2>&1",
                         std::chrono::seconds(60), {});
    if (!ldd) return ldd.error();
    std::vector<std::string> missing;
    for (const std::string& line : split_lines(ldd->out)) {
      if (line.find("not found") == std::string::npos) continue;
      auto w = words(line);
      if (!w.empty()) missing.push_back(w[0]);
    }
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
      Error e{host, "missing libraries: " + list,
              check_runtime + " needs LibTorch (the torch wheel's torch/lib and its nvidia/*/lib) on this node "
              "at the same paths as on the workbench machine: launch a runtime bundle instead (--bundle, built by "
              "scripts/bundle), or point at the node's own torch 2.15 wheel (--node-torch SITE_PACKAGES), or run "
              "`scripts/bootstrap` on the node; check with `ldd " +
                  result.run_dir + "/" + check_runtime + "`"};
      report("failed", check_runtime, 0, 0, e.message());
      return e;
    }
  }
  report("done", "", result.bytes_uploaded, result.bytes_uploaded);
  return result;
}

bool DeployAllResult::ok() const {
  for (const auto& n : nodes) {
    if (!n.ok()) return false;
  }
  return true;
}

DeployAllResult deploy_all(const std::vector<Node*>& nodes, const std::string& root,
                           const std::string& run_name, const std::vector<DeployFile>& files,
                           const std::string& check_runtime, const DeployProgressFn& progress) {
  std::vector<std::optional<Result<DeployResult>>> slots(nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    threads.emplace_back([&, i] {
      slots[i] = deploy_node(*nodes[i], i, root, run_name, files, check_runtime, progress);
    });
  }
  for (auto& t : threads) t.join();
  DeployAllResult out;
  for (auto& s : slots) out.nodes.push_back(std::move(*s));
  return out;
}

}  // namespace meshwork::remote
