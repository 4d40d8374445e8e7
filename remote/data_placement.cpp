#include "remote/data_placement.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "core/shell_quote.h"

namespace meshwork::remote {

namespace fs = std::filesystem;

std::vector<std::string> local_data_files(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  const fs::path p = fs::absolute(path, ec);
  if (ec) return files;
  if (fs::is_regular_file(p, ec)) return {p.string()};
  if (!fs::is_directory(p, ec)) return files;
  // What meshtrain reads from a directory (trainer/data.cpp): its .bin shards; the manifest of
  // `meshwork data prepare` rides along for the record.
  for (const auto& e : fs::directory_iterator(p, ec))
    if (e.is_regular_file(ec) && (e.path().extension() == ".bin" || e.path().filename() == "manifest.json"))
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

Result<DataPlacement> place_data(const std::string& data, const std::vector<std::string>& local_files,
                                 const std::vector<DataOnNode>& nodes, const std::string& field) {
  DataPlacement plan;
  plan.node_path = data;
  std::vector<std::string> missing;
  for (const DataOnNode& n : nodes)
    if (!n.found) missing.push_back(n.host);
  if (data.empty() || missing.empty()) return plan;  // the bundled corpus, or on every node
  if (local_files.empty()) {
    std::string hosts;
    for (const std::string& h : missing) hosts += (hosts.empty() ? "" : ", ") + h;
    return Error{field, data,
                 "a path every node can read: not found on " + hosts +
                     " (put the prepared shards on a filesystem the nodes share, at the same path, or "
                     "launch from the machine that holds them so they are uploaded with the run)"};
  }
  // One file: data/<name>. A directory: data/<dir name>/<shard>, the directory for meshtrain.
  const std::string top = field == "data" ? "data/" : "eval-data/";
  const fs::path given = fs::path(data).lexically_normal();
  const bool single = local_files.size() == 1 && fs::path(local_files[0]).filename() == given.filename();
  std::string dir_name = given.filename().string();
  if (dir_name.empty()) dir_name = given.parent_path().filename().string();  // "shards/"
  if (dir_name.empty() || dir_name == "." || dir_name == "..") dir_name = "data";
  plan.node_path = top + dir_name;
  for (const std::string& f : local_files) {
    const std::string name = fs::path(f).filename().string();
    plan.uploads.push_back(DeployFile{f, single ? top + name : top + dir_name + "/" + name, 0600, {}});
  }
  return plan;
}

Result<std::vector<DeployFile>> place_run_data(RunConfig& config, const std::vector<Node*>& nodes,
                                               const std::function<void(const std::string&)>& step) {
  std::vector<DeployFile> uploads;
  for (auto [field, value] : {std::pair{"data", &config.data}, std::pair{"eval_data", &config.eval_data}}) {
    if (!value->is_string() || value->get<std::string>().empty()) continue;
    const std::string data = value->get<std::string>();
    std::vector<DataOnNode> where(nodes.size());
    std::vector<std::thread> ask;
    for (size_t i = 0; i < nodes.size(); ++i) {
      where[i].host = nodes[i]->name();
      // A relative path is relative to the run directory on a node (meshtrain starts there),
      // which does not exist yet: it is on no node, but can still be uploaded.
      if (std::filesystem::path(data).is_relative()) continue;
      ask.emplace_back([&, i] {
        auto r = nodes[i]->exec(shell_join({"test", "-e", data}));
        where[i].found = r && r->exit_code == 0;
      });
    }
    for (auto& t : ask) t.join();
    auto placed = place_data(data, local_data_files(data), where, field);
    if (!placed) return placed.error();
    if (!placed->uploads.empty() && step)
      step(std::string(field) + ": " + data + " is uploaded with the run (" + std::to_string(placed->uploads.size()) +
           " file(s))");
    uploads.insert(uploads.end(), placed->uploads.begin(), placed->uploads.end());
    *value = placed->node_path;
  }
  return uploads;
}

}  // namespace meshwork::remote
