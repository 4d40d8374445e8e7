// `meshwork data prepare | info`: tokenized datasets for meshtrain (core/data/prepare.h).
//
//   meshwork data prepare --tokenizer PATH --input FILE... --out DIR [--text-field text]
//                         [--split paragraph|file] [--eos TOKEN] [--shard-tokens N] [--threads N]
//                         [--force] [--progress auto|plain|json|none]
//   meshwork data info DIR [--json]
// Progress goes to stderr (a `\r` line on a terminal, plain lines otherwise); `--progress json`
// writes one JSON object per line to stdout instead (the workbench's Prepare data dialog reads
// them): {"event":"progress","phase","bytes","total","documents","tokens","mb_per_s","eta_s"},
// then {"event":"done","reused",...} or, on failure, {"event":"error","message"}.
#include <signal.h>
#include <unistd.h>

#include <atomic>

#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/cli_args.h"
#include "core/data/manifest.h"
#include "core/data/prepare.h"

namespace meshwork::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kUsage =
    "usage: meshwork data prepare --tokenizer PATH --input FILE... --out DIR [options]\n"
    "       meshwork data info DIR [--json]\n"
    "Tokenizes .txt and .jsonl files with the model's own tokenizer (Hugging Face tokenizers for a\n"
    "tokenizer.json, SentencePiece for a tokenizer.model) into llm.c uint32 shards plus manifest.json,\n"
    "ready for `meshwork launch --data DIR`. Each document ends with the tokenizer's EOS and starts\n"
    "with its BOS where the model expects one. Running it again on the same inputs reuses the result.\n";

const std::vector<FlagSpec> kPrepareFlags = {
    {"--tokenizer", "PATH", "tokenizer.json, a SentencePiece .model, or a model directory with one"},
    {"--input", "FILE", "a .txt or .jsonl file (repeat, or list several after it)"},
    {"--out", "DIR", "where the shards and manifest.json go"},
    {"--text-field", "NAME", "the .jsonl field holding the text (default: text)"},
    {"--split", "MODE", ".txt documents: paragraph (blank-line separated, default) or file"},
    {"--eos", "TOKEN", "the separator token (default: the tokenizer's eos_token)"},
    {"--shard-tokens", "N", "tokens per shard (default: 100000000)"},
    {"--threads", "N", "encoder threads (default: every core)"},
    {"--force", "", "tokenize again even when the manifest matches"},
    {"--progress", "MODE", "auto (default), plain, json or none"},
};

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MB", bytes / 1e6);
  return b;
}

std::string eta_text(double s) {
  char b[32];
  if (s >= 3600) std::snprintf(b, sizeof b, "%dh%02dm", static_cast<int>(s / 3600), static_cast<int>(s / 60) % 60);
  else if (s >= 60) std::snprintf(b, sizeof b, "%dm%02ds", static_cast<int>(s / 60), static_cast<int>(s) % 60);
  else std::snprintf(b, sizeof b, "%ds", static_cast<int>(s + 0.5));
  return b;
}

std::atomic<bool> g_cancel{false};
void on_signal(int) { g_cancel = true; }

// SIGTERM (the workbench's Cancel) and Ctrl-C stop the preparation cleanly: the read from the
// worker is interrupted (no SA_RESTART), the worker killed, the unfinished shard removed.
void stop_on_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

json summary_json(const data::PrepareOutcome& o, const fs::path& out) {
  const auto& m = o.manifest;
  return {{"event", "done"},          {"reused", o.reused},       {"out", fs::absolute(out).string()},
          {"tokens", m.tokens},       {"documents", m.documents}, {"shards", m.shards.size()},
          {"summary", data::manifest_summary(m)}, {"seconds", m.seconds}};
}

int prepare_main(const Args& args) {
  auto f = parse_args(args, kPrepareFlags, "meshwork data prepare");
  if (!f) return fail(f.error());
  if (f->help) {
    std::cout << kUsage << "\n" << flags_help(kPrepareFlags);
    return kExitOk;
  }
  data::PrepareRequest req;
  req.tokenizer = f->value("--tokenizer").value_or("");
  for (const auto& [flag, value] : f->given)
    if (flag == "--input") req.inputs.emplace_back(value);
  for (const auto& p : f->positional) req.inputs.emplace_back(p);
  req.out = f->value("--out").value_or("");
  req.settings.text_field = f->value("--text-field").value_or("text");
  req.settings.split = f->value("--split").value_or("paragraph");
  req.settings.eos = f->value("--eos").value_or("");
  req.force = f->has("--force");
  auto shard = f->integer("--shard-tokens", 1, data::kMaxShardTokens, "a whole number of tokens >= 1", 100'000'000);
  if (!shard) return fail(shard.error());
  req.shard_tokens = *shard;
  auto threads = f->integer("--threads", 0, 4096, "a whole number >= 0 (0: every core)", 0);
  if (!threads) return fail(threads.error());
  req.threads = static_cast<int>(*threads);
  std::string mode = f->value("--progress").value_or("auto");
  if (mode != "auto" && mode != "plain" && mode != "json" && mode != "none")
    return fail(Error{"--progress", mode, "auto, plain, json or none"});
  if (mode == "auto") mode = isatty(STDERR_FILENO) ? "tty" : "plain";

  double last_plain = -1;
  std::string last_phase;
  auto on_progress = [&](const data::PrepareProgress& p) {
    const double rate = p.seconds > 0 ? p.bytes_done / p.seconds : 0;
    const double eta = rate > 0 ? (p.bytes_total - p.bytes_done) / rate : 0;
    if (mode == "json") {
      std::cout << json{{"event", "progress"}, {"phase", p.phase},        {"bytes", p.bytes_done},
                        {"total", p.bytes_total}, {"documents", p.documents}, {"tokens", p.tokens},
                        {"mb_per_s", rate / 1e6},  {"eta_s", eta}}
                       .dump()
                << std::endl;
      return;
    }
    if (mode == "none") return;
    char line[200];
    std::snprintf(line, sizeof line, "%s: %s / %s  %.1f MB/s  %lld tokens  ETA %s", p.phase.c_str(),
                  mb(p.bytes_done).c_str(), mb(p.bytes_total).c_str(), rate / 1e6,
                  static_cast<long long>(p.tokens), eta_text(eta).c_str());
    if (mode == "tty") {
      std::fprintf(stderr, "\r%-90s", line);
      std::fflush(stderr);
    } else if (p.phase != last_phase || p.seconds - last_plain >= 2 || p.bytes_done == p.bytes_total) {
      std::fprintf(stderr, "%s\n", line);  // one line at most every 2 s in logs
      last_plain = p.seconds;
    }
    last_phase = p.phase;
  };
  req.cancel = &g_cancel;
  stop_on_signals();
  auto outcome = data::prepare(req, on_progress);
  if (mode == "tty") std::fprintf(stderr, "\n");
  if (!outcome) {
    if (mode == "json") std::cout << json{{"event", "error"}, {"message", outcome.error().message()}}.dump() << std::endl;
    return fail(outcome.error());
  }
  if (mode == "json") {
    std::cout << summary_json(*outcome, req.out).dump() << std::endl;
    return kExitOk;
  }
  const auto& m = outcome->manifest;
  if (outcome->reused) {
    std::cout << "reused " << req.out.string() << ": same tokenizer, inputs and options as its manifest ("
              << data::manifest_summary(m) << "); nothing tokenized again (--force to redo)\n";
  } else {
    int64_t bytes = 0;
    for (const auto& s : m.sources) bytes += s.bytes;
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.1f MB/s", m.seconds > 0 ? bytes / m.seconds / 1e6 : 0.0);
    std::cout << "prepared " << req.out.string() << ": " << data::manifest_summary(m) << ", " << m.shards.size()
              << (m.shards.size() == 1 ? " shard" : " shards") << "; " << mb(bytes) << " in " << eta_text(m.seconds)
              << " (" << rate << ")\n";
  }
  std::cout << "train on it: meshwork launch --data " << req.out.string() << " ...\n";
  return kExitOk;
}

int info_main(const Args& args) {
  auto f = parse_args(args, {{"--json", "", ""}}, "meshwork data info");
  if (!f) return fail(f.error());
  if (f->help || f->positional.size() != 1) {
    std::cout << kUsage;
    return f->help ? kExitOk : kExitInvalid;
  }
  auto m = data::read_manifest(f->positional[0]);
  if (!m) return fail(m.error());
  if (f->has("--json")) std::cout << data::manifest_json(*m);
  else std::cout << data::manifest_summary(*m) << "\n";
  return kExitOk;
}

}  // namespace

int data_main(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? kExitInvalid : kExitOk;
  }
  const Args rest(args.begin() + 1, args.end());
  if (args[0] == "prepare") return prepare_main(rest);
  if (args[0] == "info") return info_main(rest);
  return fail(Error{"data", args[0], "allowed: prepare, info"});
}

}  // namespace meshwork::cli
