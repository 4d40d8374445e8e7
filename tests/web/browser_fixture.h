// The shared part of the web view's browser tests: a store file in a temporary folder, a real
// headless Chromium (Debian `chromium`), `meshwork serve` started in this process (its event loop
// turns while the test waits on the browser), and the page and API helpers every such test uses.
// A test's fixture derives from BrowserPageTest, calls open_store() first in its SetUp, adds its
// runs through writer_, then start_browser() and, for one server, serve_default().
#pragma once

#include <QJsonValue>
#include <QString>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/store/run_store.h"
#include "tests/web/chromium.h"
#include "tests/web/web_fixture.h"
#include "web/api.h"
#include "web/server.h"

namespace meshwork::web::testing {

class BrowserPageTest : public ::testing::Test {
 protected:
  void open_store() {
    db_ = dir_ / "runs.db";
    auto w = store::RunStore::open(db_);
    ASSERT_TRUE(w.ok()) << w.error().message();
    writer_ = std::move(*w);
  }
  void start_browser() {
    QString error;
    browser_ = meshwork::testing::HeadlessChromium::start(&error);
    ASSERT_TRUE(browser_) << error.toStdString();
  }
  // A server on the test's store; null (and the test failed) when it cannot start.
  std::unique_ptr<WebServer> serve(const std::string& listen) {
    WebServer::Options o;
    o.db = db_;
    o.listen = *parse_listen(listen);
    o.token_file = dir_ / "web-token";
    auto s = WebServer::start(o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
    return s.ok() ? std::move(*s) : nullptr;
  }
  // The one server most tests need, on a free loopback port: server_.
  void serve_default() {
    server_ = serve("127.0.0.1:0");
    ASSERT_TRUE(server_);
  }
  QString url(const WebServer& s, const QString& path) {
    return QStringLiteral("%1://127.0.0.1:%2%3").arg(s.tls() ? "https" : "http").arg(s.port()).arg(path);
  }
  // Opens the page and waits until it says it drew everything (window.meshwork.ready).
  void open(const WebServer& s, const QString& path) {
    QString error;
    ASSERT_TRUE(browser_->navigate(url(s, path), &error)) << error.toStdString();
    ASSERT_TRUE(browser_->wait_for(QStringLiteral("window.meshwork && (window.meshwork.ready || window.meshwork.error)"),
                                   30000, &error))
        << error.toStdString();
    EXPECT_TRUE(js("window.meshwork.error").isNull()) << js("window.meshwork.error").toString().toStdString();
  }
  void open(const QString& path) { open(*server_, path); }
  QJsonValue js(const QString& expression) {
    QString error;
    auto v = browser_->evaluate(expression, &error);
    EXPECT_TRUE(v.has_value()) << error.toStdString() << " in " << expression.toStdString();
    return v.value_or(QJsonValue());
  }
  // What the API answers for `path` with `params` on the same store (a read-only handle of its own).
  nlohmann::json api(const std::string& path, const Params& params) {
    store::RunStore::Options ro;
    ro.read_only = true;
    auto r = store::RunStore::open(db_, ro);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return {};
    Api a(std::move(*r));
    const ApiReply reply = a.get(path, params);
    EXPECT_EQ(reply.status, 200) << reply.body.dump();
    return reply.body;
  }

  TempDir dir_;
  std::filesystem::path db_;
  std::unique_ptr<store::RunStore> writer_;
  std::unique_ptr<meshwork::testing::HeadlessChromium> browser_;
  std::unique_ptr<WebServer> server_;
};

}  // namespace meshwork::web::testing
