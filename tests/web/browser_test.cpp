// The web view in a real headless Chromium (Debian `chromium`) against a served store: the runs
// list, a run's charts (drawn, and with the points the API returned), a live run's new points,
// compare with three runs and their config diff, the token and TLS on a non-local listener, and
// run names that try to reorder themselves.
// The server runs in this process (its event loop turns while the test waits on the browser).
#include <QCoreApplication>
#include <QDir>
#include <QJsonArray>
#include <QJsonObject>

#include <ctime>

#include <gtest/gtest.h>

#include "core/store/rank_states.h"
#include "tests/web/browser_fixture.h"
#include "tests/web/chromium.h"
#include "tests/web/web_fixture.h"
#include "web/api.h"
#include "web/server.h"

namespace meshwork::web {
namespace {

using testing::RunSpec;
using testing::TempDir;

// Non-transparent pixels of every canvas inside the element: a chart that drew nothing has 0.
QString painted_pixels(const QString& element_id) {
  return QStringLiteral(
             "(() => { let n = 0; for (const c of document.querySelectorAll('#%1 canvas')) {"
             " if (!c.width || !c.height) continue; const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
             " for (let i = 3; i < d.length; i += 4) if (d[i]) ++n; } return n; })()")
      .arg(element_id);
}

class BrowserTest : public testing::BrowserPageTest {
 protected:
  void SetUp() override {
    open_store();
    a_ = testing::finished_run(*writer_, RunSpec{"alpha", testing::shape(1, 2, 1, 2), 2, 1e-3, 1.0}, 400);
    b_ = testing::finished_run(*writer_, RunSpec{"beta", testing::shape(2, 2, 1, 1), 2, 3e-4, 1.1}, 400);
    c_ = testing::finished_run(*writer_, RunSpec{"gamma", testing::shape(1, 4, 1, 1), 2, 1e-3, 0.9}, 300, "failed",
                               "exited 137\nout of memory");
    ASSERT_TRUE(a_ && b_ && c_);
    start_browser();
  }

  store::RunId a_ = 0, b_ = 0, c_ = 0;
};

TEST_F(BrowserTest, RunsListShowsTheRuns) {
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  open(*s, "/");
  EXPECT_EQ(js("window.meshwork.points").toInt(), 3);
  EXPECT_EQ(js("document.querySelectorAll('#runs-body tr').length").toInt(), 3);
  const QString text = js("document.querySelector('#runs-body').textContent").toString();
  for (const char* name : {"alpha", "beta", "gamma", "1x2x1x2", "failed"})
    EXPECT_TRUE(text.contains(name)) << name << " in " << text.toStdString();
  EXPECT_TRUE(browser_->console_errors().isEmpty()) << browser_->console_errors().join("\n").toStdString();
}

TEST_F(BrowserTest, RunPageDrawsEveryChartWithTheQueriedPoints) {
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  open(*s, QStringLiteral("/run?id=%1").arg(a_));
  for (const char* chart : {"chart-loss", "chart-lr", "chart-grad-norm", "chart-tokens", "chart-mem", "chart-comm"})
    EXPECT_GT(js(painted_pixels(chart)).toInt(), 100) << chart << " is blank";
  // The page reports the points it drew; the API, asked the same, answers as many.
  const int pixels = js("window.meshwork.pixels").toInt();
  ASSERT_GE(pixels, kMinPixels);
  const auto frame = api("/runs/" + std::to_string(a_) + "/frame", {{"pixels", std::to_string(pixels)}});
  EXPECT_EQ(js("window.meshwork.lossPoints").toInt(), static_cast<int>(frame["loss"].size()));
  size_t total = 0;
  for (const char* k : {"loss", "eval_loss", "lr", "grad_norm", "tokens_per_s", "mfu", "step_s", "compute"})
    total += frame[k].size();
  for (const auto& [axis, pts] : frame["comm"].items()) total += pts.size();
  for (const auto& m : frame["mem"]) total += m.size();
  for (const auto& m : frame["mem_peak"]) total += m.size();
  EXPECT_EQ(js("window.meshwork.points").toInt(), static_cast<int>(total));
  // The mesh over its nodes: 2 nodes, 4 ranks.
  EXPECT_EQ(js("document.querySelectorAll('#mesh svg rect, #mesh .rank').length > 0").toBool(), true);
  EXPECT_TRUE(js("document.body.textContent.includes('node1')").toBool());
  EXPECT_TRUE(js("document.getElementById('root-cause').hidden").toBool());

  // A failed run shows its root cause where the eye is.
  open(*s, QStringLiteral("/run?id=%1").arg(c_));
  EXPECT_FALSE(js("document.getElementById('root-cause').hidden").toBool());
  EXPECT_TRUE(js("document.getElementById('root-cause').textContent").toString().contains("rank 3: exited 137"));
}

TEST_F(BrowserTest, ALiveRunsNewPointsAppear) {
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  RunSpec live{"live", testing::shape(1, 2, 1, 1)};
  const store::RunId id = testing::create_run(*writer_, live);
  std::vector<uint64_t> offsets;
  ASSERT_TRUE(testing::add_steps(*writer_, id, live, 0, 9, offsets));
  open(*s, QStringLiteral("/run?id=%1").arg(id));
  ASSERT_EQ(js("window.meshwork.lossPoints").toInt(), 10);
  QString error;
  ASSERT_TRUE(browser_->wait_for(QStringLiteral("document.getElementById('live').className.includes('live-on')"),
                                 20000, &error))
      << error.toStdString() << ": " << js("document.getElementById('live').textContent").toString().toStdString()
      << "; console: " << browser_->console_errors().join("\n").toStdString();
  ASSERT_TRUE(testing::add_steps(*writer_, id, live, 10, 24, offsets));
  // Pushed by the server, re-read by the page: no reload.
  EXPECT_TRUE(browser_->wait_for(QStringLiteral("window.meshwork.lossPoints === 25"), 20000, &error))
      << error.toStdString() << " (lossPoints " << js("window.meshwork.lossPoints").toInt() << ")";
}

TEST_F(BrowserTest, AHungRunShowsItsCulpritInABannerAndOnTheMeshUntilItMovesAgain) {
  const store::RunId hung = testing::hung_run(*writer_);
  ASSERT_NE(hung, 0);
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  open(*s, QStringLiteral("/run?id=%1").arg(hung));
  QString error;
  ASSERT_TRUE(browser_->wait_for(QStringLiteral("window.meshwork.health === 'hang'"), 20000, &error))
      << error.toStdString() << " (health " << js("String(window.meshwork.health)").toString().toStdString() << ")";
  EXPECT_FALSE(js("document.getElementById('health').hidden").toBool());
  const QString banner = js("document.getElementById('health').textContent").toString();
  EXPECT_TRUE(banner.contains("Hung: hung for")) << banner.toStdString();
  EXPECT_TRUE(banner.contains("rank 1 waits in all_gather on dp_shard #12")) << banner.toStdString();
  // The culprit's row: rank, node (host), pid, process state, phase.
  EXPECT_EQ(js("document.querySelectorAll('#health-culprits tbody tr').length").toInt(), 1);
  EXPECT_EQ(js("Array.from(document.querySelectorAll('#health-culprits tbody td')).map(t => t.textContent).join('|')")
                .toString(),
            "3|1 (node1)|4003|stopped|backward layer 1|");
  // The mesh: every rank coloured by what it does, the culprit outlined, its hover text saying why.
  const auto cell = [&](int rank, const char* what) {
    return js(QStringLiteral("(() => { const g = document.querySelector('#mesh-svg g[data-rank=\"%1\"]');"
                             " return g ? %2 : null; })()")
                  .arg(rank)
                  .arg(what));
  };
  EXPECT_EQ(cell(3, "g.dataset.health").toString(), "culprit");
  EXPECT_EQ(cell(1, "g.dataset.health").toString(), "waiting");
  EXPECT_EQ(cell(0, "g.dataset.health").toString(), "computing");
  EXPECT_EQ(cell(2, "g.dataset.health").toString(), "computing");
  EXPECT_TRUE(cell(3, "g.querySelector('rect').classList.contains('culprit')").toBool());
  EXPECT_FALSE(cell(1, "g.querySelector('rect').classList.contains('culprit')").toBool());
  EXPECT_EQ(cell(3, "getComputedStyle(g.querySelector('rect')).strokeWidth").toString(), "2px");
  EXPECT_NE(cell(3, "g.querySelector('rect').getAttribute('fill')").toString(),
            cell(1, "g.querySelector('rect').getAttribute('fill')").toString());
  EXPECT_TRUE(cell(3, "g.querySelector('title').textContent").toString().contains(
      "never entered the collective: stopped, last in backward layer 1"));
  EXPECT_TRUE(cell(1, "g.querySelector('title').textContent").toString().contains("waiting in dp_shard all_gather #12"));

  // The rank moves again: its report says so and every rank completes a step now. Nothing else
  // reloads the page: it asks for the run's health on its own while the run is live.
  {
    const double now = static_cast<double>(std::time(nullptr));
    ASSERT_TRUE(store::put_rank_states(*writer_, hung,
                                       {{1, now, false, "running", std::nullopt}, {3, now, false, "running", std::nullopt}},
                                       now)
                    .ok());
    std::string lines;
    for (int r = 0; r < 4; ++r) {
      StepRecord rec = testing::step_of(RunSpec{"hung", testing::shape(1, 2, 1, 2)}, r, 6);
      rec.time = now;
      lines += to_json_line(rec) + "\n";
    }
    ASSERT_TRUE(writer_->ingest_chunk(hung, "moved.jsonl", 0, lines).ok());
  }
  ASSERT_TRUE(browser_->wait_for(QStringLiteral("window.meshwork.health === 'healthy'"), 20000, &error))
      << error.toStdString() << " (health " << js("String(window.meshwork.health)").toString().toStdString() << ")";
  EXPECT_TRUE(js("document.getElementById('health').hidden").toBool());
  EXPECT_EQ(cell(3, "g.dataset.health").toString(), "");  // the tp-group colours again
  EXPECT_TRUE(browser_->console_errors().isEmpty()) << browser_->console_errors().join("\n").toStdString();
}

TEST_F(BrowserTest, CompareOverlaysThreeRunsWithTheConfigDiff) {
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  open(*s, QStringLiteral("/compare?runs=%1,%2,%3").arg(a_).arg(b_).arg(c_));
  EXPECT_EQ(js("window.meshwork.runs").toInt(), 3);
  EXPECT_GT(js(painted_pixels("chart-compare")).toInt(), 100);
  const int pixels = js("window.meshwork.pixels").toInt();
  const auto cmp = api("/compare", {{"runs", std::to_string(a_) + "," + std::to_string(b_) + "," + std::to_string(c_)},
                                    {"key", "loss"}, {"x", "step"}, {"pixels", std::to_string(pixels)}});
  size_t total = 0;
  for (const auto& series : cmp["series"]) total += series["points"].size();
  EXPECT_EQ(js("window.meshwork.points").toInt(), static_cast<int>(total));
  int differing = 0;
  for (const auto& d : cmp["diff"]) differing += d["differs"].get<bool>() ? 1 : 0;
  EXPECT_GE(differing, 3);  // mesh.dp_replicate, mesh.dp_shard, mesh.tp, training.lr
  EXPECT_EQ(js("window.meshwork.diffRows").toInt(), differing);
  const QString diff = js("document.getElementById('diff').textContent").toString();
  EXPECT_TRUE(diff.contains("training.lr"));
  EXPECT_TRUE(diff.contains("mesh.tp"));
  const QString bars = js("document.getElementById('comm-bars').textContent").toString();
  for (const char* name : {"alpha", "beta", "gamma"}) EXPECT_TRUE(bars.contains(name)) << name;
}

TEST_F(BrowserTest, ANonLocalListenerAnswers401WithoutTheToken) {
  auto s = serve("0.0.0.0:0");  // TLS with a self-signed certificate (Chromium told to accept it)
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->tls());
  QString error;
  ASSERT_TRUE(browser_->navigate(url(*s, "/"), &error)) << error.toStdString();
  EXPECT_TRUE(js("document.body.textContent").toString().contains("this server needs its token"));
  EXPECT_EQ(js("fetch('/api/runs').then(r => r.status)").toInt(), 401);
  // The one-time link signs the browser in; the list then loads.
  auto link = s->new_login_link();
  ASSERT_TRUE(link.ok());
  open(*s, link->mid(link->indexOf("/login")));
  EXPECT_EQ(js("window.meshwork.points").toInt(), 3);
  EXPECT_EQ(js("fetch('/api/runs').then(r => r.status)").toInt(), 200);
  EXPECT_EQ(js("location.protocol").toString(), "https:");
  // The session cookie is HttpOnly: the page's scripts cannot read it (or the token).
  EXPECT_FALSE(js("document.cookie").toString().contains("meshwork"));
  // The live socket: wss on the same listener, with the session cookie, under the CSP.
  EXPECT_TRUE(browser_->wait_for(QStringLiteral("document.getElementById('live').className.includes('live-on')"),
                                 20000, &error))
      << error.toStdString() << ": " << js("document.getElementById('live').textContent").toString().toStdString();
  EXPECT_TRUE(browser_->console_errors().isEmpty()) << browser_->console_errors().join("\n").toStdString();
}

TEST_F(BrowserTest, BidiControlsInRunNamesAreShownNotObeyed) {
  // "safe<RLO>exe.txt" would read "safetxt.exe" if the override were obeyed.
  const std::string name = "safe\u202Eexe.txt";
  const store::RunId id = testing::finished_run(*writer_, RunSpec{name, testing::shape(1, 2, 1, 1)}, 20);
  ASSERT_NE(id, 0);
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  open(*s, "/");
  const QString list = js("document.querySelector('#runs-body').textContent").toString();
  EXPECT_TRUE(list.contains("safe<U+202E>exe.txt")) << list.toStdString();
  EXPECT_FALSE(list.contains(QChar(0x202E)));
  open(*s, QStringLiteral("/run?id=%1").arg(id));
  EXPECT_EQ(js("document.getElementById('run-name').textContent").toString(), "safe<U+202E>exe.txt");
  EXPECT_FALSE(js("document.title").toString().contains(QChar(0x202E)));
  EXPECT_FALSE(js("document.getElementById('config').textContent").toString().contains(QChar(0x202E)));
}

}  // namespace
}  // namespace meshwork::web

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
