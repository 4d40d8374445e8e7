#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

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

Status mark_complete(const fs::path& step_dir, const std::string& meta_json) {
  if (Status s = write_atomic(step_dir / "meta.json", meta_json.data(), meta_json.size()); !s.ok())
    return s;
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
