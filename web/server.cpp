#include "web/server.h"

#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QHttpServerRequest>
#include <QHostInfo>
#include <QHttpServerResponder>
#include <QNetworkRequest>
#include <QPointer>
#include <QThread>
#include <QTcpSocket>
#include <QUrlQuery>
#include <QWebSocket>

#include <algorithm>
#include <charconv>

#include "core/store/run_store.h"
#include "core/handover.h"
#include "web/tls.h"

namespace meshwork::web {

namespace {

using Status = QHttpServerResponder::StatusCode;

QByteArray content_type(const QString& name) {
  if (name.endsWith(".html")) return "text/html; charset=utf-8";
  if (name.endsWith(".js")) return "text/javascript; charset=utf-8";
  if (name.endsWith(".css")) return "text/css; charset=utf-8";
  if (name.endsWith(".json")) return "application/json";
  if (name.endsWith(".png")) return "image/png";
  return "text/plain; charset=utf-8";
}

// Every answer: what it is, how long it may be kept, and what the page may load (only this
// server's own files and its WebSocket: no inline script or style, no other origin, no framing).
// connect-src 'self' covers the page's own ws:/wss: origin (CSP Level 3).
void reply(QHttpServerResponder& r, Status status, const QByteArray& type, const QByteArray& body,
           const std::vector<std::pair<QByteArray, QByteArray>>& extra = {}) {
  r.writeStatusLine(status);
  r.writeHeader("Content-Type", type);
  r.writeHeader("Content-Length", QByteArray::number(body.size()));
  r.writeHeader("Cache-Control", "no-store");
  r.writeHeader("X-Content-Type-Options", "nosniff");
  r.writeHeader("X-Frame-Options", "DENY");
  r.writeHeader("Referrer-Policy", "no-referrer");
  r.writeHeader("Content-Security-Policy",
                "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; "
                "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  for (const auto& [k, v] : extra) r.writeHeader(k, v);
  r.writeBody(body);
}

void reply_json(QHttpServerResponder& r, int status, const nlohmann::json& body,
                const std::vector<std::pair<QByteArray, QByteArray>>& extra = {}) {
  reply(r, static_cast<Status>(status), "application/json",
        QByteArray::fromStdString(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)), extra);
}

void reply_error(QHttpServerResponder& r, int status, const Error& e,
                 const std::vector<std::pair<QByteArray, QByteArray>>& extra = {}) {
  reply_json(r, status, {{"error", e.message()}}, extra);
}

QByteArray header(const QHttpServerRequest& request, const QByteArray& name) {
  for (const auto& [k, v] : request.headers())
    if (k.compare(name, Qt::CaseInsensitive) == 0) return v;
  return {};
}

// Off loopback TLS is the rule: the user's certificate or one made now; plain HTTP only when
// asked for by name. On loopback plain HTTP, or TLS when a certificate is given.
Result<std::optional<TlsIdentity>> choose_tls(const WebServer::Options& o, const HostAllowList& hosts) {
  const bool loopback = o.listen.address.isLoopback();
  if (o.tls_cert.empty() != o.tls_key.empty())
    return Error{o.tls_cert.empty() ? "--tls-cert" : "--tls-key", "missing",
                 "--tls-cert FILE and --tls-key FILE go together"};
  if (o.insecure_http && !o.tls_cert.empty())
    return Error{"--insecure-http", "", "plain HTTP or --tls-cert/--tls-key, not both"};
  if (!o.tls_cert.empty()) {
    auto t = tls_from_files(o.tls_cert, o.tls_key);
    if (!t) return t.error();
    return std::optional<TlsIdentity>(std::move(*t));
  }
  if (loopback || o.insecure_http) return std::optional<TlsIdentity>();
  const std::vector<std::string>& names = hosts.names();  // the public names among them
  std::vector<QHostAddress> addresses = {QHostAddress::LocalHost, QHostAddress::LocalHostIPv6};
  if (o.listen.address != QHostAddress::Any && o.listen.address != QHostAddress::AnyIPv4 &&
      o.listen.address != QHostAddress::AnyIPv6)
    addresses.push_back(o.listen.address);
  auto t = tls_self_signed(names, addresses);
  if (!t) return t.error();
  return std::optional<TlsIdentity>(std::move(*t));
}

}  // namespace

Result<Listen> parse_listen(std::string_view text) {
  const Error bad{"--listen", std::string(text), "ADDR:PORT (127.0.0.1:8765, 0.0.0.0:8080, [::1]:8765) or PORT"};
  Listen l;
  std::string_view host, port = text;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find("]:");
    if (close == std::string_view::npos) return bad;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  int p = -1;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 0 || p > 65535) return bad;
  l.port = static_cast<quint16>(p);
  if (!host.empty()) {
    QHostAddress a;
    if (host == "localhost") a = QHostAddress::LocalHost;
    else if (!a.setAddress(QString::fromUtf8(host.data(), static_cast<qsizetype>(host.size())))) return bad;
    l.address = a;
  }
  return l;
}

WebServer::WebServer(std::unique_ptr<Api> api, Access access, QObject* parent)
    : QAbstractHttpServer(parent), api_(std::move(api)), access_(std::move(access)) {
  // The pages are compiled in: a request names one of these, never a path on disk.
  QDirIterator it(QStringLiteral(":/web"), QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    static_files_.insert(QFileInfo(path).fileName(), path);
  }
  connect(this, &QAbstractHttpServer::newWebSocketConnection, this, &WebServer::accept_websockets);
  connect(&poll_timer_, &QTimer::timeout, this, &WebServer::poll);
}

WebServer::~WebServer() {
  pool_.waitForDone();  // no query still running on an Api of ours
  // A socket closing as it is deleted signals `disconnected`, whose handler edits live_: cut
  // those connections first, then close and free every live page's socket once.
  poll_timer_.stop();
  for (auto& [key, watch] : live_) QObject::disconnect(key, nullptr, this, nullptr);
  live_.clear();
}

Result<std::unique_ptr<WebServer>> WebServer::start(const Options& o, QObject* parent) {
  // The TLS flags first: a mistake there is refused before a token file is made.
  HostAllowList hosts(o.public_names);
  auto tls = choose_tls(o, hosts);
  if (!tls) return tls.error();
  store::RunStore::Options so;
  so.read_only = true;
  if (!std::filesystem::exists(o.db))
    return Error{"--db", o.db.string(), "no run store there (runs are stored by launches and `meshwork runs import`)"}
        .as(ErrorKind::io);
  auto store = store::RunStore::open(o.db, so);
  if (!store) return store.error();
  Access access = Access::open();
  bool created = false;
  if (!o.listen.address.isLoopback()) {
    auto a = Access::with_token(o.token_file.empty() ? default_token_path() : o.token_file, &created);
    if (!a) return a.error();
    access = std::move(*a);
  }
  std::unique_ptr<WebServer> s(new WebServer(std::make_unique<Api>(std::move(*store)), std::move(access), parent));
  s->token_created_ = created;
  s->hosts_ = std::move(hosts);
  // The name links use: a browser elsewhere cannot open 0.0.0.0, but this machine's name.
  const bool any = o.listen.address == QHostAddress::Any || o.listen.address == QHostAddress::AnyIPv4 ||
                   o.listen.address == QHostAddress::AnyIPv6;
  if (!o.public_names.empty()) s->link_name_ = QString::fromStdString(o.public_names.front());
  else if (any) s->link_name_ = QHostInfo::localHostName();
  // Our own QTcpServer: every socket gets its guard before Qt reads from it
  // (web/connection_guard.h); with TLS the guard sees the decrypted bytes and its head timeout
  // covers the handshake too.
  auto* tcp = new GuardedTcpServer(o.limits, s.get());
  if (*tls) {
    tcp->set_tls((*tls)->config);
    s->tls_ = true;
    s->tls_self_signed_ = (*tls)->self_signed;
    s->tls_fingerprint_ = (*tls)->fingerprint;
  }
  const quint16 port = tcp->listen(o.listen.address, o.listen.port) ? tcp->serverPort() : 0;
  if (port != 0) {
    s->bind(tcp);
    tcp->bound();
    s->tcp_ = tcp;
  }
  if (port == 0)
    return Error{"--listen", o.listen.address.toString().toStdString() + ":" + std::to_string(o.listen.port),
                 "cannot listen there (in use, or not an address of this machine)"}
        .as(ErrorKind::io);
  s->db_ = o.db;
  s->pool_.setMaxThreadCount(std::max(2, QThread::idealThreadCount()));
  s->address_ = o.listen.address;
  s->port_ = port;
  s->access_.set_port(port);
  s->poll_timer_.setInterval(std::max(20, o.poll_ms));
  return s;
}

QString WebServer::base_url() const {
  const QString host = !link_name_.isEmpty() ? link_name_
                       : address_.protocol() == QAbstractSocket::IPv6Protocol
                           ? QStringLiteral("[%1]").arg(address_.toString())
                           : address_.toString();
  return QStringLiteral("%1://%2:%3").arg(tls_ ? QStringLiteral("https") : QStringLiteral("http"), host).arg(port_);
}

Result<QString> WebServer::new_login_link() {
  auto code = access_.new_login_code();
  if (!code) return code.error();
  return base_url() + QStringLiteral("/login?code=") + QString::fromStdString(*code);
}

void WebServer::missingHandler(const QHttpServerRequest&, QTcpSocket* socket) {
  // handleRequest answers every request; this is Qt's fallback should it ever not.
  socket->disconnectFromHost();
}

bool WebServer::handleRequest(const QHttpServerRequest& request, QTcpSocket* socket) {
  // Qt HTTP Server 6.4 treats a request as a WebSocket upgrade when `Upgrade: websocket` comes
  // with a `Connection` header containing "upgrade" (its own test, repeated here).
  const bool websocket = header(request, "Upgrade").compare("websocket", Qt::CaseInsensitive) == 0;
  const bool upgrade = websocket && header(request, "Connection").toLower().contains("upgrade");
  QHttpServerResponder r = makeResponder(request, socket);
  // Before anything else, upgrades included: a name that is not this server's is a page of
  // another site reaching here by DNS rebinding (web/host_check.h).
  if (const QByteArray host = header(request, "Host"); !hosts_.allows_host(host.toStdString())) {
    reply_error(r, 421,
                Error{"Host", host.left(64).toStdString(),
                      "not a name of this server: " + hosts_.describe() + " (add one with --public-name NAME)"});
    return !upgrade;  // an upgrade refused: false, and Qt closes the connection once this is sent
  }
  // Taken (true) with nothing written: the upgraded socket comes back through
  // accept_websockets(), which checks who asks and for what as strictly as below.
  if (upgrade) return true;
  if (websocket) {
    reply_error(r, 400, Error{"Connection", header(request, "Connection").left(64).toStdString(),
                              "a WebSocket upgrade needs Connection: Upgrade"});
    return true;
  }
  const QUrl url = request.url();
  if (url.toEncoded().size() > kMaxUrlBytes) {
    reply_error(r, 414, Error{"url", std::to_string(url.toEncoded().size()) + " bytes", "at most 8192 bytes"});
    return true;
  }
  if (request.method() != QHttpServerRequest::Method::Get) {
    reply_error(r, 405, Error{"method", "", "read-only: GET only"}, {{"Allow", "GET"}});
    return true;
  }
  const QString path = url.path();
  const QUrlQuery query(url);

  if (path == QLatin1String("/login")) {
    const std::string code = query.queryItemValue(QStringLiteral("code")).toStdString();
    if (!access_.required()) {
      reply(r, Status::SeeOther, "text/plain", "", {{"Location", "/"}});
    } else if (auto session = access_.log_in(code)) {
      // A session of this instance, never the token; its name carries the port (web/access.h).
      const QByteArray cookie = QByteArray::fromStdString(access_.cookie_name() + "=" + *session) +
                                "; Max-Age=" + QByteArray::number(static_cast<qint64>(access_.sessions().lifetime().count())) +
                                "; Path=/; HttpOnly; SameSite=Strict" + (tls_ ? "; Secure" : "");
      reply(r, Status::SeeOther, "text/plain", "", {{"Location", "/"}, {"Set-Cookie", cookie}});
    } else {
      reply_error(r, 401, session.error());
    }
    return true;
  }
  if (!access_.allows(header(request, "Authorization").toStdString(), header(request, "Cookie").toStdString())) {
    reply_error(r, 401,
                Error{"token", "", "this server needs its token: open the one-time link `meshwork serve` printed, "
                                   "or send Authorization: Bearer TOKEN"},
                {{"WWW-Authenticate", "Bearer"}});
    return true;
  }

  if (path.startsWith(QLatin1String("/api/"))) {
    Params params;
    for (const auto& [k, v] : query.queryItems(QUrl::FullyDecoded)) {
      if (!params.emplace(k.toStdString(), v.toStdString()).second) {
        reply_error(r, 400, Error{k.toStdString(), "", "each parameter once"});
        return true;
      }
    }
    answer_api(std::move(r), socket, path.mid(4).toStdString(), std::move(params));
    return true;
  }
  QString name;
  if (path == QLatin1String("/")) name = QStringLiteral("index.html");
  else if (path == QLatin1String("/run")) name = QStringLiteral("run.html");
  else if (path == QLatin1String("/compare")) name = QStringLiteral("compare.html");
  else if (path.startsWith(QLatin1String("/static/"))) name = path.mid(8);
  auto it = static_files_.find(name);
  if (name.isEmpty() || it == static_files_.end()) {
    reply_error(r, 404, Error{"path", path.left(64).toStdString(), "one of /, /run?id=ID, /compare?runs=ID,ID, /api/... (docs/web.md)"});
    return true;
  }
  QFile f(it.value());
  if (!f.open(QIODevice::ReadOnly)) {
    reply_error(r, 500, Error{"page", name.toStdString(), "missing from this build"});
    return true;
  }
  reply(r, Status::Ok, content_type(name), f.readAll());
  return true;
}

std::unique_ptr<Api> WebServer::take_api() {
  {
    std::lock_guard<std::mutex> lock(apis_mutex_);
    if (!idle_apis_.empty()) {
      auto api = std::move(idle_apis_.back());
      idle_apis_.pop_back();
      return api;
    }
  }
  store::RunStore::Options so;
  so.read_only = true;
  auto store = store::RunStore::open(db_, so);
  if (!store) return nullptr;
  return std::make_unique<Api>(std::move(*store));
}

void WebServer::give_api(std::unique_ptr<Api> api) {
  std::lock_guard<std::mutex> lock(apis_mutex_);
  idle_apis_.push_back(std::move(api));
}

void WebServer::answer_api(QHttpServerResponder&& responder, QTcpSocket* socket, std::string path, Params params) {
  auto r = std::make_shared<QHttpServerResponder>(std::move(responder));
  const QPointer<QTcpSocket> alive(socket);
  ConnectionGuard::answering(socket);
  pool_.start(handed_over([this, r, alive, path = std::move(path), params = std::move(params)] {
    ApiReply a;
    if (auto api = take_api()) {
      a = api->get(path, params);
      give_api(std::move(api));
    } else {
      a.status = 500;
      a.body = {{"error", Error{"run store", db_.string(), "could not be opened"}.message()}};
    }
    QByteArray body = QByteArray::fromStdString(a.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    QMetaObject::invokeMethod(
        this,
        handed_over([r, alive, status = a.status, body = std::move(body)] {
          if (!alive || !alive->isOpen()) return;  // the client left while its query ran
          reply(*r, static_cast<Status>(status), "application/json", body);
          ConnectionGuard::answered(alive);
        }),
        Qt::QueuedConnection);
  }));
}

void WebServer::accept_websockets() {
  while (hasPendingWebSocketConnections()) {
    std::unique_ptr<QWebSocket> ws = nextPendingWebSocketConnection();
    if (!ws) continue;
    // The pages send nothing: nothing larger than a few KiB is assembled, and anything sent closes.
    ws->setMaxAllowedIncomingFrameSize(static_cast<quint64>(tcp_->limits().max_websocket_frame_bytes));
    ws->setMaxAllowedIncomingMessageSize(static_cast<quint64>(tcp_->limits().max_websocket_frame_bytes));
    if (ConnectionGuard* guard = tcp_->guard_of(*ws)) guard->watch_websocket(ws.get());
    const QNetworkRequest& req = ws->request();
    const QUrl url = ws->requestUrl();
    const auto refuse = [&](QWebSocketProtocol::CloseCode code, const QString& why) {
      ws->close(code, why);
    };
    // A page of another site (or of another port of this host) may open a WebSocket to this
    // server with the browser's cookie: only pages this server served are answered, by an
    // Origin whose name is allowed and equals the request's Host (web/host_check.h).
    const QByteArray origin = req.rawHeader("Origin");
    if (!hosts_.allows_origin(origin.toStdString(), req.rawHeader("Host").toStdString(), tls_)) {
      refuse(QWebSocketProtocol::CloseCodePolicyViolated, QStringLiteral("origin: not this server's page"));
      continue;
    }
    if (!access_.allows(req.rawHeader("Authorization").toStdString(), req.rawHeader("Cookie").toStdString())) {
      refuse(QWebSocketProtocol::CloseCodePolicyViolated, QStringLiteral("token: missing or wrong"));
      continue;
    }
    if (url.path() != QLatin1String("/api/live")) {
      refuse(QWebSocketProtocol::CloseCodePolicyViolated, QStringLiteral("path: only /api/live"));
      continue;
    }
    if (live_.size() >= static_cast<size_t>(kMaxLiveClients)) {
      refuse(QWebSocketProtocol::CloseCodePolicyViolated, QStringLiteral("too many live pages (256)"));
      continue;
    }
    const QHostAddress client = client_key(ws->peerAddress());
    if (std::count_if(live_.begin(), live_.end(), [&](const auto& l) {
          return client_key(l.first->peerAddress()) == client;
        }) >= tcp_->limits().max_live_per_client) {
      refuse(QWebSocketProtocol::CloseCodePolicyViolated,
             QStringLiteral("too many live pages from this address (%1)").arg(tcp_->limits().max_live_per_client));
      continue;
    }
    Watch w;
    const QString run = QUrlQuery(url).queryItemValue(QStringLiteral("run"));
    if (!run.isEmpty()) {
      bool ok = false;
      const qlonglong id = run.toLongLong(&ok);
      if (!ok || id < 1) {
        refuse(QWebSocketProtocol::CloseCodePolicyViolated, QStringLiteral("run: a run id >= 1"));
        continue;
      }
      w.run = id;
    }
    QWebSocket* key = ws.get();
    connect(key, &QWebSocket::disconnected, this, [this, key] {
      auto it = live_.find(key);
      if (it == live_.end()) return;
      it->second.socket.release()->deleteLater();  // not inside its own signal
      live_.erase(it);
      if (live_.empty()) poll_timer_.stop();
    });
    // A page says nothing after the upgrade; whatever it sends is dropped unread.
    w.socket = std::move(ws);
    live_.emplace(key, std::move(w));
    data_version_ = -1;  // the newcomer gets the current version at the next poll
    if (!poll_timer_.isActive()) poll_timer_.start();
  }
}

void WebServer::poll() {
  if (live_.empty()) return;
  // Nothing committed since the last look: nothing to read (one PRAGMA, no query of the runs).
  const int64_t dv = api_->data_version();
  if (dv == data_version_) return;
  data_version_ = dv;
  auto v = api_->versions();
  if (!v) return;
  for (auto& [key, w] : live_) {
    nlohmann::json msg;
    if (w.run == 0) {
      if (w.version == v->list) continue;
      w.version = v->list;
      msg = {{"type", "runs"}, {"version", v->list}};
    } else {
      auto it = v->runs.find(w.run);
      const int64_t version = it == v->runs.end() ? 0 : it->second;
      if (w.version == version) continue;
      w.version = version;
      msg = {{"type", "run"}, {"run", w.run}, {"version", version},
             {"status", it == v->runs.end() ? std::string("deleted") : v->status[w.run]},
             {"steps", it == v->runs.end() ? 0 : v->steps[w.run]}};
    }
    key->sendTextMessage(QString::fromStdString(msg.dump()));
  }
}

}  // namespace meshwork::web
