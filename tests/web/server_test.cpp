// `meshwork serve`'s server over real sockets: HTTP by QNetworkAccessManager, live updates by a
// real WebSocket client, a real SQLite store written by another connection meanwhile.
#include <sys/stat.h>

#include <QCoreApplication>
#include <QEventLoop>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QTimer>
#include <QWebSocket>

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/web/one_run_store_test.h"
#include "tests/web/web_fixture.h"
#include "web/server.h"

namespace meshwork::web {
namespace {

using testing::RunSpec;
using testing::TempDir;

struct Http {
  int status = 0;
  QByteArray body;
  QList<QNetworkReply::RawHeaderPair> headers;
  QByteArray header(const QByteArray& name) const {
    for (const auto& [k, v] : headers)
      if (k.compare(name, Qt::CaseInsensitive) == 0) return v;
    return {};
  }
  nlohmann::json json() const { return nlohmann::json::parse(body.toStdString(), nullptr, false); }
};

Http request(const QString& url, const QByteArray& method = "GET",
             const std::vector<std::pair<QByteArray, QByteArray>>& headers = {}) {
  QNetworkAccessManager nam;
  QNetworkRequest req{QUrl(url)};
  req.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::ManualRedirectPolicy);
  for (const auto& [k, v] : headers) req.setRawHeader(k, v);
  QNetworkReply* reply = nam.sendCustomRequest(req, method);
  QEventLoop loop;
  QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
  QTimer::singleShot(20000, &loop, &QEventLoop::quit);
  loop.exec();
  Http h;
  h.status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  h.body = reply->readAll();
  h.headers = reply->rawHeaderPairs();
  reply->deleteLater();
  return h;
}

class ServerTest : public testing::OneRunStoreTest {
 protected:
  ServerTest() : OneRunStoreTest(50) {}
  std::unique_ptr<WebServer> serve(const std::string& listen) {
    WebServer::Options o;
    o.db = db_;
    o.listen = *parse_listen(listen);
    o.token_file = dir_ / "config" / "web-token";
    o.poll_ms = 50;
    o.insecure_http = true;  // plain HTTP off loopback here; TLS is hostile_test.cpp's
    auto s = WebServer::start(o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
    return s.ok() ? std::move(*s) : nullptr;
  }
  QString local(const WebServer& s, const QString& path) {
    return QStringLiteral("http://127.0.0.1:%1%2").arg(s.port()).arg(path);
  }
};

TEST(ParseListen, AddressesPortsAndClearErrors) {
  auto a = parse_listen("0.0.0.0:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 8080);
  EXPECT_FALSE(a->address.isLoopback());
  auto b = parse_listen("[::1]:0");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->address.isLoopback());
  auto c = parse_listen("9000");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->address.isLoopback());
  for (const char* bad : {"", "host:", "127.0.0.1:70000", "nowhere.example:80", "1.2.3.4:x", "[::1]8080"}) {
    auto e = parse_listen(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().message(), std::string("--listen") + (*bad ? std::string(": ") + bad : "") +
                                       ": ADDR:PORT (127.0.0.1:8765, 0.0.0.0:8080, [::1]:8765) or PORT")
        << bad;
  }
}

TEST_F(ServerTest, LoopbackServesPagesAndApiWithoutAToken) {
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->token_required());
  const Http runs = request(local(*s, "/api/runs"));
  ASSERT_EQ(runs.status, 200) << runs.body.toStdString();
  EXPECT_EQ(runs.json()["runs"][0]["name"], "alpha");
  EXPECT_EQ(runs.header("Content-Type"), "application/json");
  const Http page = request(local(*s, "/"));
  EXPECT_EQ(page.status, 200);
  EXPECT_TRUE(page.body.contains("/static/app.js"));
  EXPECT_TRUE(page.header("Content-Security-Policy").contains("default-src 'self'"));
  for (const char* name : {"/static/app.js", "/static/dygraph.min.js", "/static/style.css", "/run", "/compare"})
    EXPECT_EQ(request(local(*s, name)).status, 200) << name;
  EXPECT_EQ(request(local(*s, "/static/app.js")).header("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "config" / "web-token"));  // no token on loopback
}

TEST_F(ServerTest, ConcurrentQueriesEachGetTheirOwnAnswer) {
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  // The same answers the API gives on its own (web/api.h), for several kinds of query at once:
  // they run on the server's worker threads and must come back to the request that asked.
  store::RunStore::Options ro;
  ro.read_only = true;
  auto reader = store::RunStore::open(db_, ro);
  ASSERT_TRUE(reader.ok());
  Api api(std::move(*reader));
  const std::string id = std::to_string(run_);
  const std::vector<std::pair<QString, nlohmann::json>> asks = {
      {"/api/runs", api.get("/runs", {}).body},
      {QString::fromStdString("/api/runs/" + id + "/frame?pixels=64"), api.get("/runs/" + id + "/frame", {{"pixels", "64"}}).body},
      {QString::fromStdString("/api/runs/" + id + "/series?key=lr&pixels=32"),
       api.get("/runs/" + id + "/series", {{"key", "lr"}, {"pixels", "32"}}).body},
      {QString::fromStdString("/api/compare?runs=" + id), api.get("/compare", {{"runs", id}}).body},
      {"/api/runs/77", api.get("/runs/77", {}).body}};
  QNetworkAccessManager nam;
  std::vector<std::pair<QNetworkReply*, size_t>> replies;
  for (int round = 0; round < 8; ++round)
    for (size_t i = 0; i < asks.size(); ++i)
      replies.emplace_back(nam.get(QNetworkRequest(QUrl(local(*s, asks[i].first)))), i);
  QEventLoop loop;
  QTimer tick;
  QObject::connect(&tick, &QTimer::timeout, [&] {
    if (std::all_of(replies.begin(), replies.end(), [](const auto& r) { return r.first->isFinished(); })) loop.quit();
  });
  tick.start(10);
  QTimer::singleShot(30000, &loop, &QEventLoop::quit);
  loop.exec();
  for (auto& [reply, i] : replies) {
    ASSERT_TRUE(reply->isFinished());
    auto body = nlohmann::json::parse(reply->readAll().toStdString(), nullptr, false);
    body.erase("load_ms");  // timings differ from call to call
    body.erase("query_ms");
    nlohmann::json want = asks[i].second;
    want.erase("load_ms");
    want.erase("query_ms");
    EXPECT_EQ(body, want) << asks[i].first.toStdString();
    reply->deleteLater();
  }
}

TEST_F(ServerTest, MalformedOrHostileRequestsGet4xxNeverACrash) {
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  const Http post = request(local(*s, "/api/runs"), "POST");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.json()["error"], "method: read-only: GET only");
  EXPECT_EQ(request(local(*s, "/api/runs"), "DELETE").status, 405);
  const Http longurl = request(local(*s, "/api/runs?x=" + QString(9000, 'a')));
  EXPECT_EQ(longurl.status, 414);
  const Http twice = request(local(*s, QStringLiteral("/api/runs/%1/frame?pixels=100&pixels=200").arg(run_)));
  EXPECT_EQ(twice.status, 400);
  EXPECT_EQ(twice.json()["error"], "pixels: each parameter once");
  for (const char* path : {"/static/../../../../etc/passwd", "/static/%2e%2e%2fetc%2fpasswd", "/etc/passwd",
                           "/static/", "/static/vendor/dygraphs/LICENSE"}) {
    const Http h = request(local(*s, path));
    EXPECT_EQ(h.status, 404) << path;
    EXPECT_FALSE(h.body.contains("root:")) << path;
  }
  const Http bad = request(local(*s, "/api/runs/1%00/frame"));
  EXPECT_EQ(bad.status, 400);
  // The server still answers after all of that.
  EXPECT_EQ(request(local(*s, "/api/runs")).status, 200);
}

TEST_F(ServerTest, AnotherAddressNeedsTheTokenAsHeaderOrOneTimeLinkCookie) {
  auto s = serve("0.0.0.0:0");
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->token_required());
  EXPECT_TRUE(s->token_created());
  const auto file = dir_ / "config" / "web-token";
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(s->token().size(), 64u);

  const Http none = request(local(*s, "/api/runs"));
  EXPECT_EQ(none.status, 401);
  EXPECT_TRUE(none.json()["error"].get<std::string>().find("token") == 0) << none.body.toStdString();
  EXPECT_EQ(request(local(*s, "/")).status, 401);
  EXPECT_EQ(request(local(*s, "/api/runs"), "GET", {{"Authorization", "Bearer " + QByteArray(64, 'a')}}).status, 401);
  const QByteArray bearer = "Bearer " + QByteArray::fromStdString(s->token());
  EXPECT_EQ(request(local(*s, "/api/runs"), "GET", {{"Authorization", bearer}}).status, 200);

  // The one-time link sets the cookie once.
  auto link = s->new_login_link();
  ASSERT_TRUE(link.ok());
  const QString path = link->mid(link->indexOf("/login"));
  const Http login = request(local(*s, path));
  EXPECT_EQ(login.status, 303);
  const QByteArray cookie = login.header("Set-Cookie");
  EXPECT_TRUE(cookie.contains("HttpOnly"));
  EXPECT_TRUE(cookie.contains("SameSite=Strict"));
  EXPECT_TRUE(cookie.contains("Max-Age="));
  const QByteArray pair = cookie.left(cookie.indexOf(';'));
  EXPECT_FALSE(pair.contains(QByteArray::fromStdString(s->token())));  // a session, not the token
  EXPECT_EQ(request(local(*s, "/api/runs"), "GET", {{"Cookie", "a=b; " + pair}}).status, 200);
  EXPECT_EQ(request(local(*s, path)).status, 401);  // used once
  EXPECT_EQ(request(local(*s, "/login?code=0123")).status, 401);

  // A second server on the same file reuses the token; a file others can read is refused.
  auto again = serve("0.0.0.0:0");
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->token_created());
  EXPECT_EQ(again->token(), s->token());
  ::chmod(file.c_str(), 0644);
  WebServer::Options o;
  o.db = db_;
  o.listen = *parse_listen("0.0.0.0:0");
  o.token_file = file;
  auto refused = WebServer::start(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(),
            file.string() + ": others may read this token file: chmod 600 it (or delete it for a new token)");
}

TEST_F(ServerTest, HealthIsAnsweredUnderTheSameTokenAsEveryRunEndpoint) {
  const store::RunId hung = testing::hung_run(*writer_);
  ASSERT_NE(hung, 0);
  auto s = serve("0.0.0.0:0");
  ASSERT_TRUE(s);
  const QString path = QStringLiteral("/api/runs/%1/health").arg(hung);
  const Http none = request(local(*s, path));
  EXPECT_EQ(none.status, 401);
  EXPECT_FALSE(none.body.contains("culprits"));
  EXPECT_EQ(request(local(*s, path), "POST", {{"Authorization", "Bearer " + QByteArray::fromStdString(s->token())}})
                .status,
            405);
  const Http ok = request(local(*s, path), "GET", {{"Authorization", "Bearer " + QByteArray::fromStdString(s->token())}});
  ASSERT_EQ(ok.status, 200) << ok.body.toStdString();
  EXPECT_EQ(ok.header("Content-Type"), "application/json");
  const nlohmann::json j = ok.json();
  EXPECT_EQ(j["state"], "hang");
  ASSERT_EQ(j["culprits"].size(), 1u);
  EXPECT_EQ(j["culprits"][0]["rank"], 3);
  EXPECT_EQ(j["culprits"][0]["process"], "stopped");
}

TEST_F(ServerTest, LivePagesHearOfNewPointsOverAWebSocket) {
  auto s = serve("127.0.0.1:0");
  ASSERT_TRUE(s);
  RunSpec live{"live", testing::shape(1, 2, 1, 1)};
  const store::RunId id = testing::create_run(*writer_, live);
  std::vector<uint64_t> offsets;
  ASSERT_TRUE(testing::add_steps(*writer_, id, live, 0, 4, offsets));

  QWebSocket ws;
  std::vector<nlohmann::json> messages;
  QObject::connect(&ws, &QWebSocket::textMessageReceived,
                   [&](const QString& m) { messages.push_back(nlohmann::json::parse(m.toStdString())); });
  ws.open(QUrl(QStringLiteral("ws://127.0.0.1:%1/api/live?run=%2").arg(s->port()).arg(id)));
  const auto wait_until = [&](const std::function<bool()>& done) {
    QEventLoop loop;
    QTimer tick;
    QObject::connect(&tick, &QTimer::timeout, [&] {
      if (done()) loop.quit();
    });
    tick.start(10);
    QTimer::singleShot(20000, &loop, &QEventLoop::quit);
    loop.exec();
    return done();
  };
  ASSERT_TRUE(wait_until([&] { return !messages.empty(); })) << "no first message";
  EXPECT_EQ(messages.back()["type"], "run");
  EXPECT_EQ(messages.back()["steps"], 4);
  EXPECT_EQ(s->live_clients(), 1);
  ASSERT_TRUE(testing::add_steps(*writer_, id, live, 5, 9, offsets));
  ASSERT_TRUE(wait_until([&] { return messages.back()["steps"] == 9; })) << messages.back().dump();
  EXPECT_EQ(messages.back()["status"], "running");
  const size_t seen = messages.size();
  ASSERT_TRUE(testing::end_run(*writer_, id, live, "ok", "", offsets));
  ASSERT_TRUE(wait_until([&] { return messages.size() > seen && messages.back()["status"] == "ok"; }));
  ws.close();
  ASSERT_TRUE(wait_until([&] { return s->live_clients() == 0; }));
  // A server that stops with live pages open closes them (and frees each socket once).
  messages.clear();
  ws.open(QUrl(QStringLiteral("ws://127.0.0.1:%1/api/live").arg(s->port())));
  ASSERT_TRUE(wait_until([&] { return !messages.empty(); }));
  EXPECT_EQ(messages.back()["type"], "runs");
  s.reset();
  EXPECT_TRUE(wait_until([&] { return ws.state() == QAbstractSocket::UnconnectedState; }));
}

TEST_F(ServerTest, LiveSocketsNeedTheTokenAndTheServersOwnOrigin) {
  auto s = serve("0.0.0.0:0");
  ASSERT_TRUE(s);
  const auto closed_with = [&](const QNetworkRequest& req) {
    QWebSocket ws;
    QEventLoop loop;
    bool got_message = false;
    QObject::connect(&ws, &QWebSocket::disconnected, &loop, &QEventLoop::quit);
    QObject::connect(&ws, &QWebSocket::textMessageReceived, [&] {
      got_message = true;
      loop.quit();
    });
    QTimer::singleShot(20000, &loop, &QEventLoop::quit);
    ws.open(req);
    loop.exec();
    return std::pair{ws.closeCode(), got_message};
  };
  const QUrl url(QStringLiteral("ws://127.0.0.1:%1/api/live").arg(s->port()));
  auto [code, message] = closed_with(QNetworkRequest(url));
  EXPECT_EQ(code, QWebSocketProtocol::CloseCodePolicyViolated);
  EXPECT_FALSE(message);
  QNetworkRequest authed(url);
  authed.setRawHeader("Authorization", "Bearer " + QByteArray::fromStdString(s->token()));
  auto [code2, message2] = closed_with(authed);
  EXPECT_TRUE(message2);  // the list's version arrives
  QNetworkRequest cross = authed;
  cross.setRawHeader("Origin", "http://evil.example");
  auto [code3, message3] = closed_with(cross);
  EXPECT_EQ(code3, QWebSocketProtocol::CloseCodePolicyViolated);
  EXPECT_FALSE(message3);
}

}  // namespace
}  // namespace meshwork::web

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
