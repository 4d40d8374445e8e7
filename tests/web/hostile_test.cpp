// `meshwork serve` against hostile clients, over real sockets on loopback: DNS rebinding (a Host
// that is not this server's), WebSockets from other origins, the session cookie (never the
// token, with a lifetime, gone with the instance), TLS off loopback and the half-upgrades that
// used to stall a connection. Every wait is bounded; raw requests go through QTcpSocket or
// QSslSocket so the test controls every header byte.
#include <QCoreApplication>
#include <QDeadlineTimer>
#include <QEventLoop>
#include <QProcess>
#include <QSslSocket>
#include <QTcpSocket>
#include <QTimer>
#include <QWebSocket>

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "tests/web/one_run_store_test.h"
#include "tests/web/web_fixture.h"
#include "web/server.h"
#include "web/tls.h"

namespace meshwork::web {
namespace {

using testing::RunSpec;
using testing::TempDir;

// Spins the event loop (the server runs in this thread) until done() or the deadline.
bool spin_until(const std::function<bool()>& done, int timeout_ms) {
  QDeadlineTimer deadline(timeout_ms);
  while (!done() && !deadline.hasExpired())
    QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
  return done();
}

struct Answer {
  int status = 0;
  QByteArray headers;  // the header block, CRLF-separated
  QByteArray body;
  QByteArray header(const QByteArray& name) const {
    for (const QByteArray& line : headers.split('\n')) {
      const qsizetype colon = line.indexOf(':');
      if (colon > 0 && line.left(colon).trimmed().compare(name, Qt::CaseInsensitive) == 0)
        return line.mid(colon + 1).trimmed();
    }
    return {};
  }
};

// The complete HTTP answers in `bytes` (a status line, headers, a Content-Length body); a 101
// switch ends the list (what follows is WebSocket frames).
std::vector<Answer> parse_answers(const QByteArray& bytes) {
  std::vector<Answer> out;
  qsizetype at = 0;
  while (at < bytes.size()) {
    const qsizetype end = bytes.indexOf("\r\n\r\n", at);
    if (end < 0 || !bytes.mid(at, 9).startsWith("HTTP/1.1 ")) break;
    Answer a;
    a.status = bytes.mid(at + 9, 3).toInt();
    a.headers = bytes.mid(at, end - at);
    const qsizetype length = a.header("Content-Length").toLongLong();
    if (end + 4 + length > bytes.size()) break;
    a.body = bytes.mid(end + 4, length);
    out.push_back(a);
    at = end + 4 + length;
    if (a.status == 101) break;
  }
  return out;
}

// Sends `bytes` on a fresh connection (TLS without checking the certificate when `tls`) and
// collects what comes back until `answers` answers are complete, the server closes, or
// timeout_ms. `peer` receives the server's certificate on TLS.
QByteArray exchange(quint16 port, const QByteArray& bytes, size_t answers, int timeout_ms = 5000, bool tls = false,
                    QSslCertificate* peer = nullptr) {
  std::unique_ptr<QTcpSocket> socket;
  if (tls) {
    auto ssl = std::make_unique<QSslSocket>();
    ssl->setPeerVerifyMode(QSslSocket::VerifyNone);
    ssl->connectToHostEncrypted(QStringLiteral("127.0.0.1"), port);
    socket = std::move(ssl);
  } else {
    socket = std::make_unique<QTcpSocket>();
    socket->connectToHost(QStringLiteral("127.0.0.1"), port);
  }
  QByteArray got;
  bool closed = false;
  QObject::connect(socket.get(), &QTcpSocket::readyRead, [&] { got += socket->readAll(); });
  QObject::connect(socket.get(), &QTcpSocket::disconnected, [&] { closed = true; });
  QObject::connect(socket.get(), &QTcpSocket::errorOccurred, [&] { closed = true; });
  socket->write(bytes);  // a QSslSocket sends it once the handshake is done
  spin_until([&] { return closed || parse_answers(got).size() >= answers; }, timeout_ms);
  if (peer) *peer = static_cast<QSslSocket*>(socket.get())->peerCertificate();
  return got;
}

QByteArray get(const QByteArray& path, const QByteArray& host, const QByteArray& extra = {}) {
  return "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + extra + "\r\n";
}

QByteArray upgrade(const QByteArray& path, const QByteArray& host, const QByteArray& extra = {}) {
  return get(path, host,
             "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n" + extra);
}

Answer first_answer(const QByteArray& bytes) {
  const auto all = parse_answers(bytes);
  return all.empty() ? Answer{} : all.front();
}

class HostileTest : public testing::OneRunStoreTest {
 protected:
  HostileTest() : OneRunStoreTest(20) {}
  WebServer::Options options(const std::string& listen) {
    WebServer::Options o;
    o.db = db_;
    o.listen = *parse_listen(listen);
    o.token_file = dir_ / "config" / "web-token";
    o.poll_ms = 50;
    return o;
  }
  std::unique_ptr<WebServer> serve(const WebServer::Options& o) {
    auto s = WebServer::start(o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
    return s.ok() ? std::move(*s) : nullptr;
  }
  // Off loopback over plain HTTP, as --insecure-http asks.
  std::unique_ptr<WebServer> serve_plain_off_loopback(const std::string& listen = "0.0.0.0:0") {
    auto o = options(listen);
    o.insecure_http = true;
    return serve(o);
  }
  static QByteArray here(const WebServer& s) { return "127.0.0.1:" + QByteArray::number(s.port()); }
  // The cookie pair ("name=value") a fresh one-time link sets, and the whole Set-Cookie header.
  std::pair<QByteArray, QByteArray> log_in(WebServer& s, bool tls = false) {
    auto link = s.new_login_link();
    EXPECT_TRUE(link.ok());
    const QByteArray path = link->mid(link->indexOf("/login")).toUtf8();
    const Answer a = first_answer(exchange(s.port(), get(path, here(s)), 1, 5000, tls));
    EXPECT_EQ(a.status, 303) << a.headers.toStdString();
    const QByteArray cookie = a.header("Set-Cookie");
    return {cookie.left(cookie.indexOf(';')), cookie};
  }
  int status_with_cookie(const WebServer& s, const QByteArray& cookie, bool tls = false) {
    return first_answer(exchange(s.port(), get("/api/runs", here(s), "Cookie: " + cookie + "\r\n"), 1, 5000, tls))
        .status;
  }
};

// A WebSocket opened with `req`: its close code and whether a live message arrived first.
std::pair<QWebSocketProtocol::CloseCode, bool> open_live(const QNetworkRequest& req,
                                                         const QSslConfiguration* ssl = nullptr) {
  QWebSocket ws;
  if (ssl) ws.setSslConfiguration(*ssl);
  bool message = false, closed = false;
  QObject::connect(&ws, &QWebSocket::disconnected, [&] { closed = true; });
  QObject::connect(&ws, &QWebSocket::textMessageReceived, [&] { message = true; });
  ws.open(req);
  spin_until([&] { return closed || message; }, 10000);
  return {ws.closeCode(), message};
}

TEST_F(HostileTest, RebindingHostIsRefusedForPagesApiAndWebSockets) {
  auto o = options("127.0.0.1:0");
  o.public_names = {"runs.example.org"};
  auto s = serve(o);
  ASSERT_TRUE(s);
  const QByteArray port = QByteArray::number(s->port());
  const QByteArray api = "/api/runs/" + QByteArray::number(run_);
  // An attacker's name that now resolves to 127.0.0.1: refused before anything is read.
  for (const QByteArray& host : {"rebind.attacker.example:" + port, QByteArray("rebind.attacker.example"),
                                 "localhost.attacker.example:" + port, "127.0.0.1.nip.io:" + port, QByteArray(""),
                                 "evil.example:" + port + " x"}) {
    for (const QByteArray& path : {api, QByteArray("/api/runs"), QByteArray("/"), QByteArray("/static/app.js")}) {
      const Answer a = first_answer(exchange(s->port(), get(path, host), 1));
      EXPECT_EQ(a.status, 421) << host.toStdString() << " " << path.toStdString();
      EXPECT_FALSE(a.body.contains("alpha")) << host.toStdString();
      EXPECT_TRUE(a.body.contains("--public-name")) << a.body.toStdString();
    }
    // The live socket too: answered 421, never switched.
    const QByteArray ws = exchange(s->port(), upgrade("/api/live", host), 1);
    EXPECT_EQ(first_answer(ws).status, 421) << host.toStdString() << ": " << ws.left(200).toStdString();
    EXPECT_FALSE(ws.contains("101 Switching")) << host.toStdString();
  }
  // No Host at all (HTTP/1.0 without one): not a name of this server either.
  EXPECT_EQ(first_answer(exchange(s->port(), "GET /api/runs HTTP/1.0\r\n\r\n", 1)).status, 421);
  // This server's names: loopback, any address literal, --public-name; any port (ssh -L).
  for (const QByteArray& host : {"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port, "[::1]:" + port,
                                 QByteArray("localhost:9000"), "runs.example.org:" + port, QByteArray("10.1.2.3")}) {
    const Answer a = first_answer(exchange(s->port(), get(api, host), 1));
    EXPECT_EQ(a.status, 200) << host.toStdString() << ": " << a.body.left(300).toStdString();
  }
  EXPECT_EQ(first_answer(exchange(s->port(), upgrade("/api/live", "localhost:" + port), 1)).status, 101);
}

TEST_F(HostileTest, WebSocketOriginMustBeAPageOfThisServer) {
  auto s = serve_plain_off_loopback();
  ASSERT_TRUE(s);
  const QByteArray bearer = "Bearer " + QByteArray::fromStdString(s->token());
  const QUrl url(QStringLiteral("ws://127.0.0.1:%1/api/live").arg(s->port()));
  const auto with_origin = [&](const QByteArray& origin) {
    QNetworkRequest req(url);
    req.setRawHeader("Authorization", bearer);
    if (!origin.isEmpty()) req.setRawHeader("Origin", origin);
    return open_live(req);
  };
  const QByteArray port = QByteArray::number(s->port());
  const QByteArray other_port = QByteArray::number(s->port() == 65535 ? 1 : s->port() + 1);
  for (const QByteArray& origin :
       {QByteArray("http://evil.example"), "http://evil.example:" + port, "http://127.0.0.1:" + other_port,
        "http://localhost:" + port /* another name than the Host the socket used */, "https://127.0.0.1:" + port,
        QByteArray("null"), "http://127.0.0.1:" + port + "/x"}) {
    const auto [code, message] = with_origin(origin);
    EXPECT_EQ(code, QWebSocketProtocol::CloseCodePolicyViolated) << origin.toStdString();
    EXPECT_FALSE(message) << origin.toStdString();
  }
  EXPECT_TRUE(with_origin("http://127.0.0.1:" + port).second);
  EXPECT_TRUE(with_origin({}).second);  // not a browser: the token alone decides
  // A rebinding page: Origin and Host agree, as the old check wanted, but the name is not ours.
  const QByteArray rebind = "rebind.attacker.example:" + port;
  const QByteArray raw =
      exchange(s->port(), upgrade("/api/live", rebind, "Origin: http://" + rebind + "\r\nAuthorization: " + bearer + "\r\n"), 1);
  EXPECT_EQ(first_answer(raw).status, 421) << raw.left(200).toStdString();
}

TEST_F(HostileTest, TheLoginLinkOpensASessionNeverTheToken) {
  auto s = serve_plain_off_loopback();
  ASSERT_TRUE(s);
  const auto [pair, cookie] = log_in(*s);
  const QByteArray name = "meshwork_session_" + QByteArray::number(s->port());
  ASSERT_TRUE(pair.startsWith(name + "=")) << cookie.toStdString();
  const QByteArray id = pair.mid(name.size() + 1);
  EXPECT_EQ(id.size(), 64);  // 32 bytes of the kernel's CSPRNG, hex
  EXPECT_NE(id.toStdString(), s->token());
  EXPECT_FALSE(cookie.contains(QByteArray::fromStdString(s->token())));
  for (const char* attribute : {"; Max-Age=43200", "; HttpOnly", "; SameSite=Strict", "; Path=/"})
    EXPECT_TRUE(cookie.contains(attribute)) << attribute << " missing from " << cookie.toStdString();
  EXPECT_FALSE(cookie.contains("Secure"));  // plain HTTP: a Secure cookie would never come back
  EXPECT_EQ(s->session_cookie_name(), name.toStdString());

  EXPECT_EQ(status_with_cookie(*s, "a=b; " + pair), 200);
  // Neither the token in a cookie (the old way) nor this login's cookie under another port's name.
  EXPECT_EQ(status_with_cookie(*s, name + "=" + QByteArray::fromStdString(s->token())), 401);
  EXPECT_EQ(status_with_cookie(*s, "meshwork_token=" + QByteArray::fromStdString(s->token())), 401);
  EXPECT_EQ(status_with_cookie(*s, "meshwork_session_1=" + id), 401);
  // The id with its last hex digit changed (to 0, or to 1 when it is 0: a 1 in 16 chance that
  // "+ 0" would have been the id itself).
  EXPECT_EQ(status_with_cookie(*s, name + "=" + id.left(63) + (id.endsWith('0') ? "1" : "0")), 401);
  // Scripts keep the token as a Bearer header.
  const QByteArray bearer = "Authorization: Bearer " + QByteArray::fromStdString(s->token()) + "\r\n";
  EXPECT_EQ(first_answer(exchange(s->port(), get("/api/runs", here(*s), bearer), 1)).status, 200);
  // Two links, two sessions; each works.
  const auto [second, unused] = log_in(*s);
  EXPECT_NE(second, pair);
  EXPECT_EQ(status_with_cookie(*s, second), 200);
  EXPECT_EQ(status_with_cookie(*s, pair), 200);
}

TEST_F(HostileTest, ARestartedServerRefusesTheLastOnesSessions) {
  auto first = serve_plain_off_loopback();
  ASSERT_TRUE(first);
  const quint16 port = first->port();
  const std::string token = first->token();
  const auto [pair, cookie] = log_in(*first);
  ASSERT_EQ(status_with_cookie(*first, pair), 200);
  first.reset();
  // The same port, so the same cookie name: only the instance differs.
  auto second = serve_plain_off_loopback("0.0.0.0:" + std::to_string(port));
  ASSERT_TRUE(second);
  ASSERT_EQ(second->port(), port);
  EXPECT_EQ(second->token(), token);  // the long-lived secret survives
  EXPECT_EQ(status_with_cookie(*second, pair), 401);
  const QByteArray bearer = "Authorization: Bearer " + QByteArray::fromStdString(token) + "\r\n";
  EXPECT_EQ(first_answer(exchange(port, get("/api/runs", here(*second), bearer), 1)).status, 200);
}

TEST_F(HostileTest, OffLoopbackTheServerSpeaksTlsWithItsPrintedFingerprint) {
  auto s = serve(options("0.0.0.0:0"));  // no TLS flag, no --insecure-http
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->tls());
  EXPECT_TRUE(s->tls_self_signed());
  EXPECT_TRUE(s->base_url().startsWith("https://")) << s->base_url().toStdString();
  ASSERT_EQ(s->tls_fingerprint().size(), 32 * 3 - 1) << s->tls_fingerprint().toStdString();
  const QByteArray bearer = "Authorization: Bearer " + QByteArray::fromStdString(s->token()) + "\r\n";
  QSslCertificate peer;
  const Answer a = first_answer(exchange(s->port(), get("/api/runs", here(*s), bearer), 1, 10000, true, &peer));
  EXPECT_EQ(a.status, 200);
  EXPECT_TRUE(a.body.contains("alpha"));
  ASSERT_FALSE(peer.isNull());
  EXPECT_EQ(sha256_fingerprint(peer), s->tls_fingerprint());
  EXPECT_TRUE(peer.subjectAlternativeNames().values(QSsl::IpAddressEntry).contains("127.0.0.1"));
  // Plain HTTP on that port gets no HTTP answer.
  const QByteArray plain = exchange(s->port(), get("/api/runs", here(*s), bearer), 1, 5000);
  EXPECT_FALSE(plain.contains("HTTP/1.1 200")) << plain.left(200).toStdString();
  EXPECT_FALSE(plain.contains("alpha"));
  // The session cookie is Secure over TLS.
  const auto [pair, cookie] = log_in(*s, true);
  EXPECT_TRUE(cookie.contains("; Secure")) << cookie.toStdString();
  EXPECT_EQ(status_with_cookie(*s, pair, true), 200);
  // Live pages over the same listener (wss), Origin https.
  QSslConfiguration trust = QSslConfiguration::defaultConfiguration();
  trust.setPeerVerifyMode(QSslSocket::VerifyNone);
  QNetworkRequest req(QUrl(QStringLiteral("wss://127.0.0.1:%1/api/live").arg(s->port())));
  req.setRawHeader("Cookie", pair);
  req.setRawHeader("Origin", "https://" + here(*s));
  EXPECT_TRUE(open_live(req, &trust).second);
}

TEST_F(HostileTest, TlsFromFilesAndPlainHttpOnlyWhenAskedByName) {
  // A certificate made by the openssl tool: the server serves it and reports its fingerprint as
  // `openssl x509 -fingerprint -sha256` does.
  const auto cert = dir_ / "cert.pem", key = dir_ / "key.pem";
  QProcess req;
  req.start("openssl", {"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=meshwork-test",
                        "-keyout", QString::fromStdString(key.string()), "-out", QString::fromStdString(cert.string())});
  ASSERT_TRUE(req.waitForFinished(60000));
  ASSERT_EQ(req.exitCode(), 0) << req.readAllStandardError().toStdString();
  QProcess fp;
  fp.start("openssl", {"x509", "-noout", "-fingerprint", "-sha256", "-in", QString::fromStdString(cert.string())});
  ASSERT_TRUE(fp.waitForFinished(20000));
  const QString printed = QString::fromUtf8(fp.readAllStandardOutput()).trimmed().section('=', 1);
  auto o = options("0.0.0.0:0");
  o.tls_cert = cert;
  o.tls_key = key;
  auto s = serve(o);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->tls());
  EXPECT_FALSE(s->tls_self_signed());
  EXPECT_EQ(s->tls_fingerprint(), printed);
  QSslCertificate peer;
  const QByteArray bearer = "Authorization: Bearer " + QByteArray::fromStdString(s->token()) + "\r\n";
  EXPECT_EQ(first_answer(exchange(s->port(), get("/api/runs", here(*s), bearer), 1, 10000, true, &peer)).status, 200);
  EXPECT_EQ(sha256_fingerprint(peer), printed);
  s.reset();

  // Plain HTTP off loopback only by name; the flags' mistakes are named.
  auto plain = serve_plain_off_loopback();
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->tls());
  EXPECT_TRUE(plain->base_url().startsWith("http://"));
  const auto refused = [&](WebServer::Options bad) {
    auto r = WebServer::start(bad);
    return r.ok() ? std::string("started") : r.error().message();
  };
  auto both = options("0.0.0.0:0");
  both.insecure_http = true;
  both.tls_cert = cert;
  both.tls_key = key;
  EXPECT_EQ(refused(both), "--insecure-http: plain HTTP or --tls-cert/--tls-key, not both");
  auto half = options("0.0.0.0:0");
  half.tls_cert = cert;
  EXPECT_EQ(refused(half), "--tls-key: missing: --tls-cert FILE and --tls-key FILE go together");
  auto wrong = options("0.0.0.0:0");
  wrong.tls_cert = key;
  wrong.tls_key = key;
  EXPECT_EQ(refused(wrong), "--tls-cert: " + key.string() + ": holds no PEM certificate");
  std::ofstream(dir_ / "empty.pem") << "";
  wrong.tls_cert = cert;
  wrong.tls_key = dir_ / "empty.pem";
  EXPECT_EQ(refused(wrong), "--tls-key: " + (dir_ / "empty.pem").string() + ": holds no unencrypted PEM private key (RSA or EC)");
}

TEST_F(HostileTest, UpgradeWithoutConnectionUpgradeIsAnsweredAtOnce) {
  auto s = serve(options("127.0.0.1:0"));
  ASSERT_TRUE(s);
  // The half upgrade, then an ordinary request on the same connection: both answered, in order,
  // within the second this waits.
  const QByteArray half = get("/api/live", here(*s), "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n");
  const auto answers = parse_answers(exchange(s->port(), half + get("/api/runs", here(*s)), 2, 1000));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].status, 400);
  EXPECT_TRUE(answers[0].body.contains("Connection: Upgrade")) << answers[0].body.toStdString();
  EXPECT_EQ(answers[1].status, 200);
  EXPECT_TRUE(answers[1].body.contains("alpha"));
}

TEST_F(HostileTest, PagesMayLoadOnlyFromThisServer) {
  auto s = serve(options("127.0.0.1:0"));
  ASSERT_TRUE(s);
  const Answer a = first_answer(exchange(s->port(), get("/", here(*s)), 1));
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.header("Content-Security-Policy"),
            "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; base-uri 'none'; "
            "form-action 'none'; frame-ancestors 'none'");
}

}  // namespace
}  // namespace meshwork::web

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
