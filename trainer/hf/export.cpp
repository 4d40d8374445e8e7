#include "trainer/hf/export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/mesh.h"
#include "core/mesh_json.h"
#include "core/model_spec.h"
#include "trainer/checkpoint.h"
#include "trainer/hf/mapped_rank_file.h"
#include "trainer/hf/weight_names.h"
#include "trainer/hf/safetensors_writer.h"
#include "trainer/model.h"
#include "trainer/parallelize_tp.h"
#include "trainer/reshard.h"

namespace meshwork::trainer::hf {
namespace fs = std::filesystem;
using at::Tensor;

namespace {

// Files of the run's model directory an HF model directory carries beside the weights.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json",
                                           "special_tokens_map.json", "tokenizer.model",
                                           "generation_config.json"};

// What meta.json says about the checkpoint.
struct CheckpointMeta {
  ModelSpec spec;
  MeshShape mesh;
  GroupKind fsdp_group = GroupKind::dp_shard;
  std::string precision = "fp32";
  fs::path model_dir;  // empty: no tokenizer files to copy
  int64_t step = 0;
};

Result<CheckpointMeta> read_checkpoint_meta(const fs::path& step_dir) {
  auto text = read_meta(step_dir);
  if (!text.ok()) return Error{"--checkpoint", step_dir.string(), "a checkpoint step directory with meta.json"};
  auto j = nlohmann::json::parse(*text, nullptr, false);
  const std::string where = (step_dir / "meta.json").string();
  if (j.is_discarded() || !j.is_object()) return Error{"--checkpoint", where, "a JSON object"};
  CheckpointMeta m;
  // model_config: the spec the run trained (written since export exists); older checkpoints name
  // a preset or path only.
  Result<ModelSpec> spec = j.contains("model_config")
                               ? model_spec_from_json(j["model_config"], j.value("model", std::string("model")))
                               : load_model_spec(j.value("model", std::string()));
  if (!spec.ok()) return Error{where + ": model", spec.error().message(), "a model meshtrain can build"};
  m.spec = *spec;
  if (!j.contains("mesh_shape"))
    return Error{where, "no mesh_shape", "a checkpoint written by a meshtrain with export support"};
  auto mesh = mesh_shape_from_json(j["mesh_shape"], "mesh_shape", /*allow_auto=*/false);
  if (!mesh.ok()) return Error{where, mesh.error().message(), "a mesh shape"};
  m.mesh = *mesh;
  if (m.mesh[Axis::pp] > 1)
    return Error{where + ": mesh_shape", m.mesh.to_string(),
                 "a checkpoint without pipeline stages (pp = 1): exporting stages is not supported yet"};
  if (j.contains("fsdp_group")) {
    auto g = group_from_name(j["fsdp_group"].get<std::string>());
    if (!g) return Error{where + ": fsdp_group", j["fsdp_group"].dump(), "a group name"};
    m.fsdp_group = *g;
  }
  m.precision = j.value("precision", std::string("fp32"));
  m.model_dir = j.value("model_dir", std::string());
  return m;
}

Result<fs::path> resolve_step_dir(const fs::path& given) {
  std::error_code ec;
  if (fs::exists(given / "meta.json", ec)) {
    if (!fs::exists(given / "COMPLETE", ec))
      return Error{"--checkpoint", given.string(), "a complete checkpoint (COMPLETE is missing)"};
    return given;
  }
  if (auto latest = latest_checkpoint(given)) return *latest;
  return Error{"--checkpoint", given.string(),
               "a checkpoint step directory (step-N with COMPLETE) or a directory holding one"};
}

// Every tp rank's local flat units, rebuilt from one replica's FSDP shards (header comment),
// read lazily: the rank files are mapped (mapped_rank_file.h) and a full tensor is gathered
// from the pieces of it each shard holds when it is written, so the export holds one tensor
// (plus its converted copy), never the model.
class Consolidator {
 public:
  static Result<Consolidator> load(const fs::path& step_dir, const CheckpointMeta& meta, const Model& model) {
    Consolidator c;
    if (meta.mesh.ep > 1) {
      // Expert parallelism: a unit's flat parameters are a dense and an expert part sharded over
      // different groups, not one group's shards of the local unit. Every rank file's slices
      // name the global tensors they hold (reshard.h), so each tensor is read through them.
      std::ifstream in(step_dir / "meta.json");
      nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return Error{"--checkpoint", (step_dir / "meta.json").string(), "a JSON object"};
      auto reader = ShardReader::open(step_dir, j);
      if (!reader.ok()) return reader.error();
      c.slices_ = std::shared_ptr<ShardReader>(std::move(*reader));
      return c;
    }
    auto mesh = DeviceMesh::create(meta.mesh, static_cast<int>(meta.mesh.world_size()));
    if (!mesh.ok()) return mesh.error();
    const int t = meta.mesh.size(Axis::tp);
    c.shards_.resize(t);
    for (int r = 0; r < t; ++r) {
      MeshCoord coord;
      coord.set(Axis::tp, r);
      const int first = mesh->rank_of(coord);
      for (int rank : mesh->group_members(first, meta.fsdp_group)) {  // group-rank order
        const fs::path path = step_dir / ("rank" + std::to_string(rank) + ".pt");
        auto f = MappedRankFile::open(path);
        if (!f.ok()) return Error{"--checkpoint", f.error().message(), "every rank's file"};
        if (static_cast<int>((*f)->params().size()) != model.num_units())
          return Error{"--checkpoint", path.string(),
                       std::to_string(model.num_units()) + " flat parameters (one per unit), found " +
                           std::to_string((*f)->params().size())};
        c.shards_[r].push_back(std::move(*f));
      }
      for (int u = 0; u < model.num_units(); ++u) {
        int64_t numel = 0, held = 0;
        for (const ParamInfo& p : model.full_layout(u).params) numel += tp_local_param(p, model.spec(), t).numel();
        for (const auto& f : c.shards_[r]) held += f->params()[u].numel();
        if (held < numel)
          return Error{"--checkpoint", step_dir.string() + " unit " + std::to_string(u),
                       std::to_string(numel) + " elements per tp rank, the shards hold " + std::to_string(held)};
      }
    }
    return c;
  }

  // The full fp32 tensor of parameter i of unit u: each tp rank's piece is elements
  // [offset, offset + n) of its local flat unit, the concatenation of its shard group's shards.
  Result<Tensor> full(const Model& model, int u, size_t i) const {
    const UnitLayout& fl = model.full_layout(u);
    if (slices_) {
      const ParamInfo& p = fl.params[i];
      Tensor t = at::empty(p.shape, at::kFloat);
      if (Status st = slices_->read("param", global_tensor_name(u, p.name), 0, p.numel(), t.data_ptr<float>()); !st.ok())
        return st.error();
      return t;
    }
    const int t = static_cast<int>(shards_.size());
    int64_t offset = 0;
    for (size_t j = 0; j < i; ++j) offset += tp_local_param(fl.params[j], model.spec(), t).numel();
    const int64_t n = tp_local_param(fl.params[i], model.spec(), t).numel();
    std::vector<Tensor> pieces;
    for (int r = 0; r < t; ++r) {
      std::vector<Tensor> parts;  // views of the mapped shards that cover [offset, offset + n)
      int64_t begin = 0;
      for (const auto& f : shards_[r]) {
        const Tensor& shard = f->params()[u];
        const int64_t lo = std::max(offset, begin), hi = std::min(offset + n, begin + shard.numel());
        if (lo < hi) parts.push_back(shard.narrow(0, lo - begin, hi - lo));
        begin += shard.numel();
      }
      pieces.push_back((parts.size() == 1 ? parts[0] : at::cat(parts)).to(at::kFloat));
    }
    return tp_unsplit(fl.params[i], model.spec(), pieces);
  }

  // After a tensor is written: the mapped pages it read go back (the page cache keeps them).
  void release_pages() const {
    if (slices_) slices_->release_pages();
    for (const auto& group : shards_)
      for (const auto& f : group) f->release_pages();
  }

 private:
  std::vector<std::vector<std::unique_ptr<MappedRankFile>>> shards_;  // [tp rank][group rank]
  std::shared_ptr<ShardReader> slices_;  // ep > 1: the slice index instead of shards_
};

struct Entry {
  TensorSpec spec;
  int unit = 0;
  size_t param = 0;
  int64_t expert = -1;  // a stacked expert parameter's expert (weight_names.h); -1: the whole tensor
};

Status fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error{dir.string(), "open", "a directory that can be synced", ErrorKind::io};
  ::fsync(fd);
  ::close(fd);
  return {};
}

Status copy_synced(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  if (!in) return Error{from.string(), "", "a readable file", ErrorKind::io};
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  return write_file_synced(to, bytes);
}

// The test hook of the atomicity test: MESHTRAIN_EXPORT_ABORT_AFTER=k dies (as a kill would)
// once k files of the export are written.
void maybe_abort(int files_written) {
  const char* v = std::getenv("MESHTRAIN_EXPORT_ABORT_AFTER");
  if (v && std::atoi(v) == files_written) ::_exit(137);
}

std::string shard_name(size_t k, size_t n) {
  char b[64];
  std::snprintf(b, sizeof b, "model-%05zu-of-%05zu.safetensors", k, n);
  return b;
}

}  // namespace

Result<int64_t> parse_byte_size(const std::string& text, const std::string& field) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const std::map<std::string, double> units = {{"", 1},      {"B", 1},          {"KB", 1e3},
                                               {"MB", 1e6},  {"GB", 1e9},       {"TB", 1e12},
                                               {"KIB", 1024}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}};
  auto it = units.find(unit);
  double number = 0;
  try {
    number = i ? std::stod(text.substr(0, i)) : -1;
  } catch (...) {
    number = -1;
  }
  if (it == units.end() || number <= 0)
    return Error{field, text, "a positive size such as 5GB, 500MB, 64KB or a byte count"};
  return static_cast<int64_t>(number * it->second);
}

Result<ExportSummary> export_checkpoint(const ExportOptions& options) {
  ExportOptions o = options;
  // "out/hf/" names the directory out/hf (the temporary one goes beside it).
  o.out = fs::absolute(o.out).lexically_normal();
  if (o.out.filename().empty()) o.out = o.out.parent_path();
  auto step_dir = resolve_step_dir(o.checkpoint);
  if (!step_dir.ok()) return step_dir.error();
  auto meta = read_checkpoint_meta(*step_dir);
  if (!meta.ok()) return meta.error();
  // Unsaid, the export keeps what the user started from: bf16 when the source checkpoint's
  // config.json said bfloat16 (rounding its fp32 master copy back to bf16 gives the source bytes
  // again while it is untrained) or the run computed in bf16; fp32 otherwise.
  const std::string dtype_word =
      !o.dtype.empty() ? o.dtype : (meta->spec.dtype == "bfloat16" ? std::string("bf16") : meta->precision);
  if (dtype_word != "fp32" && dtype_word != "bf16") return Error{"--dtype", dtype_word, "fp32 or bf16"};
  const Dtype dtype = dtype_word == "bf16" ? Dtype::BF16 : Dtype::F32;
  std::error_code ec;
  if (fs::exists(o.out, ec) && !o.force)
    return Error{"--out", o.out.string(), "a path that does not exist yet (or --force to replace it)"};
  const fs::path parent = o.out.parent_path();
  fs::create_directories(parent, ec);

  Model model(meta->spec);
  auto consolidated = Consolidator::load(*step_dir, *meta, model);
  if (!consolidated.ok()) return consolidated.error();

  // The tensors, in name order, split into shards the way save_pretrained does.
  std::vector<Entry> entries;
  for (int u = 0; u < model.num_units(); ++u)
    for (size_t i = 0; i < model.full_layout(u).params.size(); ++i) {
      const ParamInfo& p = model.full_layout(u).params[i];
      const std::vector<HfPiece> pieces = hf_tensor_pieces(meta->spec.architecture, u, p.name, p.shape);
      if (pieces.empty())
        return Error{"export", p.name, "a parameter with a Hugging Face name", ErrorKind::internal};
      for (size_t k = 0; k < pieces.size(); ++k)
        entries.push_back({{pieces[k].name, dtype, pieces[k].shape}, u, i,
                           pieces.size() > 1 ? static_cast<int64_t>(k) : -1});
    }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.spec.name < b.spec.name; });
  std::vector<std::vector<Entry>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (const Entry& e : entries) {
    if (in_shard > 0 && in_shard + e.spec.bytes() > o.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(e);
    in_shard += e.spec.bytes();
    total += e.spec.bytes();
  }

  std::string tmpl = (parent / (o.out.filename().string() + ".tmp-XXXXXX")).string();
  if (!::mkdtemp(tmpl.data())) return Error{"--out", tmpl, "a writable parent directory", ErrorKind::io};
  const fs::path tmp(tmpl);
  // mkdtemp makes it private (0700); the published directory gets the usual mode (umask applied).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(tmp.c_str(), 0777 & ~mask);
  ExportSummary summary;
  summary.step_dir = *step_dir;
  int written = 0;
  auto done = [&](const std::string& file) {
    summary.files.push_back(file);
    maybe_abort(++written);
  };
  auto abandon = [&](const Error& e) -> Error {
    fs::remove_all(tmp, ec);
    return e;
  };

  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t k = 0; k < shards.size(); ++k) {
    const std::string file = shards.size() == 1 ? "model.safetensors" : shard_name(k + 1, shards.size());
    std::vector<TensorSpec> specs;
    for (const Entry& e : shards[k]) specs.push_back(e.spec);
    auto w = SafetensorsWriter::create(tmp / file, specs);
    if (!w.ok()) return abandon(w.error());
    std::map<std::string, const Entry*> by_name;
    for (const Entry& e : shards[k]) by_name[e.spec.name] = &e;
    // A stacked expert parameter is consolidated once for its E tensors (the names of one layer
    // sort together, so the cache holds one unit's parameters at most).
    std::map<std::pair<int, size_t>, Tensor> stacked;
    for (const TensorSpec& s : w->order()) {
      const Entry& e = *by_name.at(s.name);
      Tensor t;
      if (e.expert < 0) {
        auto full = consolidated->full(model, e.unit, e.param);
        if (!full.ok()) return abandon(full.error());
        t = *full;
      } else {
        if (!stacked.empty() && stacked.begin()->first.first != e.unit) stacked.clear();
        auto it = stacked.find({e.unit, e.param});
        if (it == stacked.end()) {
          auto full = consolidated->full(model, e.unit, e.param);
          if (!full.ok()) return abandon(full.error());
          it = stacked.emplace(std::make_pair(e.unit, e.param), *full).first;
        }
        t = it->second.select(0, e.expert);
      }
      t = (dtype == Dtype::BF16 ? t.to(at::kBFloat16) : t.to(at::kFloat)).contiguous();
      auto bytes = std::span<const std::byte>(static_cast<const std::byte*>(t.data_ptr()),
                                              static_cast<size_t>(t.nbytes()));
      if (Status st = w->write(s.name, bytes); !st.ok()) return abandon(st.error());
      weight_map[s.name] = file;
      ++summary.tensors;
      consolidated->release_pages();
    }
    if (Status st = w->finish(); !st.ok()) return abandon(st.error());
    done(file);
  }
  summary.bytes = total;
  if (shards.size() > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    if (Status st = write_file_synced(tmp / "model.safetensors.index.json", index.dump(2) + "\n"); !st.ok())
      return abandon(st.error());
    done("model.safetensors.index.json");
  }
  nlohmann::json config = model_spec_to_json(meta->spec);
  // Both keys (v5 reads dtype, v4 torch_dtype), saying the dtype of the weights written here,
  // not the source's.
  config["dtype"] = config["torch_dtype"] = dtype == Dtype::BF16 ? "bfloat16" : "float32";
  if (Status st = write_file_synced(tmp / "config.json", config.dump(2) + "\n"); !st.ok()) return abandon(st.error());
  done("config.json");
  if (!meta->model_dir.empty())
    for (const char* name : kTokenizerFiles) {
      if (!fs::is_regular_file(meta->model_dir / name, ec)) continue;
      if (Status st = copy_synced(meta->model_dir / name, tmp / name); !st.ok()) return abandon(st.error());
      done(name);
    }
  (void)fsync_dir(tmp);

  // Publish: the new directory takes out's name in one rename (an old one moved aside first).
  fs::path old;
  if (fs::exists(o.out, ec)) {
    old = tmp;
    old += ".old";
    fs::rename(o.out, old, ec);
    if (ec) return abandon(Error{"--out", o.out.string(), "a directory that can be replaced", ErrorKind::io});
  }
  fs::rename(tmp, o.out, ec);
  if (ec) return abandon(Error{"--out", o.out.string(), "a path the export can be renamed to: " + ec.message(), ErrorKind::io});
  (void)fsync_dir(parent);
  if (!old.empty()) fs::remove_all(old, ec);
  return summary;
}

int export_main(const std::vector<std::string>& args) {
  ExportOptions o;
  auto refuse = [](const Error& e) {
    std::cerr << "meshtrain export: " << e.message() << "\n";
    return exit_code(e.kind);
  };
  const std::string usage =
      "usage: meshtrain export --checkpoint DIR --out HF_DIR [--max-shard-size 5GB] [--dtype fp32|bf16] [--force]\n";
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_value = false;
    if (auto eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto take = [&]() -> std::optional<std::string> {
      if (has_value) return value;
      if (i + 1 < args.size()) return args[++i];
      return std::nullopt;
    };
    if (flag == "--help" || flag == "-h") {
      std::cout << usage;
      return kExitOk;
    }
    if (flag == "--force") {
      o.force = true;
      continue;
    }
    auto v = take();
    if (!v) return refuse(Error{flag, "", "a value"});
    if (flag == "--checkpoint") o.checkpoint = *v;
    else if (flag == "--out") o.out = *v;
    else if (flag == "--dtype") o.dtype = *v;
    else if (flag == "--max-shard-size") {
      auto b = parse_byte_size(*v, "--max-shard-size");
      if (!b.ok()) return refuse(b.error());
      o.max_shard_bytes = *b;
    } else {
      return refuse(Error{flag, "", "one of --checkpoint, --out, --max-shard-size, --dtype, --force"});
    }
  }
  if (o.checkpoint.empty()) return refuse(Error{"--checkpoint", "", "a checkpoint directory"});
  if (o.out.empty()) return refuse(Error{"--out", "", "the Hugging Face directory to write"});
  auto s = export_checkpoint(o);
  if (!s.ok()) return refuse(s.error());
  std::cout << "meshtrain export: " << s->step_dir.string() << " -> " << o.out.string() << ": "
            << s->tensors << " tensors, " << s->bytes << " bytes in";
  for (const auto& f : s->files) std::cout << " " << f;
  std::cout << "\n";
  return kExitOk;
}

}  // namespace meshwork::trainer::hf
