#include "core/data/manifest.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace meshwork::data {

namespace {

using nlohmann::json;

json special(const SpecialToken& t) { return {{"token", t.token}, {"id", t.id}}; }
SpecialToken special_from(const json& j) { return {j.at("token").get<std::string>(), j.at("id").get<int64_t>()}; }

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace

std::string manifest_json(const Manifest& m) {
  json sources = json::array();
  for (const auto& s : m.sources)
    sources.push_back({{"path", s.path}, {"bytes", s.bytes}, {"sha256", s.sha256}, {"documents", s.documents},
                       {"tokens", s.tokens}});
  json shards = json::array();
  for (const auto& s : m.shards) shards.push_back({{"file", s.file}, {"tokens", s.tokens}});
  const auto& t = m.tokenizer;
  json doc = {
      {"v", 1},
      {"format", "llm.c uint32 shards (magic 20240801)"},
      {"tokenizer",
       {{"path", t.path}, {"kind", t.kind}, {"sha256", t.sha256}, {"config_sha256", t.config_sha256},
        {"vocab_size", t.vocab_size}, {"bos", t.bos ? special(*t.bos) : json(nullptr)}, {"eos", special(t.eos)}}},
      {"options", {{"text_field", m.options.text_field}, {"split", m.options.split}, {"eos", m.options.eos}}},
      {"sources", sources},
      {"documents", m.documents},
      {"tokens", m.tokens},
      {"shards", shards},
      {"created", m.created},
      {"seconds", m.seconds}};
  return doc.dump(2) + "\n";
}

Result<Manifest> read_manifest(const std::filesystem::path& dir) {
  const auto path = dir / kManifestName;
  std::ifstream in(path);
  if (!in) return Error{"--data", path.string(), "a prepared data directory (no manifest.json: run meshwork data prepare)"};
  try {
    const json doc = json::parse(in);
    if (doc.value("v", 0) != 1) return Error{"--data", path.string(), "a manifest of version 1"};
    Manifest m;
    const auto& t = doc.at("tokenizer");
    m.tokenizer.path = t.at("path").get<std::string>();
    m.tokenizer.kind = t.at("kind").get<std::string>();
    m.tokenizer.sha256 = t.at("sha256").get<std::string>();
    m.tokenizer.config_sha256 = t.value("config_sha256", "");
    m.tokenizer.vocab_size = t.at("vocab_size").get<int64_t>();
    if (!t.at("bos").is_null()) m.tokenizer.bos = special_from(t.at("bos"));
    m.tokenizer.eos = special_from(t.at("eos"));
    const auto& o = doc.at("options");
    m.options.text_field = o.at("text_field").get<std::string>();
    m.options.split = o.at("split").get<std::string>();
    m.options.eos = o.value("eos", "");
    for (const auto& s : doc.at("sources"))
      m.sources.push_back({s.at("path").get<std::string>(), s.at("bytes").get<int64_t>(),
                           s.at("sha256").get<std::string>(), s.at("documents").get<int64_t>(),
                           s.at("tokens").get<int64_t>()});
    m.documents = doc.at("documents").get<int64_t>();
    m.tokens = doc.at("tokens").get<int64_t>();
    for (const auto& s : doc.at("shards")) m.shards.push_back({s.at("file").get<std::string>(), s.at("tokens").get<int64_t>()});
    m.created = doc.value("created", "");
    m.seconds = doc.value("seconds", 0.0);
    return m;
  } catch (const json::exception& e) {
    return Error{"--data", path.string(), std::string("a readable manifest (") + e.what() + ")"};
  }
}

Status write_manifest(const std::filesystem::path& dir, const Manifest& m) {
  const auto tmp = dir / (std::string(kManifestName) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << manifest_json(m);
    out.flush();
    if (!out) return Error{"--out", tmp.string(), "cannot be written"}.as(ErrorKind::io);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, dir / kManifestName, ec);
  if (ec) return Error{"--out", (dir / kManifestName).string(), "cannot be written (" + ec.message() + ")"}.as(ErrorKind::io);
  return Status::Ok();
}

std::string manifest_summary(const Manifest& m) {
  std::ostringstream out;
  char tokens[32];
  if (m.tokens >= 1'000'000) std::snprintf(tokens, sizeof tokens, "%.1fM", m.tokens / 1e6);
  else if (m.tokens >= 10'000) std::snprintf(tokens, sizeof tokens, "%.1fk", m.tokens / 1e3);
  else std::snprintf(tokens, sizeof tokens, "%lld", static_cast<long long>(m.tokens));
  out << tokens << " tokens, " << with_commas(m.documents) << " documents, "
      << std::filesystem::path(m.tokenizer.path).filename().string() << " (vocab "
      << with_commas(m.tokenizer.vocab_size) << ")";
  return out.str();
}

}  // namespace meshwork::data
