// What the web view's run and compare pages say, read in a real headless Chromium (Debian
// `chromium`) against a served store: the rank box says "mean" where the page aggregates ranks
// (never the API's -1), the points text says what the loss line shows of what is stored and what
// all charts hold, and every run, rank and axis colour stands out from the dark page it is drawn
// on (a WCAG contrast of at least 3:1 against the computed background of its card).
// The server runs in this process (its event loop turns while the test waits on the browser).
#include <QCoreApplication>
#include <QJsonArray>
#include <QJsonObject>
#include <QRegularExpression>
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

// WCAG 2.x relative luminance and contrast ratio of CSS "rgb(r, g, b)" / "rgba(r, g, b, a)"
// colours (an alpha below 1 is laid over `under`).
struct Rgb {
  double r = 0, g = 0, b = 0, a = 1;
};
std::optional<Rgb> parse_css_color(const QString& css) {
  static const QRegularExpression re(QStringLiteral(R"(^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:[,\s/]+([\d.]+))?\s*\)$)"));
  const auto m = re.match(css.trimmed());
  if (!m.hasMatch()) return std::nullopt;
  return Rgb{m.captured(1).toDouble() / 255, m.captured(2).toDouble() / 255, m.captured(3).toDouble() / 255,
             m.captured(4).isEmpty() ? 1.0 : m.captured(4).toDouble()};
}
Rgb over(const Rgb& top, const Rgb& under) {
  return {top.a * top.r + (1 - top.a) * under.r, top.a * top.g + (1 - top.a) * under.g, top.a * top.b + (1 - top.a) * under.b, 1};
}
double channel(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }
double luminance(const Rgb& c) { return 0.2126 * channel(c.r) + 0.7152 * channel(c.g) + 0.0722 * channel(c.b); }
double contrast(const Rgb& a, const Rgb& b) {
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

// For every element matching `selector`: its computed colour (`property`) and the computed
// background it is drawn on (the nearest ancestor, itself included, whose background is not
// transparent), as [{name, color, background}]. A series named "(raw)" is left out: it is the
// faint unsmoothed curve drawn on purpose behind its smoothed line, which is judged.
QString colors_on_background(const QString& selector, const QString& property) {
  return QStringLiteral(
             "(() => { const bg = (e) => { for (let p = e; p; p = p.parentElement) {"
             " const c = getComputedStyle(p).backgroundColor;"
             " if (c && c !== 'transparent' && !/rgba\\([^)]*,\\s*0\\)$/.test(c)) return c; }"
             " return getComputedStyle(document.body).backgroundColor; };"
             " return [...document.querySelectorAll('%1')].map((e) => ({"
             " name: (e.parentElement ? e.parentElement.textContent : '').trim(),"
             " color: getComputedStyle(e).%2, background: bg(e.parentElement || e) }))"
             " .filter((x) => !x.name.includes('(raw)')); })()")
      .arg(selector, property);
}

class PageFactsBrowserTest : public testing::BrowserPageTest {
 protected:
  void SetUp() override {
    open_store();
    // 8 ranks (2 nodes of 4): the memory chart draws eight rank colours.
    a_ = testing::finished_run(*writer_, RunSpec{"alpha", testing::shape(1, 4, 1, 2), 4, 1e-3, 1.0}, 300);
    b_ = testing::finished_run(*writer_, RunSpec{"beta", testing::shape(2, 2, 1, 1), 2, 3e-4, 1.1}, 300);
    c_ = testing::finished_run(*writer_, RunSpec{"gamma", testing::shape(1, 4, 1, 1), 2, 1e-3, 0.9}, 300);
    // Longer than the loss chart is wide: its loss line is min/max per pixel column.
    long_ = testing::finished_run(*writer_, RunSpec{"long", testing::shape(1, 2, 1, 1), 2, 1e-3, 1.0}, 6000);
    ASSERT_TRUE(a_ && b_ && c_ && long_);
    start_browser();
    serve_default();
  }
  // Types `text` into the rank box as a user would and waits for the page to redraw.
  void type_rank(const QString& text) {
    js(QStringLiteral("(() => { const r = document.getElementById('rank'); r.value = '%1';"
                      " window.meshwork.ready = false; r.dispatchEvent(new Event('change')); })()")
           .arg(text));
    QString error;
    ASSERT_TRUE(browser_->wait_for(QStringLiteral("window.meshwork.ready"), 20000, &error)) << error.toStdString();
  }
  nlohmann::json frame(store::RunId run, int pixels) {
    return api("/runs/" + std::to_string(run) + "/frame", {{"pixels", std::to_string(pixels)}});
  }
  // Every [{name, color, background}] of colors_on_background() at least 3:1 apart; returns how
  // many were judged.
  int expect_readable(const QString& selector, const QString& property, const char* where) {
    const QJsonArray items = js(colors_on_background(selector, property)).toArray();
    for (const QJsonValue& v : items) {
      const QJsonObject o = v.toObject();
      const auto bg = parse_css_color(o["background"].toString());
      const auto fg = parse_css_color(o["color"].toString());
      EXPECT_TRUE(bg && fg) << where << ": " << o["color"].toString().toStdString() << " on "
                            << o["background"].toString().toStdString();
      if (!bg || !fg) continue;
      const Rgb ground = over(*bg, Rgb{});
      const double ratio = contrast(over(*fg, ground), ground);
      EXPECT_GE(ratio, 3.0) << where << ": " << o["name"].toString().toStdString() << " "
                            << o["color"].toString().toStdString() << " on " << o["background"].toString().toStdString();
    }
    return static_cast<int>(items.size());
  }

  store::RunId a_ = 0, b_ = 0, c_ = 0, long_ = 0;
};

TEST_F(PageFactsBrowserTest, RankSaysMeanWhereThePageAggregatesRanks) {
  open(QStringLiteral("/run?id=%1").arg(a_));
  EXPECT_EQ(js("document.getElementById('rank').value").toString().toStdString(), "mean");
  EXPECT_EQ(js("document.getElementById('rank-hint').textContent").toString().toStdString(), "mean over ranks");
  EXPECT_FALSE(js("document.querySelector('.toolbar').textContent").toString().contains("-1"));
  // One rank, then the mean again (typed as the API's -1, or as the word), then past the last rank.
  type_rank("5");
  EXPECT_EQ(js("document.getElementById('rank').value").toString().toStdString(), "5");
  EXPECT_EQ(js("document.getElementById('rank-hint').textContent").toString().toStdString(), "rank 5");
  type_rank("-1");
  EXPECT_EQ(js("document.getElementById('rank').value").toString().toStdString(), "mean");
  EXPECT_EQ(js("document.getElementById('rank-hint').textContent").toString().toStdString(), "mean over ranks");
  type_rank("5");
  type_rank("mean");
  EXPECT_EQ(js("document.getElementById('rank').value").toString().toStdString(), "mean");
  type_rank("99");
  EXPECT_EQ(js("document.getElementById('rank').value").toString().toStdString(), "7");  // 8 ranks: 0..7
  EXPECT_EQ(js("document.getElementById('rank-hint').textContent").toString().toStdString(), "rank 7");
  EXPECT_TRUE(browser_->console_errors().isEmpty()) << browser_->console_errors().join("\n").toStdString();
}

TEST_F(PageFactsBrowserTest, PointsTextSaysWhatTheLossLineShowsOfWhatIsStored) {
  // A short run: the loss line shows every stored point. A long one: min/max per pixel column.
  for (const store::RunId run : {a_, long_}) {
    open(QStringLiteral("/run?id=%1").arg(run));
    const int pixels = js("window.meshwork.pixels").toInt();
    ASSERT_GE(pixels, kMinPixels);
    const nlohmann::json f = frame(run, pixels);
    const int64_t stored = f["source_points"].get<int64_t>();
    const int64_t shown = static_cast<int64_t>(f["loss"].size());
    const int total = js("window.meshwork.points").toInt();
    const auto fmt = [&](int64_t n) { return js(QStringLiteral("MW.fmtNum(%1)").arg(n)).toString(); };
    const QString text = js("document.getElementById('points').textContent").toString();
    const QString expected = (shown >= stored ? QStringLiteral("loss: all %1 stored points · ").arg(fmt(stored))
                                              : QStringLiteral("loss: %1 of %2 stored points (min/max per pixel) · ")
                                                    .arg(fmt(shown), fmt(stored))) +
                             QStringLiteral("%1 points in all charts").arg(fmt(total));
    EXPECT_EQ(text.toStdString(), expected.toStdString()) << "run " << run;
    if (run == a_) {
      EXPECT_EQ(stored, 300);
    }
    if (run == long_) {
      EXPECT_LT(shown, stored) << "the long run's loss line is not thinned";
    }
    // Never more "points" than "stored" read side by side (the old "6,096 points (of 508 stored)").
    EXPECT_FALSE(text.contains("(of ")) << text.toStdString();
  }
}

TEST_F(PageFactsBrowserTest, RunRankAndAxisColoursStandOutFromTheDarkPage) {
  // Compare: each run's swatch (legend, bars, thumbnails) on its card.
  open(QStringLiteral("/compare?runs=%1,%2,%3").arg(a_).arg(b_).arg(c_));
  EXPECT_GE(expect_readable(QStringLiteral("#legend-compare .swatch"), QStringLiteral("backgroundColor"), "compare legend"), 3);
  EXPECT_GE(expect_readable(QStringLiteral("#comm-legend .swatch"), QStringLiteral("backgroundColor"), "comm bars legend"), 1);
  // The first eight run colours and every axis colour, as the page draws them, on its chart card.
  const QJsonArray palette = js("[...MW.COLORS.slice(0, 8), ...Object.values(MW.AXIS_COLORS)]").toArray();
  ASSERT_GE(palette.size(), 12);
  const QString card = js("getComputedStyle(document.getElementById('chart-compare').closest('.card')).backgroundColor").toString();
  const auto card_rgb = parse_css_color(card);
  ASSERT_TRUE(card_rgb) << card.toStdString();
  for (const QJsonValue& v : palette) {
    // The page's own parser of the colour: a throw-away element's computed colour.
    const QString css = js(QStringLiteral("(() => { const e = document.createElement('span'); e.style.color = '%1';"
                                          " document.body.appendChild(e); const c = getComputedStyle(e).color; e.remove();"
                                          " return c; })()")
                               .arg(v.toString()))
                            .toString();
    const auto rgb = parse_css_color(css);
    ASSERT_TRUE(rgb) << css.toStdString();
    EXPECT_GE(contrast(*rgb, *card_rgb), 3.0) << v.toString().toStdString() << " on " << card.toStdString();
  }
  // The run page: the loss line and each of the eight ranks' memory lines on their cards.
  open(QStringLiteral("/run?id=%1").arg(a_));
  EXPECT_GE(expect_readable(QStringLiteral("#legend-loss .swatch:not(.swatch-dashed)"), QStringLiteral("backgroundColor"),
                            "loss legend"),
            1);
  EXPECT_GE(expect_readable(QStringLiteral("#legend-mem .swatch:not(.swatch-dashed)"), QStringLiteral("backgroundColor"),
                            "memory legend"),
            8);
  EXPECT_GE(expect_readable(QStringLiteral("#legend-comm .swatch:not(.swatch-dashed)"), QStringLiteral("backgroundColor"),
                            "comm legend"),
            1);
  EXPECT_TRUE(browser_->console_errors().isEmpty()) << browser_->console_errors().join("\n").toStdString();
}

}  // namespace
}  // namespace meshwork::web

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
