// `meshwork data prepare` end to end: the built CLI and its tokenizer worker against ids the
// reference libraries compute one document at a time (reference.py), shards read back with
// meshtrain's TokenData, the manifest, reuse, and every input error with its exact words.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/data.h"

namespace fs = std::filesystem;

namespace {

struct Ran {
  int rc = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

Ran run(const std::string& command, const fs::path& scratch) {
  const fs::path err = scratch / "stderr.txt";
  Ran r;
  FILE* p = popen((command + " 2>" + quote(err.string())).c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.err = slurp(err);
  return r;
}

std::vector<uint32_t> ids_of(const fs::path& raw) {
  const std::string b = slurp(raw);
  std::vector<uint32_t> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

// Every token of a prepared directory, through meshtrain's own reader.
std::vector<uint32_t> read_stream(const fs::path& dir) {
  auto data = meshwork::trainer::TokenData::open(dir, int64_t{1} << 31);
  EXPECT_TRUE(data.ok()) << (data.ok() ? "" : data.error().message());
  if (!data.ok()) return {};
  const int64_t n = (*data)->num_tokens();
  std::vector<int64_t> all(static_cast<size_t>(n));
  (*data)->sequence(0, n - 1, all.data());
  return {all.begin(), all.end()};
}

// Text with what breaks tokenizers: unicode, emoji, CRLF, runs of blank lines, blank lines of
// spaces, a 6,000-character word, a final line break.
const std::string kText =
    "First document: \xc3\x9cn\xc3\xaf\x63\xc3\xb6\x64\xc3\xa9 caf\xc3\xa9 \xf0\x9f\x98\x80\xf0\x9f\x9a\x80 and "
    "\xe6\xbc\xa2\xe5\xad\x97.\r\nIts second line, CRLF.\r\n\r\n\r\n"
    "Second document after blank CRLF lines.\n\n\n" +
    std::string("Long") + std::string(6000, 'x') + " word ends it\n \t \n"
    "Fourth: tabs\tand  spaces, digits 1234567890 \xf0\x9f\x8e\x89\n";

const std::string kJsonl =
    "{\"body\": \"caf\\u00e9 \\ud83d\\ude00 emoji\", \"id\": 1}\n"
    "\n"
    "{\"body\": \"windows\\r\\nline\\r\\n\\r\\nbreaks\", \"id\": 2}\n"
    "{\"body\": \"\", \"id\": 3}\n"
    "{\"body\": \"" + std::string(3000, 'y') + "\", \"id\": 4}\n";

class DataPrepare : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/meshwork-data-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    ASSERT_EQ(std::system((python() + " " REFERENCE_PY " train-bpe " + quote((root_ / "bpe").string())).c_str()), 0);
    ASSERT_EQ(std::system((python() + " " REFERENCE_PY " train-spm " + quote((root_ / "spm").string())).c_str()), 0);
    for (const char* style : {"llama3", "llama2"})
      ASSERT_EQ(std::system((python() + " " REFERENCE_PY " train-bpe --style " + style + " " +
                             quote((root_ / style).string()) + " > /dev/null 2>&1").c_str()), 0);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  void SetUp() override {
    dir_ = root_ / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
    write_file(dir_ / "a.txt", kText);
    write_file(dir_ / "b.jsonl", kJsonl);
  }

  static std::string python() { return MESHWORK_TEST_PYTHON; }
  fs::path in(const std::string& name) const { return dir_ / name; }

  Ran prepare(const std::string& args) const {
    return run(std::string(MESHWORK_BIN) + " data prepare --progress none " + args, dir_);
  }
  // The reference ids of `files` (paths relative to the test's directory).
  std::vector<uint32_t> expected(const fs::path& tokenizer, const std::string& files, const std::string& extra = "") const {
    const fs::path out = dir_ / "expected.bin";
    const std::string cmd = "cd " + quote(dir_.string()) + " && " + python() + " " REFERENCE_PY " expect " +
                            quote(tokenizer.string()) + " " + quote(out.string()) + " " + extra + " " + files;
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return ids_of(out);
  }
  nlohmann::json manifest(const fs::path& out) const { return nlohmann::json::parse(slurp(out / "manifest.json")); }

  static fs::path root_;
  fs::path dir_;
};

fs::path DataPrepare::root_;

TEST_F(DataPrepare, ByteLevelBpeIdsEqualTokenizersAcrossShards) {
  const fs::path out = dir_ / "out";
  const Ran r = prepare("--tokenizer " + (root_ / "bpe").string() + " --input " + in("a.txt").string() + " " +
                        in("b.jsonl").string() + " --text-field body --shard-tokens 97 --out " + out.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto want = expected(root_ / "bpe" / "tokenizer.json", "a.txt b.jsonl", "--text-field body");
  ASSERT_GT(want.size(), 2000u);  // the long words really were encoded
  EXPECT_EQ(read_stream(out), want);
  // 97-token shards: several, each an llm.c uint32 shard, the last one partial.
  const auto m = manifest(out);
  ASSERT_EQ(m["shards"].size(), (want.size() + 96) / 97);
  std::ifstream first(out / "tokens-000000.bin", std::ios::binary);
  int32_t header[3];
  first.read(reinterpret_cast<char*>(header), sizeof header);
  EXPECT_EQ(header[0], 20240801);
  EXPECT_EQ(header[2], 97);
  EXPECT_EQ(m["shards"].back()["tokens"].get<size_t>(), want.size() - 97 * (m["shards"].size() - 1));
  // Documents: 4 paragraphs in a.txt; 3 non-empty bodies in b.jsonl (the blank line and "" skipped).
  EXPECT_EQ(m["sources"][0]["documents"], 4);
  EXPECT_EQ(m["sources"][1]["documents"], 3);
  EXPECT_EQ(m["documents"], 7);
  EXPECT_TRUE(m["tokenizer"]["bos"].is_null());  // GPT-2 style: EOS between documents only
  EXPECT_EQ(m["tokenizer"]["eos"]["token"], "<|endoftext|>");
  size_t eos = 0;
  for (uint32_t t : want) eos += t == m["tokenizer"]["eos"]["id"].get<uint32_t>();
  EXPECT_EQ(eos, 7u);
  EXPECT_EQ(want.back(), m["tokenizer"]["eos"]["id"].get<uint32_t>());
}

// Tiny read blocks and batches (7 bytes): every separator, CRLF pair and multi-byte character
// straddles a block boundary somewhere; the ids must not change.
TEST_F(DataPrepare, BlockBoundariesDoNotChangeTheIds) {
  const fs::path out = dir_ / "out";
  std::string text;
  for (int i = 0; i < 30; ++i)
    text += "Doc " + std::to_string(i) + " caf\xc3\xa9 \xf0\x9f\x98\x80\r\n" + std::string(i % 4, ' ') + "\r\n" +
            (i % 3 ? "\n\n" : "") + "tail " + std::string(static_cast<size_t>(i), 'z') + "\n";
  write_file(in("many.txt"), text);
  const Ran r = run("MESHWORK_DATA_BATCH_BYTES=7 " + std::string(MESHWORK_BIN) + " data prepare --progress none --tokenizer " +
                        (root_ / "bpe").string() + " --input " + in("many.txt").string() + " " + in("b.jsonl").string() +
                        " --text-field body --out " + out.string(),
                    dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_stream(out), expected(root_ / "bpe" / "tokenizer.json", "many.txt b.jsonl", "--text-field body"));
  EXPECT_EQ(manifest(out)["sources"][0]["documents"], 31);  // a "tail" line starts the next document
}

TEST_F(DataPrepare, WholeFileSplitKeepsEveryByte) {
  const fs::path out = dir_ / "out";
  const Ran r = prepare("--tokenizer " + (root_ / "bpe" / "tokenizer.json").string() + " --input " +
                        in("a.txt").string() + " --split file --out " + out.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_stream(out), expected(root_ / "bpe" / "tokenizer.json", "a.txt", "--split file"));
  EXPECT_EQ(manifest(out)["documents"], 1);
}

TEST_F(DataPrepare, SentencePieceModelAddsBosLikeLlama2) {
  const fs::path out = dir_ / "out";
  const Ran r = prepare("--tokenizer " + (root_ / "spm").string() + " --input " + in("a.txt").string() +
                        " --input " + in("b.jsonl").string() + " --text-field body --out " + out.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto want = expected(root_ / "spm" / "tokenizer.model", "a.txt b.jsonl", "--text-field body");
  const auto got = read_stream(out);
  EXPECT_EQ(got, want);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front(), 1u);  // <s>
  EXPECT_EQ(got.back(), 2u);   // </s>
  const auto m = manifest(out);
  EXPECT_EQ(m["tokenizer"]["kind"], "sentencepiece");
  EXPECT_EQ(m["tokenizer"]["bos"]["token"], "<s>");
  EXPECT_EQ(m["tokenizer"]["eos"]["token"], "</s>");
  EXPECT_EQ(m["tokenizer"]["vocab_size"], 600);
}

// Llama-3: the tokenizer.json's TemplateProcessing adds <|begin_of_text|>; the config has no
// add_bos_token, so the post-processor decides.
TEST_F(DataPrepare, BosFromThePostProcessorLikeLlama3) {
  const fs::path out = dir_ / "out";
  const Ran r = prepare("--tokenizer " + (root_ / "llama3").string() + " --input " + in("a.txt").string() + " " +
                        in("b.jsonl").string() + " --text-field body --out " + out.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = read_stream(out);
  EXPECT_EQ(got, expected(root_ / "llama3" / "tokenizer.json", "a.txt b.jsonl", "--text-field body"));
  const auto m = manifest(out);
  EXPECT_EQ(m["tokenizer"]["bos"]["token"], "<|begin_of_text|>");
  EXPECT_EQ(m["tokenizer"]["eos"]["token"], "<|end_of_text|>");
  size_t bos = 0;
  for (uint32_t t : got) bos += t == m["tokenizer"]["bos"]["id"].get<uint32_t>();
  EXPECT_EQ(bos, 7u);  // one per document
}

// Llama-2/Mistral tokenizer.json: tokenizer_config.json's add_bos_token puts <s> first.
TEST_F(DataPrepare, BosFromTheConfigLikeLlama2TokenizerJson) {
  const fs::path out = dir_ / "out";
  const Ran r = prepare("--tokenizer " + (root_ / "llama2").string() + " --input " + in("a.txt").string() + " --out " + out.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = read_stream(out);
  EXPECT_EQ(got, expected(root_ / "llama2" / "tokenizer.json", "a.txt"));
  const auto m = manifest(out);
  EXPECT_EQ(m["tokenizer"]["bos"]["token"], "<s>");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front(), m["tokenizer"]["bos"]["id"].get<uint32_t>());
}

TEST_F(DataPrepare, SentencePieceWithoutBosWhenTheConfigSaysSo) {
  fs::create_directories(dir_ / "spm");
  fs::copy_file(root_ / "spm" / "tokenizer.model", dir_ / "spm" / "tokenizer.model");
  write_file(dir_ / "spm" / "tokenizer_config.json", "{\"add_bos_token\": false}");
  const fs::path out = dir_ / "out";
  const Ran r = prepare("--tokenizer " + (dir_ / "spm").string() + " --input " + in("a.txt").string() + " --out " + out.string());
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto got = read_stream(out);
  EXPECT_EQ(got, expected(dir_ / "spm" / "tokenizer.model", "a.txt"));
  ASSERT_FALSE(got.empty());
  EXPECT_NE(got.front(), 1u);
  EXPECT_TRUE(manifest(out)["tokenizer"]["bos"].is_null());
}

TEST_F(DataPrepare, ManifestRecordsTokenizerSourcesAndShards) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(prepare("--tokenizer " + (root_ / "bpe").string() + " --input " + in("a.txt").string() + " " +
                    in("b.jsonl").string() + " --text-field body --out " + out.string())
                .rc,
            0);
  const auto m = manifest(out);
  auto sha = [&](const fs::path& p) {
    std::string s = run(python() + " " REFERENCE_PY " sha256 " + quote(p.string()), dir_).out;
    return s.substr(0, s.find('\n'));
  };
  EXPECT_EQ(m["v"], 1);
  EXPECT_EQ(m["tokenizer"]["sha256"], sha(root_ / "bpe" / "tokenizer.json"));
  EXPECT_EQ(m["tokenizer"]["config_sha256"], sha(root_ / "bpe" / "tokenizer_config.json"));
  EXPECT_EQ(m["tokenizer"]["path"], fs::absolute(root_ / "bpe" / "tokenizer.json").string());
  EXPECT_EQ(m["options"]["text_field"], "body");
  EXPECT_EQ(m["options"]["split"], "paragraph");
  ASSERT_EQ(m["sources"].size(), 2u);
  EXPECT_EQ(m["sources"][0]["path"], in("a.txt").string());
  EXPECT_EQ(m["sources"][0]["bytes"], kText.size());
  EXPECT_EQ(m["sources"][0]["sha256"], sha(in("a.txt")));
  EXPECT_EQ(m["sources"][1]["sha256"], sha(in("b.jsonl")));
  const int64_t per_source = m["sources"][0]["tokens"].get<int64_t>() + m["sources"][1]["tokens"].get<int64_t>();
  EXPECT_EQ(m["tokens"].get<int64_t>(), per_source);
  ASSERT_EQ(m["shards"].size(), 1u);
  EXPECT_EQ(m["shards"][0]["file"], "tokens-000000.bin");
  EXPECT_EQ(m["shards"][0]["tokens"], m["tokens"]);
  EXPECT_EQ(fs::file_size(out / "tokens-000000.bin"), 1024 + 4 * m["tokens"].get<uintmax_t>());
  // `meshwork data info` says the same in one line.
  const Ran info = run(std::string(MESHWORK_BIN) + " data info " + out.string(), dir_);
  EXPECT_EQ(info.rc, 0);
  EXPECT_NE(info.out.find(" tokens, 7 documents, tokenizer.json (vocab " +
                          std::to_string(m["tokenizer"]["vocab_size"].get<int64_t>()) + ")\n"),
            std::string::npos)
      << info.out;
  // Nothing but the shards and the manifest is left behind.
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(out)) ++entries;
  EXPECT_EQ(entries, 2u);
}

TEST_F(DataPrepare, RerunReusesAndAChangedInputRedoes) {
  const fs::path out = dir_ / "out";
  const std::string args = "--tokenizer " + (root_ / "bpe").string() + " --input " + in("a.txt").string() + " --out " + out.string();
  ASSERT_EQ(prepare(args).rc, 0);
  const auto first = manifest(out);
  const auto shard_time = fs::last_write_time(out / "tokens-000000.bin");
  const Ran again = prepare(args);
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find("reused " + out.string() + ": same tokenizer, inputs and options"), std::string::npos) << again.out;
  EXPECT_EQ(fs::last_write_time(out / "tokens-000000.bin"), shard_time);
  EXPECT_EQ(manifest(out)["created"], first["created"]);
  // Another option is another dataset.
  const Ran other = prepare(args + " --split file");
  ASSERT_EQ(other.rc, 0) << other.err;
  EXPECT_NE(other.out.find("prepared "), std::string::npos) << other.out;
  EXPECT_EQ(manifest(out)["documents"], 1);
  ASSERT_EQ(prepare(args).rc, 0);  // back to paragraphs
  // A changed input is tokenized again, and the stream follows the new text.
  write_file(in("a.txt"), "Only this now.\n\nAnd this.\n");
  const Ran changed = prepare(args);
  ASSERT_EQ(changed.rc, 0) << changed.err;
  EXPECT_NE(changed.out.find("prepared "), std::string::npos) << changed.out;
  EXPECT_EQ(manifest(out)["documents"], 2);
  EXPECT_EQ(read_stream(out), expected(root_ / "bpe" / "tokenizer.json", "a.txt"));
}

TEST_F(DataPrepare, ProgressJsonLinesEndWithDone) {
  const Ran r = run(std::string(MESHWORK_BIN) + " data prepare --progress json --tokenizer " + (root_ / "bpe").string() +
                        " --input " + in("a.txt").string() + " --out " + (dir_ / "out").string(),
                    dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<nlohmann::json> events;
  while (std::getline(lines, line)) events.push_back(nlohmann::json::parse(line));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["event"], "progress");
  EXPECT_EQ(events.front()["phase"], "hashing");
  const auto& last_progress = events[events.size() - 2];
  EXPECT_EQ(last_progress["phase"], "tokenizing");
  EXPECT_EQ(last_progress["bytes"], last_progress["total"]);
  EXPECT_EQ(events.back()["event"], "done");
  EXPECT_EQ(events.back()["reused"], false);
  EXPECT_EQ(events.back()["documents"], 4);
}

#ifdef MESHTRAIN_BIN
// meshtrain trains on the prepared directory (a tiny Llama with the tokenizer's vocabulary), and
// refuses it for a model whose vocabulary is smaller than the ids.
TEST_F(DataPrepare, MeshtrainTrainsOnThePreparedDirectory) {
  const fs::path out = dir_ / "out";
  ASSERT_EQ(prepare("--tokenizer " + (root_ / "spm").string() + " --input " + in("a.txt").string() + " " +
                    in("b.jsonl").string() + " --text-field body --out " + out.string()).rc,
            0);
  auto config = nlohmann::json::parse(slurp(fs::path(MESHWORK_RESOURCE_DIR) / "models" / "tiny.json"));
  config["vocab_size"] = 600;
  write_file(dir_ / "config.json", config.dump());
  const std::string train = std::string(MESHTRAIN_BIN) + " --model " + (dir_ / "config.json").string() + " --data " +
                            out.string() + " --steps 3 --seq-len 32 --global-batch 2 --warmup-steps 1 --run-dir ";
  const Ran r = run(train + (dir_ / "run").string(), dir_);
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  size_t steps = 0;
  std::istringstream metrics(slurp(dir_ / "run" / "metrics-rank0.jsonl"));
  for (std::string line; std::getline(metrics, line);) steps += line.find("\"type\":\"step\"") != std::string::npos;
  EXPECT_EQ(steps, 3u);
  config["vocab_size"] = 256;
  write_file(dir_ / "config.json", config.dump());
  const Ran small = run(train + (dir_ / "run-small").string(), dir_);
  EXPECT_EQ(small.rc, 2);
  EXPECT_NE((small.err + small.out).find("tokens below the model's vocab_size 256"), std::string::npos) << small.err;
}
#endif

// Errors: exit 2 and meshwork's `field: value: allowed` line, naming the file and line.
TEST_F(DataPrepare, MissingInputFile) {
  const Ran r = prepare("--tokenizer " + (root_ / "bpe").string() + " --input " + in("nope.txt").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "meshwork: --input: " + in("nope.txt").string() + ": no such file\n");
}

TEST_F(DataPrepare, JsonlLineThatIsNotJson) {
  write_file(in("bad.jsonl"), "{\"text\": \"fine\"}\n{\"text\": oops}\n");
  const Ran r = prepare("--tokenizer " + (root_ / "bpe").string() + " --input " + in("bad.jsonl").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "meshwork: --input: bad.jsonl:2: not a JSON object (Expecting value: line 1 column 10 (char 9))\n");
  EXPECT_FALSE(fs::exists(dir_ / "o" / "manifest.json"));
}

TEST_F(DataPrepare, JsonlLineWithoutTheField) {
  const Ran r = prepare("--tokenizer " + (root_ / "bpe").string() + " --input " + in("b.jsonl").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "meshwork: --input: b.jsonl:1: has no field \"text\" (fields: body, id); choose one with --text-field\n");
}

TEST_F(DataPrepare, UnknownTokenizerFormat) {
  write_file(in("vocab.txt"), "hello\nworld\n");
  const Ran r = prepare("--tokenizer " + in("vocab.txt").string() + " --input " + in("a.txt").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "meshwork: --tokenizer: " + in("vocab.txt").string() +
                       ": an unknown tokenizer format (allowed: a Hugging Face tokenizer.json or a SentencePiece .model)\n");
}

TEST_F(DataPrepare, TokenizerWithoutEos) {
  fs::create_directories(dir_ / "noeos");
  fs::copy_file(root_ / "bpe" / "tokenizer.json", dir_ / "noeos" / "tokenizer.json");
  const fs::path tok = dir_ / "noeos" / "tokenizer.json";
  const Ran r = prepare("--tokenizer " + (dir_ / "noeos").string() + " --input " + in("a.txt").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "meshwork: --tokenizer: " + tok.string() +
                       ": has no EOS token (no eos_token in tokenizer_config.json); name one with --eos TOKEN\n");
  // --eos names it, and must be a token of the vocabulary.
  const Ran bad = prepare("--tokenizer " + tok.string() + " --eos '<nope>' --input " + in("a.txt").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(bad.rc, 2);
  EXPECT_EQ(bad.err, "meshwork: --eos: <nope>: not a token of the tokenizer\n");
  EXPECT_EQ(prepare("--tokenizer " + tok.string() + " --eos '<|endoftext|>' --input " + in("a.txt").string() + " --out " + (dir_ / "o").string()).rc, 0);
}

TEST_F(DataPrepare, MissingTokenizerAndBadFlags) {
  Ran r = prepare("--tokenizer " + in("none").string() + " --input " + in("a.txt").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "meshwork: --tokenizer: " + in("none").string() + ": no such file or directory\n");
  r = prepare("--tokenizer " + (root_ / "bpe").string() + " --input " + in("a.txt").string() + " --split lines --out " + (dir_ / "o").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "meshwork: --split: lines: paragraph or file\n");
  write_file(in("data.csv"), "a,b\n");
  r = prepare("--tokenizer " + (root_ / "bpe").string() + " --input " + in("data.csv").string() + " --out " + (dir_ / "o").string());
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.err, "meshwork: --input: " + in("data.csv").string() + ": a .txt or .jsonl file (by its extension)\n");
}

}  // namespace
