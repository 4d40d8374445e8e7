#include "core/data/prepare.h"

#include <chrono>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "core/data/sha256.h"
#include "core/data/shard_writer.h"
#include "core/data/tokenizer_worker.h"

namespace meshwork::data {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

Status check_inputs(const std::vector<fs::path>& inputs) {
  if (inputs.empty()) return Error{"--input", "", "at least one .txt or .jsonl file"};
  for (const auto& p : inputs) {
    std::error_code ec;
    if (!fs::exists(p, ec)) return Error{"--input", p.string(), "no such file"};
    if (!fs::is_regular_file(p, ec)) return Error{"--input", p.string(), "a .txt or .jsonl file (not a directory)"};
    const std::string ext = p.extension().string();
    if (ext != ".txt" && ext != ".jsonl")
      return Error{"--input", p.string(), "a .txt or .jsonl file (by its extension)"};
  }
  return Status::Ok();
}

// The manifest still describes this request, and every shard it lists is whole.
bool reusable(const Manifest& m, const Manifest& want, const fs::path& dir) {
  const auto& a = m.tokenizer;
  const auto& b = want.tokenizer;
  if (a.sha256 != b.sha256 || a.config_sha256 != b.config_sha256 || a.kind != b.kind) return false;
  if (m.options.text_field != want.options.text_field || m.options.split != want.options.split ||
      m.options.eos != want.options.eos || m.sources.size() != want.sources.size())
    return false;
  for (size_t i = 0; i < m.sources.size(); ++i)
    if (m.sources[i].sha256 != want.sources[i].sha256 || m.sources[i].bytes != want.sources[i].bytes) return false;
  int64_t total = 0;
  for (const auto& s : m.shards) {
    std::error_code ec;
    const auto size = fs::file_size(dir / s.file, ec);
    if (ec || size != 1024 + 4 * static_cast<uint64_t>(s.tokens)) return false;
    total += s.tokens;
  }
  return total == m.tokens && !m.shards.empty();
}

// Clears what an earlier preparation left: the manifest first, then shards and temporary files.
Status clear_output(const fs::path& dir) {
  std::error_code ec;
  fs::remove(dir / kManifestName, ec);
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if ((name.rfind("tokens-", 0) == 0 && (ends_with(name, ".bin") || ends_with(name, ".bin.tmp"))) ||
        name == std::string(kManifestName) + ".tmp")
      fs::remove(e.path(), ec);
  }
  if (ec) return Error{"--out", dir.string(), "cannot be cleared (" + ec.message() + ")"}.as(ErrorKind::io);
  return Status::Ok();
}

SpecialToken special_from(const nlohmann::json& j) { return {j.at("token").get<std::string>(), j.at("id").get<int64_t>()}; }

}  // namespace

Result<TokenizerFiles> resolve_tokenizer(const fs::path& path) {
  std::error_code ec;
  TokenizerFiles t;
  if (path.empty()) return Error{"--tokenizer", "missing", "required: a tokenizer.json, a SentencePiece .model, or a model directory"};
  if (fs::is_directory(path, ec)) {
    if (fs::is_regular_file(path / "tokenizer.json", ec)) t.file = path / "tokenizer.json";
    else if (fs::is_regular_file(path / "tokenizer.model", ec)) t.file = path / "tokenizer.model";
    else return Error{"--tokenizer", path.string(), "a directory with tokenizer.json or tokenizer.model (it has neither)"};
  } else if (fs::is_regular_file(path, ec)) {
    t.file = path;
  } else {
    return Error{"--tokenizer", path.string(), "no such file or directory"};
  }
  const std::string ext = t.file.extension().string();
  if (ext == ".json") t.kind = "tokenizer.json";
  else if (ext == ".model") t.kind = "sentencepiece";
  else
    return Error{"--tokenizer", t.file.string(),
                 "an unknown tokenizer format (allowed: a Hugging Face tokenizer.json or a SentencePiece .model)"};
  if (fs::path c = t.file.parent_path() / "tokenizer_config.json"; fs::is_regular_file(c, ec)) t.config = c;
  return t;
}

Result<PrepareOutcome> prepare(const PrepareRequest& req, const std::function<void(const PrepareProgress&)>& on_progress) {
  auto emit = [&](const PrepareProgress& p) {
    if (on_progress) on_progress(p);
  };
  auto tok = resolve_tokenizer(req.tokenizer);
  if (!tok) return tok.error();
  if (auto s = check_inputs(req.inputs); !s) return s.error();
  if (req.out.empty()) return Error{"--out", "missing", "required: the directory for the shards and manifest.json"};
  if (req.settings.split != "paragraph" && req.settings.split != "file")
    return Error{"--split", req.settings.split, "paragraph or file"};
  if (req.settings.text_field.empty()) return Error{"--text-field", "", "a JSON field name"};

  // Fingerprints: what the reuse rule compares.
  Manifest want;
  want.options = req.settings;
  want.tokenizer.path = fs::absolute(tok->file).string();
  want.tokenizer.kind = tok->kind;
  auto tsha = sha256_file(tok->file, "--tokenizer");
  if (!tsha) return tsha.error();
  want.tokenizer.sha256 = *tsha;
  if (!tok->config.empty()) {
    auto csha = sha256_file(tok->config, "--tokenizer");
    if (!csha) return csha.error();
    want.tokenizer.config_sha256 = *csha;
  }
  PrepareProgress hp{"hashing", 0, 0, 0, 0, 0};
  for (const auto& p : req.inputs) hp.bytes_total += static_cast<int64_t>(fs::file_size(p));
  const auto t_hash = Clock::now();
  for (const auto& p : req.inputs) {
    if (req.cancel && req.cancel->load()) return Error{"data prepare", "", "cancelled"}.as(ErrorKind::does_not_fit);
    auto sha = sha256_file(p, "--input");
    if (!sha) return sha.error();
    const auto bytes = static_cast<int64_t>(fs::file_size(p));
    want.sources.push_back({fs::absolute(p).string(), bytes, *sha, 0, 0});
    hp.bytes_done += bytes;
    hp.seconds = since(t_hash);
    emit(hp);
  }

  std::error_code ec;
  if (!req.force && fs::exists(req.out / kManifestName, ec)) {
    if (auto old = read_manifest(req.out); old && reusable(*old, want, req.out)) return PrepareOutcome{*old, true};
  }
  fs::create_directories(req.out, ec);
  if (!fs::is_directory(req.out, ec)) return Error{"--out", req.out.string(), "a directory that can be created"}.as(ErrorKind::io);
  if (auto s = clear_output(req.out); !s) return s.error();

  std::vector<std::string> args = {"--tokenizer", tok->file.string(), "--text-field", req.settings.text_field,
                                   "--split", req.settings.split};
  if (!tok->config.empty()) args.insert(args.end(), {"--config", tok->config.string()});
  if (!req.settings.eos.empty()) args.insert(args.end(), {"--eos", req.settings.eos});
  if (req.threads > 0) args.insert(args.end(), {"--threads", std::to_string(req.threads)});
  for (const auto& p : req.inputs) args.push_back(p.string());
  const fs::path log = req.out / "tokenizer-worker.log";
  auto worker = TokenizerWorker::start(req.python.empty() ? default_python() : req.python,
                                       req.worker_script.empty() ? default_worker_script() : req.worker_script, args, log);
  if (!worker) return worker.error();

  const auto t0 = Clock::now();
  ShardWriter shards(req.out, req.shard_tokens);
  Manifest m = want;
  PrepareProgress pp{"tokenizing", 0, hp.bytes_total, 0, 0, 0};
  int64_t finished_bytes = 0, file_docs = 0, file_tokens = 0;
  bool have_meta = false;
  WorkerFrame f;
  try {
    for (;;) {
      auto more = (*worker)->next(f, req.cancel);
      if (!more) {
        worker->reset();  // kill it before its log goes
        fs::remove(log, ec);
        return more.error();
      }
      if (!*more) break;
      const std::string text(f.payload.begin(), f.payload.end());
      switch (f.type) {
        case WorkerFrame::meta: {
          const auto j = nlohmann::json::parse(text);
          m.tokenizer.vocab_size = j.at("vocab_size").get<int64_t>();
          m.tokenizer.eos = special_from(j.at("eos"));
          if (!j.at("bos").is_null()) m.tokenizer.bos = special_from(j.at("bos"));
          have_meta = true;
          break;
        }
        case WorkerFrame::tokens: {
          if (f.payload.size() < 4 || f.payload.size() % 4 != 0 || !have_meta)
            return Error{"tokenizer worker", "frame", "a token frame of whole uint32 ids after the tokenizer facts"}.as(ErrorKind::internal);
          uint32_t docs;
          std::memcpy(&docs, f.payload.data(), 4);
          std::vector<uint32_t> ids((f.payload.size() - 4) / 4);
          std::memcpy(ids.data(), f.payload.data() + 4, ids.size() * 4);
          if (auto s = shards.write(ids); !s) return s.error();
          file_docs += docs;
          file_tokens += static_cast<int64_t>(ids.size());
          pp.documents += docs;
          pp.tokens += static_cast<int64_t>(ids.size());
          break;
        }
        case WorkerFrame::progress: {
          const auto j = nlohmann::json::parse(text);
          pp.bytes_done = finished_bytes + j.at("bytes").get<int64_t>();
          pp.seconds = since(t0);
          emit(pp);
          break;
        }
        case WorkerFrame::file_done: {
          const auto i = nlohmann::json::parse(text).at("file").get<size_t>();
          if (i >= m.sources.size()) return Error{"tokenizer worker", "frame", "a file index below the input count"}.as(ErrorKind::internal);
          m.sources[i].documents = file_docs;
          m.sources[i].tokens = file_tokens;
          finished_bytes += m.sources[i].bytes;
          file_docs = file_tokens = 0;
          break;
        }
        case WorkerFrame::error: {
          const auto j = nlohmann::json::parse(text);
          (void)(*worker)->wait();
          fs::remove(log, ec);
          return Error{j.at("field").get<std::string>(), j.at("value").get<std::string>(), j.at("allowed").get<std::string>()};
        }
        default:
          return Error{"tokenizer worker", "frame", "a known frame type (M, T, P, F, E)"}.as(ErrorKind::internal);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return Error{"tokenizer worker", "frame", std::string("well-formed JSON (") + e.what() + ")"}.as(ErrorKind::internal);
  }
  if (auto s = (*worker)->wait(); !s) return s.error();
  fs::remove(log, ec);
  if (!have_meta) return Error{"tokenizer worker", "output", "the tokenizer facts frame"}.as(ErrorKind::internal);
  if (pp.tokens == 0) return Error{"--input", req.inputs.front().string(), "text with at least one document (all inputs are empty)"};
  auto written = shards.finish();
  if (!written) return written.error();
  m.shards = *written;
  m.documents = pp.documents;
  m.tokens = pp.tokens;
  m.created = utc_now();
  m.seconds = since(t_hash);
  if (auto s = write_manifest(req.out, m); !s) return s.error();
  return PrepareOutcome{m, false};
}

}  // namespace meshwork::data
