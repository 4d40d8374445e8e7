// The web view's expert load (mixtures of experts) in a real headless Chromium (Debian `chromium`)
// against a served store holding a real meshtrain run (tests/store/data/moe-run-rank{0,1}.jsonl: a
// Qwen3-MoE of 8 experts, sparse layers 0, 2 and 3, 30 steps): the run page draws the heat map of
// /api/runs/ID/expert-load, each cell in the colour of its stored count over the step's mean, the
// layer picker switches the layer, and a dense run's page has no such card.
// The server runs in this process (its event loop turns while the test waits on the browser).
#include <QCoreApplication>
#include <QJsonArray>
#include <QJsonObject>
#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "tests/web/browser_fixture.h"
#include "tests/web/web_fixture.h"
#include "web/api.h"
#include "web/server.h"

namespace meshwork::web {
namespace {

using testing::RunSpec;
using testing::TempDir;

const std::filesystem::path kData = MESHWORK_MOE_RUN_DIR;

// The colour a load ratio is drawn in: the workbench's scale (ui/expert_load_view.cpp), dark
// theme: log2 clamped at +-2, from the even grey to blue below and to the expert colour above.
std::array<int, 3> ratio_rgb(double ratio) {
  const std::array<int, 3> under{0x56, 0xb4, 0xe9}, even{0x3a, 0x3f, 0x47}, over{0xe1, 0x7a, 0xa0};
  const double l = ratio > 0 ? std::clamp(std::log2(ratio), -2.0, 2.0) : -2.0;
  const std::array<int, 3>& to = l < 0 ? under : over;
  const double t = std::abs(l) / 2;
  std::array<int, 3> out{};
  for (size_t i = 0; i < 3; ++i) out[i] = static_cast<int>(std::lround(even[i] + (to[i] - even[i]) * t));
  return out;
}

class ExpertLoadBrowserTest : public testing::BrowserPageTest {
 protected:
  void SetUp() override {
    open_store();
    auto run = writer_->create_run("moe", {}, {});
    ASSERT_TRUE(run.ok());
    moe_ = *run;
    auto in = writer_->ingest_files(moe_, {{kData / "moe-run-rank0.jsonl", "rank0"}, {kData / "moe-run-rank1.jsonl", "rank1"}});
    ASSERT_TRUE(in.ok()) << in.error().message();
    dense_ = testing::finished_run(*writer_, RunSpec{"dense", testing::shape(1, 2, 1, 1), 2, 1e-3, 1.0}, 50);
    ASSERT_TRUE(dense_);
    serve_default();
    start_browser();
  }
  // Every cell of the drawn map against the API's counts of `layer` for the same columns.
  void expect_cells_drawn(int layer) {
    const int columns = js("window.meshwork.expertColumns").toInt();
    ASSERT_EQ(columns, 30);  // the run's 30 steps, one column each
    ASSERT_EQ(js("window.meshwork.expertExperts").toInt(), 8);
    const nlohmann::json d = api("/runs/" + std::to_string(moe_) + "/expert-load",
                                 {{"layer", std::to_string(layer)}, {"columns", "200"}});
    ASSERT_EQ(d["layer"].get<int>(), layer);
    ASSERT_EQ(d["columns"].size(), 30u);
    const QJsonArray pixels = js(QStringLiteral(
        "(() => { const c = document.getElementById('expert-map').getContext('2d'); const out = [];"
        " for (let col = 0; col < 30; ++col) for (let e = 0; e < 8; ++e) {"
        " const p = MW.expertLoad.cellCenter(col, e); const d = c.getImageData(p[0], p[1], 1, 1).data;"
        " out.push([d[0], d[1], d[2]]); } return out; })()")).toArray();
    ASSERT_EQ(pixels.size(), 30 * 8);
    for (int c = 0; c < 30; ++c) {
      const std::vector<double> tokens = d["columns"][static_cast<size_t>(c)]["tokens"].get<std::vector<double>>();
      double sum = 0;
      for (double t : tokens) sum += t;
      for (int e = 0; e < 8; ++e) {
        const auto want = ratio_rgb(tokens[static_cast<size_t>(e)] / (sum / 8));
        const QJsonArray got = pixels[c * 8 + e].toArray();
        for (int k = 0; k < 3; ++k)
          EXPECT_NEAR(got[k].toInt(), want[static_cast<size_t>(k)], 1) << "layer " << layer << " step " << c << " expert " << e;
      }
    }
    // A cell's words: its step, expert and stored tokens.
    const double tokens = d["columns"][5]["tokens"][3].get<double>();
    const QString text = js("MW.expertLoad.cellText(5, 3)").toString();
    EXPECT_TRUE(text.startsWith(QStringLiteral("step 5 · layer %1 · expert 3: %2 tokens").arg(layer).arg(std::lround(tokens))))
        << text.toStdString();
  }

  store::RunId moe_ = 0, dense_ = 0;
};

TEST_F(ExpertLoadBrowserTest, RunPageDrawsEachLayersStoredCountsAndSwitchesLayers) {
  open(QStringLiteral("/run?id=%1").arg(moe_));
  QString error;
  ASSERT_TRUE(browser_->wait_for(QStringLiteral("window.meshwork.expertLayer === 0"), 20000, &error)) << error.toStdString();
  EXPECT_FALSE(js("document.getElementById('expert-card').hidden").toBool());
  EXPECT_EQ(js("[...document.querySelectorAll('#expert-layer option')].map(o => o.textContent).join(',')").toString(),
            QStringLiteral("layer 0,layer 2,layer 3"));
  expect_cells_drawn(0);
  const nlohmann::json d0 = api("/runs/" + std::to_string(moe_) + "/expert-load", {{"layer", "0"}});
  EXPECT_TRUE(js("document.getElementById('expert-imbalance').textContent").toString().contains(
      QStringLiteral("worst %1 at step %2").arg(d0["max_imbalance"].get<double>(), 0, 'f', 2).arg(d0["max_imbalance_step"].get<int>())));
  EXPECT_TRUE(js("document.getElementById('expert-aux').textContent").toString().startsWith(
      QStringLiteral("aux loss %1").arg(d0["columns"].back()["aux_loss"].get<double>(), 0, 'f', 4)));

  js("(() => { const s = document.getElementById('expert-layer'); s.value = '3'; s.dispatchEvent(new Event('change')); return 1; })()");
  ASSERT_TRUE(browser_->wait_for(QStringLiteral("window.meshwork.expertLayer === 3"), 20000, &error)) << error.toStdString();
  expect_cells_drawn(3);
  EXPECT_TRUE(browser_->console_errors().isEmpty()) << browser_->console_errors().join("\n").toStdString();
}

TEST_F(ExpertLoadBrowserTest, DenseRunPageHasNoExpertLoad) {
  open(QStringLiteral("/run?id=%1").arg(dense_));
  QString error;
  ASSERT_TRUE(browser_->wait_for(QStringLiteral("window.meshwork.expertShown === false"), 20000, &error)) << error.toStdString();
  EXPECT_TRUE(js("document.getElementById('expert-card').hidden").toBool());
  const nlohmann::json d = api("/runs/" + std::to_string(dense_) + "/expert-load", {});
  EXPECT_TRUE(d["layers"].empty());
  EXPECT_TRUE(d["columns"].empty());
}

TEST_F(ExpertLoadBrowserTest, ApiRefusesNoColumnsInWords) {
  store::RunStore::Options ro;
  ro.read_only = true;
  auto r = store::RunStore::open(db_, ro);
  ASSERT_TRUE(r.ok());
  Api a(std::move(*r));
  const ApiReply reply = a.get("/runs/" + std::to_string(moe_) + "/expert-load", {{"columns", "0"}});
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.body.dump().find("columns"), std::string::npos) << reply.body.dump();
  // -1 or a dense layer: the first sparse layer.
  const ApiReply first = a.get("/runs/" + std::to_string(moe_) + "/expert-load", {{"layer", "1"}});
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body["layer"].get<int>(), 0);
}

}  // namespace
}  // namespace meshwork::web

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
