// Other tools' runs: event files written by torch.utils.tensorboard's SummaryWriter and
// trainer_state.json written by transformers' TrainerState (the real libraries, run by the test),
// read back to exactly the scalars they hold; cut and corrupt files keep every intact record.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/interop/foreign_metrics.h"
#include "core/interop/tfevents.h"

namespace meshwork::interop {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ForeignRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("meshwork_foreign_" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "events");
    fs::create_directories(root_ / "state");
    const std::string py = std::string(MESHWORK_TEST_PYTHON) + " " WRITER_PY " ";
    ASSERT_EQ(std::system((py + "events " + (root_ / "events").string()).c_str()), 0);
    ASSERT_EQ(std::system((py + "trainer-state " + (root_ / "state").string()).c_str()), 0);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static nlohmann::json expect(const char* dir) { return nlohmann::json::parse(slurp(root_ / dir / "expect.json")); }
  static fs::path event_file() { return root_ / "events" / expect("events")["file"].get<std::string>(); }
  static std::map<std::string, std::vector<std::pair<int64_t, double>>> by_tag(const std::vector<ScalarPoint>& pts) {
    std::map<std::string, std::vector<std::pair<int64_t, double>>> out;
    for (const ScalarPoint& p : pts) out[p.tag].push_back({p.step, p.value});
    return out;
  }
  static inline fs::path root_;
};

TEST(Crc32c, StandardCheckValue) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C catalogue's check value
  EXPECT_EQ(crc32c("", 0), 0u);
}

TEST_F(ForeignRuns, EveryScalarOfARealSummaryWriterFileAndNothingElse) {
  const std::string bytes = slurp(event_file());
  const EventRead r = read_event_records(bytes, 0, event_file().string());
  EXPECT_FALSE(r.corrupt.has_value()) << r.corrupt->message();
  EXPECT_FALSE(r.cut);
  EXPECT_EQ(r.intact_end, bytes.size());
  const auto got = by_tag(r.scalars);
  const nlohmann::json want = expect("events")["scalars"];
  ASSERT_EQ(got.size(), want.size());  // histograms and text are not scalars
  for (const auto& [tag, points] : want.items()) {
    ASSERT_TRUE(got.count(tag)) << tag;
    ASSERT_EQ(got.at(tag).size(), points.size()) << tag;
    for (size_t i = 0; i < points.size(); ++i) {
      EXPECT_EQ(got.at(tag)[i].first, points[i][0].get<int64_t>()) << tag;
      EXPECT_EQ(got.at(tag)[i].second, points[i][1].get<double>()) << tag << " step " << i;  // float32, exactly
    }
  }
  for (const ScalarPoint& p : r.scalars) EXPECT_GT(p.wall_time, 1.6e9);
}

TEST_F(ForeignRuns, ACutRecordKeepsEveryIntactRecordAndResumesFromItsOffset) {
  const std::string bytes = slurp(event_file());
  const EventRead whole = read_event_records(bytes, 0, "events");
  const std::string cut = bytes.substr(0, bytes.size() - 7);
  const EventRead r = read_event_records(cut, 0, "events");
  EXPECT_TRUE(r.cut);
  EXPECT_FALSE(r.corrupt.has_value());
  EXPECT_EQ(r.records, whole.records - 1);
  EXPECT_LT(r.intact_end, cut.size());
  EXPECT_EQ(r.cut_error("events").message(),
            "events: offset " + std::to_string(r.intact_end) + ": the last record is cut short (the " +
                std::to_string(r.records) + " intact records before it are kept)");
  // A follower reads on from the stored offset once the writer has finished the record.
  const EventRead rest = read_event_records(std::string_view(bytes).substr(r.intact_end), r.intact_end, "events");
  EXPECT_FALSE(rest.cut);
  EXPECT_EQ(rest.intact_end, bytes.size());
  EXPECT_EQ(r.scalars.size() + rest.scalars.size(), whole.scalars.size());
  std::vector<ScalarPoint> joined = r.scalars;
  joined.insert(joined.end(), rest.scalars.begin(), rest.scalars.end());
  EXPECT_EQ(by_tag(joined), by_tag(whole.scalars));
}

TEST_F(ForeignRuns, ABadCrcStopsAtThatRecordWithItsOffset) {
  std::string bytes = slurp(event_file());
  const EventRead whole = read_event_records(bytes, 0, "events");
  // Find the offset of the 20th record by walking the lengths, then flip a byte of its data.
  uint64_t offset = 0;
  for (int i = 0; i < 20; ++i) {
    uint64_t length = 0;
    std::memcpy(&length, bytes.data() + offset, 8);
    offset += 12 + length + 4;
  }
  bytes[offset + 14] ^= 0x40;
  const EventRead r = read_event_records(bytes, 0, "run/events");
  ASSERT_TRUE(r.corrupt.has_value());
  EXPECT_EQ(r.corrupt->message(), "run/events: offset " + std::to_string(offset) +
                                      ": the record's data fails its CRC-32C (the 20 intact records before it are kept)");
  EXPECT_EQ(r.records, 20u);
  EXPECT_EQ(r.intact_end, offset);
  EXPECT_LT(r.scalars.size(), whole.scalars.size());
  // A corrupt length: its own CRC catches it before any allocation.
  std::string bad_length = slurp(event_file());
  bad_length[3] ^= 0x7F;
  const EventRead l = read_event_records(bad_length, 0, "e");
  ASSERT_TRUE(l.corrupt.has_value());
  EXPECT_EQ(l.corrupt->value, "offset 0");
  EXPECT_TRUE(l.scalars.empty());
}

TEST_F(ForeignRuns, TrainerStateLogHistoryEveryNumberAtItsStep) {
  const fs::path file = root_ / "state" / "trainer_state.json";
  auto points = read_trainer_state(slurp(file), file.string());
  ASSERT_TRUE(points.ok()) << points.error().message();
  size_t want = 0;
  std::map<std::pair<std::string, int64_t>, double> expected;
  const nlohmann::json history = expect("state")["history"];
  for (const auto& entry : history)
    for (const auto& [k, v] : entry.items())
      if (k != "step" && v.is_number()) {
        ++want;
        expected[{k, entry["step"].get<int64_t>()}] = v.get<double>();
      }
  ASSERT_EQ(points->size(), want);
  for (const ScalarPoint& p : *points) EXPECT_EQ((expected[{p.tag, p.step}]), p.value) << p.tag << " " << p.step;
  auto bad = read_trainer_state("{\"log_history\": 3}", "ts.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().field, "ts.json: log_history");
  auto step = read_trainer_state("{\"log_history\": [{\"loss\": 1, \"step\": \"ten\"}]}", "ts.json");
  ASSERT_FALSE(step.ok());
  EXPECT_EQ(step.error().field, "ts.json: log_history[0].step");
  EXPECT_FALSE(read_trainer_state("not json", "ts.json").ok());
  // A value under an empty name belongs to no series (found by the trainer_state fuzzer).
  auto unnamed = read_trainer_state("{\"log_history\": [{\"\": 0.5, \"loss\": 2, \"step\": 20}]}", "ts.json");
  ASSERT_TRUE(unnamed.ok()) << unnamed.error().message();
  ASSERT_EQ(unnamed->size(), 1u);
  EXPECT_EQ((*unnamed)[0].tag, "loss");
  EXPECT_EQ((*unnamed)[0].step, 20);
}

TEST(MetricNames, ToolsNamesMapOntoMeshworksWhereTheyMeanTheSame) {
  EXPECT_EQ(meshwork_metric_name("train/loss").key, "loss");
  EXPECT_EQ(meshwork_metric_name("loss_metrics/global_avg_loss").key, "loss");
  EXPECT_EQ(meshwork_metric_name("learning_rate").key, "lr");
  EXPECT_EQ(meshwork_metric_name("tps").key, "tokens_per_s");
  EXPECT_DOUBLE_EQ(meshwork_metric_name("mfu(%)").scale, 0.01);
  EXPECT_DOUBLE_EQ(meshwork_metric_name("memory/max_active(GiB)").scale, 1073741824.0);
  const MetricName own = meshwork_metric_name("eval_runtime");
  EXPECT_EQ(own.key, "eval_runtime");
  EXPECT_FALSE(own.mapped);
}

}  // namespace
}  // namespace meshwork::interop
