#include "web/connection_guard.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QSslSocket>
#include <QTcpSocket>
#include <QWebSocket>

#include <algorithm>
#include <tuple>

#include <nlohmann/json.hpp>

namespace meshwork::web {

namespace {

// Descriptors the server needs besides its connections: the store (database, WAL and shared
// memory for each worker's read-only connection), the listening socket, Qt's event plumbing.
constexpr rlim_t kDescriptorReserve = 64;
// How often a live page's socket is looked at for output left unread or input stuck.
constexpr int kLiveCheckMs = 1000;

bool is_token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

bool valid_request_line(const QByteArray& line) {
  const QList<QByteArray> parts = line.split(' ');
  if (parts.size() != 3 || parts[0].isEmpty() || parts[1].isEmpty()) return false;
  if (!std::all_of(parts[0].begin(), parts[0].end(), is_token_char)) return false;
  if (!std::all_of(parts[1].begin(), parts[1].end(), [](char c) { return c > ' ' && c != 0x7f; })) return false;
  return parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0";
}

}  // namespace

QHostAddress client_key(const QHostAddress& a) {
  bool mapped = false;
  const quint32 v4 = a.toIPv4Address(&mapped);
  return mapped ? QHostAddress(v4) : a;
}

ConnectionGuard::ConnectionGuard(QTcpSocket* socket, GuardedTcpServer* server)
    : QObject(socket),
      socket_(socket),
      server_(server),
      limits_(server->limits()),
      client_(client_key(socket->peerAddress())) {
  // Qt keeps a request's bytes in this buffer until it is whole; past the cap it stops reading
  // from the kernel. Twice the largest head: a head over the limit is refused before it fills.
  socket_->setReadBufferSize(std::max<qint64>(2 * static_cast<qint64>(limits_.max_head_bytes), 16 * 1024));
  activity_.start();
  head_started_.start();
  timer_.setSingleShot(true);
  connect(&timer_, &QTimer::timeout, this, &ConnectionGuard::timed_out);
  before_ = connect(socket_, &QTcpSocket::readyRead, this, &ConnectionGuard::before_qt);
  connect(socket_, &QTcpSocket::bytesWritten, this, [this] {
    activity_.restart();
    if (state_ == State::closing) {
      if (socket_->bytesToWrite() == 0) ::shutdown(static_cast<int>(socket_->socketDescriptor()), SHUT_WR);
      return;
    }
    resume_if_drained();
    arm_timer();
  });
  server->add(this);
  arm_timer();
}

ConnectionGuard::~ConnectionGuard() {
  if (server_) server_->remove(this);
}

void ConnectionGuard::attach_after_qt() {
  connect(socket_, &QTcpSocket::readyRead, this, &ConnectionGuard::after_qt);
}

void ConnectionGuard::answering(QTcpSocket* socket) {
  auto* g = socket ? socket->findChild<ConnectionGuard*>(QString(), Qt::FindDirectChildrenOnly) : nullptr;
  if (!g) return;
  ++g->answering_;
  g->arm_timer();
}

void ConnectionGuard::answered(QTcpSocket* socket) {
  auto* g = socket ? socket->findChild<ConnectionGuard*>(QString(), Qt::FindDirectChildrenOnly) : nullptr;
  if (!g || g->answering_ == 0) return;
  --g->answering_;
  g->activity_.restart();
  g->resume_if_drained();
  g->arm_timer();
}

void ConnectionGuard::before_qt() {
  const qint64 available = socket_->bytesAvailable();
  const qint64 fresh = available - seen_;
  if (fresh > 0) activity_.restart();
  if (state_ == State::closing) {
    discard_input();
    return;
  }
  if (fresh > 0) {
    const QByteArray data = socket_->peek(available);
    scan(data.constData() + (data.size() - fresh), fresh);
    if (state_ == State::closing) return;
  }
  // Between requests (Qt holds no partial one): wait while an answer is being made or the
  // client leaves what was written unread.
  if (!paused_ && !socket_->isTransactionStarted() &&
      (answering_ > 0 || socket_->bytesToWrite() > limits_.max_unsent_bytes))
    pause();
  if (paused_) socket_->read(socket_->bytesAvailable());  // kept in the transaction, out of Qt's sight
  arm_timer();
}

void ConnectionGuard::after_qt() {
  if (upgrade_pending_ && !paused_) {
    // Qt kept the connection after an Upgrade request (it answered it as HTTP): what follows
    // it is HTTP again, not yet looked at, and Qt reads it next.
    upgrade_pending_ = false;
    const QByteArray rest = socket_->peek(socket_->bytesAvailable());
    scan(rest.constData(), rest.size());
    if (state_ == State::closing) return;
  }
  seen_ = socket_->bytesAvailable();
  arm_timer();
}

void ConnectionGuard::scan(const char* data, qint64 n) {
  // After an Upgrade request's head the bytes belong to the upgraded protocol (Qt hands the
  // socket to its WebSocket server in this same turn), unless Qt keeps the connection (after_qt).
  for (qint64 i = 0; i < n && state_ != State::closing && !upgrade_pending_; ++i) {
    const char c = data[i];
    // Blank lines between requests are allowed (RFC 9112 2.2) and belong to no head.
    if (state_ == State::line && head_bytes_ == 0 && (c == '\r' || c == '\n')) continue;
    if (head_bytes_ == 0 && requests_ > 0) head_started_.restart();
    ++head_bytes_;
    if (c == '\n') {
      end_of_line();
      continue;
    }
    line_.append(c);
    if (state_ == State::line && line_.size() > limits_.max_request_line_bytes) {
      refuse(414, "URI Too Long",
             "request line: longer than " + QByteArray::number(limits_.max_request_line_bytes) + " bytes");
    } else if (head_bytes_ > limits_.max_head_bytes) {
      refuse(431, "Request Header Fields Too Large",
             "headers: longer than " + QByteArray::number(limits_.max_head_bytes) + " bytes in all");
    }
  }
}

void ConnectionGuard::end_of_line() {
  if (line_.endsWith('\r')) line_.chop(1);
  if (state_ == State::line) {
    if (!valid_request_line(line_)) {
      refuse(400, "Bad Request", "request line: METHOD TARGET HTTP/1.1");
      return;
    }
    state_ = State::headers;
    header_count_ = 0;
    has_body_ = false;
    content_length_seen_ = false;
    upgrade_ = false;
    line_.clear();
    return;
  }
  if (line_.isEmpty()) {
    end_of_head();
    return;
  }
  if (++header_count_ > limits_.max_header_count) {
    refuse(431, "Request Header Fields Too Large",
           "headers: more than " + QByteArray::number(limits_.max_header_count));
    return;
  }
  const qsizetype colon = line_.indexOf(':');
  const QByteArray name = colon > 0 ? line_.left(colon) : QByteArray();
  if (name.isEmpty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
    refuse(400, "Bad Request", "header: NAME: VALUE, one per line");
    return;
  }
  const QByteArray value = line_.mid(colon + 1).trimmed();
  if (name.compare("Content-Length", Qt::CaseInsensitive) == 0) {
    bool ok = false;
    const qulonglong length = value.toULongLong(&ok);
    if (!ok || content_length_seen_) {
      refuse(400, "Bad Request", "Content-Length: one decimal number");
      return;
    }
    content_length_seen_ = true;
    if (length > 0) has_body_ = true;
  } else if (name.compare("Transfer-Encoding", Qt::CaseInsensitive) == 0) {
    has_body_ = true;
  } else if (name.compare("Upgrade", Qt::CaseInsensitive) == 0) {
    upgrade_ = true;
  }
  line_.clear();
}

void ConnectionGuard::end_of_head() {
  if (has_body_) {
    refuse(413, "Content Too Large", "body: this server is read-only and takes no request body");
    return;
  }
  ++requests_;
  upgrade_pending_ = upgrade_;
  head_bytes_ = 0;
  state_ = State::line;
  line_.clear();
}

void ConnectionGuard::refuse(int status, const QByteArray& reason, const QByteArray& what) {
  state_ = State::closing;
  line_.clear();
  closing_.start();
  discard_input();  // Qt sees nothing more of this request
  if (answering_ > 0) {
    // An answer is still to come on this connection: a refusal now would be read as its answer.
    close_now();
    return;
  }
  const QByteArray body = QByteArray::fromStdString(nlohmann::json{{"error", what.toStdString()}}.dump());
  socket_->write("HTTP/1.1 " + QByteArray::number(status) + " " + reason +
                 "\r\nContent-Type: application/json\r\nContent-Length: " + QByteArray::number(body.size()) +
                 "\r\nConnection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n" + body);
  socket_->flush();
  // Half-close once written and keep reading (and dropping) for a moment: closing with unread
  // input would reset the connection and the client could lose the 4xx.
  if (socket_->bytesToWrite() == 0) ::shutdown(static_cast<int>(socket_->socketDescriptor()), SHUT_WR);
  arm_timer();
}

void ConnectionGuard::discard_input() {
  if (socket_->isTransactionStarted()) socket_->commitTransaction();
  paused_ = false;
  socket_->skip(socket_->bytesAvailable());
  seen_ = socket_->bytesAvailable();
}

void ConnectionGuard::pause() {
  paused_ = true;
  socket_->startTransaction();
}

void ConnectionGuard::resume_if_drained() {
  if (!paused_ || state_ == State::closing || answering_ > 0 || socket_->bytesToWrite() > limits_.max_unsent_bytes)
    return;
  paused_ = false;
  socket_->rollbackTransaction();
  seen_ = socket_->bytesAvailable();
  if (seen_ > 0) QMetaObject::invokeMethod(socket_, &QAbstractSocket::readyRead, Qt::QueuedConnection);
}

void ConnectionGuard::close_now() {
  state_ = State::closing;
  timer_.stop();
  if (socket_->state() == QAbstractSocket::UnconnectedState) return;
  socket_->abort();
}

void ConnectionGuard::arm_timer() {
  if (upgraded_) return;  // the live check runs on its own period
  qint64 left = 0;
  if (state_ == State::closing) left = limits_.linger_ms - closing_.elapsed();
  else if (answering_ > 0) {
    timer_.stop();
    return;
  } else if (head_bytes_ > 0 || requests_ == 0) left = limits_.header_timeout_ms - head_started_.elapsed();
  else left = limits_.idle_timeout_ms - activity_.elapsed();
  timer_.start(static_cast<int>(std::clamp<qint64>(left, 0, 1 << 30)));
}

void ConnectionGuard::timed_out() {
  if (upgraded_) {
    // A live page's socket: a client that leaves what is sent unread, or sends a frame too large
    // to wait for (Qt waits for a whole frame in the capped read buffer), is let go.
    const bool input_stuck = socket_->readBufferSize() > 0 && socket_->bytesAvailable() >= socket_->readBufferSize();
    if (socket_->bytesToWrite() > limits_.max_unsent_bytes || input_stuck) socket_->abort();
    else timer_.start(kLiveCheckMs);
    return;
  }
  if (!before_) {
    // Qt handed the socket to its WebSocket server (which drops every other connection first).
    upgraded_ = true;
    return;
  }
  if (state_ == State::closing) {
    if (closing_.elapsed() >= limits_.linger_ms) close_now();
    else arm_timer();
    return;
  }
  if (answering_ > 0) return;
  if (head_bytes_ > 0 || requests_ == 0) {
    if (head_started_.elapsed() < limits_.header_timeout_ms) {
      arm_timer();
    } else if (head_bytes_ > 0) {
      refuse(408, "Request Timeout",
             "request: head not complete within " + QByteArray::number(limits_.header_timeout_ms) + " ms");
    } else {
      close_now();  // connected and said nothing
    }
    return;
  }
  if (activity_.elapsed() < limits_.idle_timeout_ms) arm_timer();
  else close_now();
}

void ConnectionGuard::watch_websocket(QWebSocket* ws) {
  upgraded_ = true;
  timer_.start(kLiveCheckMs);
  QPointer<QWebSocket> alive(ws);
  // Connected after QWebSocket's own reader: a close frame has been handled (the state is no
  // longer connected) when this runs; anything else -- a message, a ping -- closes the socket.
  connect(socket_, &QTcpSocket::readyRead, this, [this, alive] {
    if (!alive) return;
    if (alive->state() == QAbstractSocket::ConnectedState && !websocket_refused_) {
      websocket_refused_ = true;
      alive->close(QWebSocketProtocol::CloseCodePolicyViolated, QStringLiteral("this socket takes no messages"));
      QTimer::singleShot(limits_.linger_ms, this, [this] { socket_->abort(); });
    } else if (websocket_refused_ && socket_->bytesToWrite() > limits_.max_unsent_bytes) {
      socket_->abort();
    }
  });
}

GuardedTcpServer::GuardedTcpServer(const ConnectionLimits& limits, QObject* parent)
    : QTcpServer(parent), limits_(limits) {
  // A server out of descriptors cannot accept even the client it would answer: stay under.
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
    const rlim_t room = r.rlim_cur > kDescriptorReserve + 8 ? r.rlim_cur - kDescriptorReserve : 8;
    limits_.max_connections = static_cast<int>(std::min<rlim_t>(static_cast<rlim_t>(limits_.max_connections), room));
  }
  connect(this, &QTcpServer::acceptError, this, [this] {
    make_room(QHostAddress());
    QTimer::singleShot(100, this, [this] { resumeAccepting(); });
  });
}

GuardedTcpServer::~GuardedTcpServer() {
  for (auto& [g, client] : guards_) g->server_ = nullptr;
}

void GuardedTcpServer::bound() {
  connect(this, &QTcpServer::pendingConnectionAvailable, this, &GuardedTcpServer::attach_new);
}

void GuardedTcpServer::incomingConnection(qintptr descriptor) {
  QTcpSocket* socket = tls_ ? new QSslSocket(this) : new QTcpSocket(this);
  if (!socket->setSocketDescriptor(descriptor)) {
    ::close(static_cast<int>(descriptor));
    delete socket;
    return;
  }
  if (tls_ && !make_room(client_key(socket->peerAddress()))) {
    // No plain-text answer on a TLS port: the handshake has not happened yet.
    socket->abort();
    socket->deleteLater();
    return;
  }
  if (auto* ssl = qobject_cast<QSslSocket*>(socket)) {
    ssl->setSslConfiguration(*tls_);
    ssl->startServerEncryption();
  } else if (!make_room(client_key(socket->peerAddress()))) {
    // Every connection is busy with an answer: this one is told so at once, not left waiting.
    connect(socket, &QTcpSocket::disconnected, socket, &QObject::deleteLater);
    socket->write(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\nRetry-After: 1\r\n\r\n");
    socket->disconnectFromHost();
    return;
  }
  unattached_.emplace_back(new ConnectionGuard(socket, this));
  addPendingConnection(socket);
}

void GuardedTcpServer::attach_new() {
  for (auto& g : unattached_)
    if (g) g->attach_after_qt();
  unattached_.clear();
}

bool GuardedTcpServer::make_room(const QHostAddress& client) {
  int of_client = 0;
  for (const auto& [g, address] : guards_)
    if (!g->upgraded() && !g->closing() && g->socket()->state() != QAbstractSocket::UnconnectedState &&
        address == client)
      ++of_client;
  const bool client_full = !client.isNull() && of_client >= limits_.max_connections_per_client;
  const bool server_full = open_connections() >= limits_.max_connections;
  if (!client_full && !server_full) return true;
  // One already refused gives way first, then one that has asked nothing yet, then the one idle
  // the longest: a client holding sockets open cannot shut out those in use.
  ConnectionGuard* victim = nullptr;
  const auto rank = [](const ConnectionGuard* g) { return std::tuple{g->closing(), g->silent(), g->idle_ns()}; };
  for (const auto& [g, address] : guards_) {
    if (g->socket()->state() == QAbstractSocket::UnconnectedState) continue;  // closed, awaiting deletion
    if (!(g->evictable() || (server_full && g->closing() && !g->upgraded()))) continue;
    if (client_full && !server_full && address != client) continue;
    if (!victim || rank(g) > rank(victim)) victim = g;
  }
  if (!victim) return false;
  victim->close_now();
  return true;
}

int GuardedTcpServer::open_connections() const {
  return static_cast<int>(std::count_if(guards_.begin(), guards_.end(), [](const auto& entry) {
    return entry.first->socket()->state() != QAbstractSocket::UnconnectedState;
  }));
}

ConnectionGuard* GuardedTcpServer::guard_of(const QWebSocket& ws) const {
  for (const auto& [g, client] : guards_)
    if (g->socket()->peerPort() == ws.peerPort() && g->socket()->peerAddress() == ws.peerAddress()) return g;
  return nullptr;
}

}  // namespace meshwork::web
