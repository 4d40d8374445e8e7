#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <tuple>

#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/torch.h>

namespace meshwork::trainer {
namespace fs = std::filesystem;

namespace {

Status write_atomic(const fs::path& path, const char* data, size_t size) {
  fs::path tmp = path;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Error{"--checkpoint-dir", path.string(), "a writable directory"};
  size_t off = 0;
  while (off < size) {
    ssize_t n = ::write(fd, data + off, size - off);
    if (n <= 0) {
      ::close(fd);
      return Error{"--checkpoint-dir", path.string(), "room to write the checkpoint"};
    }
    off += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Error{"--checkpoint-dir", path.string(), "a directory where files can be renamed"};
  // Make the rename itself durable.
  int dfd = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

}  // namespace

fs::path checkpoint_step_dir(const fs::path& dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return dir / name;
}

Status save_rank_state(const fs::path& step_dir, int rank, const RankState& s) {
  std::error_code ec;
  fs::create_directories(step_dir, ec);
  if (ec) return Error{"--checkpoint-dir", step_dir.string(), "a directory that can be created"};
  c10::Dict<std::string, at::Tensor> d;
  d.insert("step", at::tensor(s.step, at::kLong));
  d.insert("data_position", at::tensor(s.data_position, at::kLong));
  d.insert("rng", s.rng.cpu());
  for (size_t i = 0; i < s.params.size(); ++i) {
    d.insert("param/" + std::to_string(i), s.params[i].detach().cpu());
    d.insert("exp_avg/" + std::to_string(i), s.exp_avg[i].cpu());
    d.insert("exp_avg_sq/" + std::to_string(i), s.exp_avg_sq[i].cpu());
  }
  std::vector<char> bytes = torch::pickle_save(c10::IValue(d));
  return write_atomic(step_dir / ("rank" + std::to_string(rank) + ".pt"), bytes.data(), bytes.size());
}

nlohmann::json slice_index_to_json(const SliceIndex& index) {
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, g] : index) {
    nlohmann::json slices = nlohmann::json::array();
    for (const TensorSlice& s : g.slices)
      slices.push_back({s.rank, s.slot, s.file_offset, s.start, s.count, s.rows, s.stride});
    tensors[name] = {{"shape", g.shape}, {"slices", std::move(slices)}};
  }
  return {{"slice_fields", {"rank", "slot", "file_offset", "start", "count", "rows", "stride"}},
          {"tensors", std::move(tensors)}};
}

Result<SliceIndex> slice_index_from_json(const nlohmann::json& doc, const std::string& where) {
  if (!doc.is_object() || !doc.contains("tensors") || !doc["tensors"].is_object())
    return Error{"--resume", where, "a slice index (\"tensors\": the pieces of every global tensor each rank file holds)"};
  SliceIndex index;
  try {
    for (const auto& [name, t] : doc["tensors"].items()) {
      GlobalTensor g;
      g.shape = t.at("shape").get<std::vector<int64_t>>();
      for (const auto& a : t.at("slices")) {
        if (!a.is_array() || a.size() != 7) throw std::runtime_error("a slice of 7 numbers in " + name);
        TensorSlice s{a[0].get<int>(), a[1].get<int>(), a[2].get<int64_t>(), a[3].get<int64_t>(),
                      a[4].get<int64_t>(), a[5].get<int64_t>(), a[6].get<int64_t>()};
        if (s.rank < 0 || s.slot < 0 || s.file_offset < 0 || s.start < 0 || s.count < 0 || s.rows < 1 || s.stride < 0)
          throw std::runtime_error("non-negative offsets and counts in " + name);
        g.slices.push_back(s);
      }
      index.emplace(name, std::move(g));
    }
  } catch (const std::exception& e) {
    return Error{"--resume", where, std::string("a well-formed slice index (") + e.what() + ")"};
  }
  return index;
}

Status save_rank_slices(const fs::path& step_dir, int rank, const SliceIndex& slices) {
  std::error_code ec;
  fs::create_directories(step_dir, ec);
  const std::string text = slice_index_to_json(slices).dump();
  return write_atomic(step_dir / ("rank" + std::to_string(rank) + ".slices.json"), text.data(), text.size());
}

namespace {

// Every rank's pieces in one index: a piece that a lower rank holds alike is dropped, and every
// tensor must be covered exactly (the pieces of one tensor never overlap otherwise).
Result<SliceIndex> merge_rank_slices(const fs::path& step_dir, int world) {
  SliceIndex merged;
  // Per tensor, the pieces already listed: (start, count, rows, stride).
  std::map<std::string, std::set<std::tuple<int64_t, int64_t, int64_t, int64_t>>> listed;
  for (int r = 0; r < world; ++r) {
    const fs::path path = step_dir / ("rank" + std::to_string(r) + ".slices.json");
    std::ifstream in(path);
    auto doc = nlohmann::json::parse(in, nullptr, false);
    if (!in || doc.is_discarded()) return Error{"--checkpoint-dir", path.string(), "every rank's slice file"};
    auto part = slice_index_from_json(doc, path.string());
    if (!part.ok()) return part.error();
    for (auto& [name, g] : *part) {
      GlobalTensor& m = merged[name];
      if (m.shape.empty()) m.shape = g.shape;
      for (const TensorSlice& s : g.slices)
        if (listed[name].emplace(s.start, s.count, s.rows, s.stride).second) m.slices.push_back(s);
    }
  }
  for (const auto& [name, g] : merged) {
    int64_t numel = 1, held = 0;
    for (int64_t d : g.shape) numel *= d;
    for (const TensorSlice& s : g.slices) held += s.count * s.rows;
    if (held != numel)
      return Error{"--checkpoint-dir", step_dir.string() + ": " + name,
                   "pieces covering its " + std::to_string(numel) + " elements once (they hold " +
                       std::to_string(held) + ")"};
  }
  return merged;
}

}  // namespace

Status mark_complete(const fs::path& step_dir, const std::string& meta_json, int world) {
  std::string meta = meta_json;
  if (world > 0) {
    auto merged = merge_rank_slices(step_dir, world);
    if (!merged.ok()) return merged.error();
    auto doc = nlohmann::json::parse(meta_json);
    nlohmann::json index = slice_index_to_json(*merged);
    doc["slice_fields"] = std::move(index["slice_fields"]);
    doc["tensors"] = std::move(index["tensors"]);
    meta = doc.dump();
  }
  if (Status s = write_atomic(step_dir / "meta.json", meta.data(), meta.size()); !s.ok())
    return s;
  for (int r = 0; r < world; ++r) {
    std::error_code ec;
    fs::remove(step_dir / ("rank" + std::to_string(r) + ".slices.json"), ec);
  }
  const std::string done = "complete\n";
  return write_atomic(step_dir / "COMPLETE", done.data(), done.size());
}

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  std::error_code ec;
  std::optional<fs::path> best;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step-", 0) != 0 || !fs::exists(e.path() / "COMPLETE", ec)) continue;
    if (!best || name > best->filename().string()) best = e.path();  // fixed-width: text order
  }
  return best;
}

Result<std::string> read_meta(const fs::path& step_dir) {
  std::ifstream in(step_dir / "meta.json");
  if (!in) return Error{"--resume", step_dir.string(), "a checkpoint with meta.json"};
  return std::string(std::istreambuf_iterator<char>(in), {});
}

Result<RankState> load_rank_state(const fs::path& step_dir, int rank) {
  const fs::path path = step_dir / ("rank" + std::to_string(rank) + ".pt");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"--resume", path.string(), "a checkpoint file for this rank"};
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  try {
    auto d = c10::impl::toTypedDict<std::string, at::Tensor>(torch::pickle_load(bytes).toGenericDict());
    RankState s;
    s.step = d.at("step").item<int64_t>();
    s.data_position = d.at("data_position").item<int64_t>();
    s.rng = d.at("rng");
    for (size_t i = 0; d.contains("param/" + std::to_string(i)); ++i) {
      s.params.push_back(d.at("param/" + std::to_string(i)));
      s.exp_avg.push_back(d.at("exp_avg/" + std::to_string(i)));
      s.exp_avg_sq.push_back(d.at("exp_avg_sq/" + std::to_string(i)));
    }
    return s;
  } catch (const std::exception& e) {
    return Error{"--resume", path.string(), std::string("a readable checkpoint (") + e.what() + ")"};
  }
}

}  // namespace meshwork::trainer
