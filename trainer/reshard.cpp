#include "trainer/reshard.h"

#include <algorithm>
#include <cstring>

#include "trainer/data.h"
#include "trainer/hf/mapped_rank_file.h"

namespace meshwork::trainer {
namespace fs = std::filesystem;
using at::Tensor;

namespace {

constexpr const char* kKinds[] = {"param", "exp_avg", "exp_avg_sq"};

// The part of a flat parameter that holds elements of its unit: the rest is FSDP padding.
int64_t valid_numel(const FlatParam& fp) {
  return std::clamp<int64_t>(fp.numel - fp.shard_offset, 0, fp.param.numel());
}

}  // namespace

std::string global_tensor_name(int unit, const std::string& param) {
  return unit == 0 ? param : "layers." + std::to_string(unit - 1) + "." + param;
}

SliceIndex rank_slices(const ParallelModel& pm, int rank) {
  SliceIndex out;
  const Model& model = pm.model();
  const auto& fps = pm.flat_params();
  for (size_t slot = 0; slot < fps.size(); ++slot) {
    const FlatParam& fp = fps[slot];
    for (const auto& run : pm.flat_source_runs(fp, fp.shard_offset, valid_numel(fp))) {
      const ParamInfo& full = model.full_layout(fp.unit).params[run.param];
      GlobalTensor& g = out[global_tensor_name(fp.unit, full.name)];
      g.shape = full.shape;
      if (!g.slices.empty()) {
        // The next row of a strided piece: same flat tensor, contiguous there, equal length and
        // one more stride along in the global tensor.
        TensorSlice& s = g.slices.back();
        const bool continues = s.slot == static_cast<int>(slot) && s.count == run.count &&
                               s.file_offset + s.rows * s.count == run.dst;
        if (continues && s.rows == 1 && run.src >= s.start + s.count) {
          s.stride = run.src - s.start;
          s.rows = 2;
          continue;
        }
        if (continues && s.rows > 1 && run.src == s.start + s.rows * s.stride) {
          ++s.rows;
          continue;
        }
      }
      g.slices.push_back({rank, static_cast<int>(slot), run.dst, run.src, run.count, 1, 0});
    }
  }
  return out;
}

Result<std::unique_ptr<ShardReader>> ShardReader::open(const fs::path& step_dir, const nlohmann::json& meta) {
  const std::string where = (step_dir / "meta.json").string();
  auto index = slice_index_from_json(meta, where);
  if (!index.ok()) return index.error();
  std::unique_ptr<ShardReader> r(new ShardReader());
  r->dir_ = step_dir;
  r->world_ = meta.value("world", 0);
  for (const auto& [name, g] : *index) {
    std::vector<Run>& runs = r->runs_[name];
    for (const TensorSlice& s : g.slices) {
      if (s.rank >= r->world_)
        return Error{"--resume", where + ": " + name, "slices of ranks below world " + std::to_string(r->world_)};
      for (int64_t k = 0; k < s.rows; ++k)
        runs.push_back({s.start + k * s.stride, s.count, s.rank, s.slot, s.file_offset + k * s.count});
    }
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
    r->shapes_[name] = g.shape;
  }
  return r;
}

ShardReader::~ShardReader() = default;

Result<const hf::MappedRankFile*> ShardReader::file(int rank) {
  auto it = files_.find(rank);
  if (it != files_.end()) return it->second.get();
  auto f = hf::MappedRankFile::open(dir_ / ("rank" + std::to_string(rank) + ".pt"));
  if (!f.ok()) return f.error();
  return (files_[rank] = std::move(*f)).get();
}

Status ShardReader::read(const std::string& kind, const std::string& name, int64_t start, int64_t count,
                         float* out) {
  const std::string where = (dir_ / "meta.json").string() + ": " + name;
  auto it = runs_.find(name);
  if (it == runs_.end())
    return Error{"--resume", where, "a checkpoint of this model (it holds no tensor " + name + ")"};
  const std::vector<Run>& runs = it->second;
  for (int64_t pos = start, end = start + count; pos < end;) {
    // The last run starting at or before pos (runs of one tensor are disjoint).
    auto next = std::upper_bound(runs.begin(), runs.end(), pos, [](int64_t p, const Run& r) { return p < r.start; });
    if (next == runs.begin() || std::prev(next)->start + std::prev(next)->count <= pos)
      return Error{"--resume", where, "a piece holding element " + std::to_string(pos) + " (no rank file has it)"};
    const Run& r = *std::prev(next);
    const int64_t n = std::min(end, r.start + r.count) - pos;
    auto f = file(r.rank);
    if (!f.ok()) return f.error();
    const std::string key = kind + "/" + std::to_string(r.slot);
    const Tensor* t = (*f)->find(key);
    const int64_t from = r.file_offset + (pos - r.start);
    if (!t || t->scalar_type() != at::kFloat || !t->is_contiguous() || from + n > t->numel())
      return Error{"--resume", (*f)->path().string(),
                   "a rank file holding fp32 " + key + " with elements up to " + std::to_string(from + n)};
    std::memcpy(out + (pos - start), t->data_ptr<float>() + from, static_cast<size_t>(n) * sizeof(float));
    pos += n;
  }
  return {};
}

Status ShardReader::check_shape(const std::string& name, const std::vector<int64_t>& shape) const {
  auto it = shapes_.find(name);
  auto text = [](const std::vector<int64_t>& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
    return out + "]";
  };
  if (it == shapes_.end())
    return Error{"--resume", (dir_ / "meta.json").string(), "a checkpoint of this model (it holds no tensor " + name + ")"};
  if (it->second != shape)
    return Error{"--resume", (dir_ / "meta.json").string() + ": " + name + " " + text(it->second),
                 "the shape this model has, " + text(shape)};
  return {};
}

Result<Tensor> ShardReader::rng(int rank) {
  auto f = file(rank < world_ ? rank : 0);
  if (!f.ok()) return f.error();
  const Tensor* t = (*f)->find("rng");
  if (!t) return Error{"--resume", (*f)->path().string(), "a rank file holding the RNG state (\"rng\")"};
  return t->clone();
}

void ShardReader::release_pages() const {
  for (const auto& [rank, f] : files_) f->release_pages();
}

Status load_resharded(ShardReader& reader, ParallelModel& pm, AdamW& opt) {
  at::NoGradGuard no_grad;
  const Model& model = pm.model();
  const auto& fps = pm.flat_params();
  for (size_t slot = 0; slot < fps.size(); ++slot) {
    const FlatParam& fp = fps[slot];
    const auto runs = pm.flat_source_runs(fp, fp.shard_offset, valid_numel(fp));
    for (const ParamInfo& p : model.full_layout(fp.unit).params)
      if (Status s = reader.check_shape(global_tensor_name(fp.unit, p.name), p.shape); !s.ok()) return s;
    // Zero past the runs: FSDP padding, as a fresh run has it (moments included).
    Tensor buf = at::zeros({fp.param.numel()}, at::kFloat);
    float* out = buf.data_ptr<float>();
    const Tensor targets[] = {fp.param, opt.exp_avg[slot], opt.exp_avg_sq[slot]};
    for (int k = 0; k < 3; ++k) {
      for (const auto& run : runs) {
        const std::string name = global_tensor_name(fp.unit, model.full_layout(fp.unit).params[run.param].name);
        if (Status s = reader.read(kKinds[k], name, run.src, run.count, out + run.dst); !s.ok()) return s;
      }
      targets[k].detach().copy_(buf.view(targets[k].sizes()));
    }
    reader.release_pages();
  }
  return {};
}

Result<Restored> restore_checkpoint(const fs::path& step_dir, const nlohmann::json& run_meta, int rank,
                                    ParallelModel& pm, AdamW& opt) {
  using nlohmann::json;
  const std::string dir = step_dir.string();
  auto text = read_meta(step_dir);
  const json saved = json::parse(text.ok() ? *text : "{}", nullptr, false);
  if (saved.is_discarded() || !saved.is_object()) return Error{"--resume", dir, "a checkpoint with a readable meta.json"};
  // Whatever the shape, the model, the sequence length and the global batch stay: they fix the
  // data order and what a step is (gradient accumulation absorbs a change of data-parallel size).
  for (const char* key : {"model", "seq_len", "global_batch", "model_config"}) {
    if (!saved.contains(key) && std::string(key) == "model_config") continue;  // older checkpoints
    if (saved.value(key, json()) != run_meta.value(key, json()))
      return Error{"--resume", dir,
                   std::string("a checkpoint of the same ") + key + " as this run (saved " +
                       saved.value(key, json()).dump() + ", this run " + run_meta.value(key, json()).dump() + ")"};
  }
  const int world = run_meta.value("world", 0);
  Restored out;
  out.same_shape = saved.value("mesh", json()) == run_meta.value("mesh", json()) && saved.value("world", 0) == world &&
                   saved.value("pp_virtual_stages", 1) == run_meta.value("pp_virtual_stages", 1);
  out.indexed = saved.contains("tensors");
  out.shapes = "saved at mesh " + saved.value("mesh", std::string("?")) + " on " + saved.value("world", json()).dump() +
               " ranks, this run is mesh " + run_meta.value("mesh", std::string("?")) + " on " + std::to_string(world);
  at::NoGradGuard no_grad;
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  if (out.indexed) {
    // At any shape, the same one included: no copy of a whole file (docs/checkpoints.md).
    for (const char* key : {"step", "data_position"})
      if (!saved.contains(key)) return Error{"--resume", dir, std::string("a checkpoint with meta.json \"") + key + "\""};
    auto reader = ShardReader::open(step_dir, saved);
    if (!reader.ok()) return reader.error();
    if (Status s = load_resharded(**reader, pm, opt); !s.ok()) return s.error();
    auto rng = (*reader)->rng(rank);
    if (!rng.ok()) return rng.error();
    gen.set_state(*rng);
    out.step = saved["step"].get<int64_t>();
  } else if (out.same_shape) {
    // A checkpoint without the index (an older meshtrain's): every rank loads its own file.
    auto st = load_rank_state(step_dir, rank);
    if (!st.ok()) return st.error();
    std::vector<Tensor>& params = pm.params();
    if (st->params.size() != params.size())
      return Error{"--resume", (step_dir / ("rank" + std::to_string(rank) + ".pt")).string(),
                   "a rank file of " + std::to_string(params.size()) + " flat parameters (it has " +
                       std::to_string(st->params.size()) + ")"};
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].copy_(st->params[i]);
      opt.exp_avg[i].copy_(st->exp_avg[i]);
      opt.exp_avg_sq[i].copy_(st->exp_avg_sq[i]);
    }
    gen.set_state(st->rng);
    out.step = st->step;
  } else {
    return Error{"--resume", dir,
                 "a checkpoint with meta.json \"tensors\" (the slice index that resuming at another shape needs; " +
                     out.shapes + "; resume it at its own shape)"};
  }
  // The data position is in sequences of the global order: the same step at any shape.
  const int64_t global_batch = run_meta.value("global_batch", int64_t{0});
  const int64_t position = TokenData::position_after(out.step, global_batch);
  if (saved.contains("data_position") && saved["data_position"].get<int64_t>() != position)
    return Error{"--resume", dir,
                 "a data position of " + std::to_string(position) + " sequences after step " +
                     std::to_string(out.step) + " at global batch " + std::to_string(global_batch) + " (saved " +
                     saved["data_position"].dump() + ")"};
  opt.step = out.step;
  return out;
}

}  // namespace meshwork::trainer
