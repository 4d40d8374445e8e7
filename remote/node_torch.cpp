#include "remote/node_torch.h"

#include "remote/node.h"
#include "remote/parse_util.h"
#include "core/shell_quote.h"

namespace meshwork::remote {

using namespace detail;

Result<std::string> retarget_trainer(const std::string& trainer, const std::string& node_site_packages,
                                     const std::filesystem::path& out_dir) {
  if (node_site_packages.empty() || node_site_packages.front() != '/') {
    return Error{"--node-torch", node_site_packages,
                 "must be the absolute path of the nodes' site-packages directory (the one holding torch/ and "
                 "nvidia/), e.g. /opt/venv/lib/python3.11/site-packages"};
  }
  std::string site = node_site_packages;
  while (site.size() > 1 && site.back() == '/') site.pop_back();
  auto local = make_local_node();
  auto print = local->exec(shell_join({"patchelf", "--print-rpath", trainer}), std::chrono::seconds(60), {});
  if (!print || print->exit_code != 0) {
    return Error{"--node-torch", trainer, "needs patchelf on this machine (scripts/bootstrap installs it) and a meshtrain binary"};
  }
  const std::string rpath(trim(print->out));
  // This machine's site-packages: the prefix of the entry that ends in /torch/lib.
  std::string prefix;
  size_t start = 0;
  std::vector<std::string> entries;
  while (start <= rpath.size()) {
    const size_t end = std::min(rpath.find(':', start), rpath.size());
    entries.push_back(rpath.substr(start, end - start));
    start = end + 1;
  }
  for (const auto& e : entries) {
    const std::string tail = "/torch/lib";
    if (e.size() > tail.size() && e.compare(e.size() - tail.size(), tail.size(), tail) == 0) {
      prefix = e.substr(0, e.size() - tail.size());
    }
  }
  if (prefix.empty()) {
    return Error{"--node-torch", trainer, "has no run path to a torch wheel's torch/lib (run path: " + rpath + ")"};
  }
  std::string moved;
  for (const auto& e : entries) {
    if (e.empty()) continue;
    const std::string to = e.rfind(prefix + "/", 0) == 0 ? site + e.substr(prefix.size()) : e;
    moved += (moved.empty() ? "" : ":") + to;
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  const std::string copy = (out_dir / "meshtrain").string();
  auto set = local->exec(shell_join({"cp", "-f", "--", trainer, copy}) + " && " +
                             shell_join({"patchelf", "--force-rpath", "--set-rpath", moved, copy}),
                         std::chrono::seconds(120), {});
  if (!set || set->exit_code != 0) {
    return Error{"--node-torch", copy, "could not be written with the new run path: " + (set ? set->err : set.error().message())};
  }
  return copy;
}

}  // namespace meshwork::remote
