// Bounds on what one client may make `meshwork serve` hold (docs/web.md "Limits"). Qt HTTP Server
// 6.4 reads a request into memory whole, however long its headers or body, before the server's
// handler sees it, and writes answers into a buffer nobody bounds. So every accepted socket gets
// a ConnectionGuard first: its readyRead slot runs before Qt's, looks at each new byte (a peek,
// never a read Qt would miss) and refuses a request line, head or header count over the limit,
// any request body, and a head or an idle connection too slow -- with the 4xx Qt would not send --
// before Qt has buffered more than one bounded head. The socket's read buffer is capped, so bytes
// nobody reads stay in the kernel and TCP slows the sender.
//
// A connection answers one request at a time: while an answer is being made or the client has not
// read what was written, further requests wait unread (in order, as HTTP/1.1 requires of
// pipelining). GuardedTcpServer, handed to QAbstractHttpServer::bind, creates the sockets, caps
// connections per server and per client address (closing the longest-idle one to make room) and
// watches upgraded WebSockets, which must send nothing.
#pragma once

#include <QElapsedTimer>
#include <QHostAddress>
#include <QPointer>
#include <QSslConfiguration>
#include <QTcpServer>
#include <QTimer>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

class QTcpSocket;
class QWebSocket;

namespace meshwork::web {

struct ConnectionLimits {
  int max_request_line_bytes = 8192 + 64;  // a URL of 8 KiB (kMaxUrlBytes) plus method and version
  int max_head_bytes = 32 * 1024;          // request line and headers (cookies included)
  int max_header_count = 64;
  int64_t max_unsent_bytes = 1 << 20;  // answers written, not yet read: no further request is read
  int max_connections = 512;           // per server; lowered to what the descriptor limit allows
  int max_connections_per_client = 64;  // HTTP connections per client address (loopback users share one)
  int header_timeout_ms = 10'000;       // a request's head, from its first byte (or the accept)
  int idle_timeout_ms = 60'000;         // between requests, or while the client reads nothing
  int linger_ms = 2'000;                // after a refusal: the client may read the 4xx, then close
  int max_live_per_client = 32;         // live pages (WebSockets) per client address
  int64_t max_websocket_frame_bytes = 4096;  // the pages send nothing; this bounds what Qt assembles
};

class GuardedTcpServer;

class ConnectionGuard : public QObject {
  Q_OBJECT
 public:
  ConnectionGuard(QTcpSocket* socket, GuardedTcpServer* server);
  ~ConnectionGuard() override;

  // The server makes an answer for this connection off its thread: no further request is read
  // until answered() (one answer at a time keeps pipelined answers in order).
  static void answering(QTcpSocket* socket);
  static void answered(QTcpSocket* socket);

  void attach_after_qt();  // the slot that runs after Qt's on each readyRead
  bool upgraded() const { return upgraded_; }
  bool closing() const { return state_ == State::closing; }
  bool evictable() const { return !upgraded_ && answering_ == 0 && state_ != State::closing; }
  qint64 idle_ns() const { return activity_.nsecsElapsed(); }
  bool silent() const { return requests_ == 0 && head_bytes_ == 0; }  // has asked nothing yet
  QHostAddress client() const { return client_; }
  QTcpSocket* socket() const { return socket_; }
  void close_now();                    // without a word: evicted, or past a limit mid-answer
  void watch_websocket(QWebSocket* ws);  // after the upgrade: any data closes it

 private:
  friend class GuardedTcpServer;
  enum class State { line, headers, closing };
  void before_qt();
  void after_qt();
  void scan(const char* data, qint64 n);
  void end_of_line();
  void end_of_head();
  void refuse(int status, const QByteArray& reason, const QByteArray& what);
  void pause();
  void resume_if_drained();
  void arm_timer();
  void timed_out();
  void discard_input();

  QTcpSocket* socket_;
  QPointer<GuardedTcpServer> server_;
  const ConnectionLimits limits_;
  QHostAddress client_;
  State state_ = State::line;
  QByteArray line_;       // the current line of the head, at most the limit
  qint64 head_bytes_ = 0;  // of the head being read; 0 between requests
  int header_count_ = 0;
  bool has_body_ = false;
  bool content_length_seen_ = false;
  bool upgrade_ = false;          // this head asks for an Upgrade
  bool upgrade_pending_ = false;  // ... and it is whole: what follows is not HTTP
  int64_t requests_ = 0;  // heads read whole on this connection
  qint64 seen_ = 0;  // bytes still unread after Qt's last turn
  int answering_ = 0;
  bool paused_ = false;
  bool upgraded_ = false;
  bool websocket_refused_ = false;
  QElapsedTimer activity_;  // last byte in or out
  QElapsedTimer head_started_;
  QElapsedTimer closing_;  // since the refusal
  QTimer timer_;
  QMetaObject::Connection before_;
};

class GuardedTcpServer : public QTcpServer {
  Q_OBJECT
 public:
  GuardedTcpServer(const ConnectionLimits& limits, QObject* parent = nullptr);
  ~GuardedTcpServer() override;
  // After QAbstractHttpServer::bind(this): our slot on new connections then runs after Qt's.
  void bound();

  // TLS: every accepted socket is a QSslSocket with this configuration, encrypting at once (no
  // plain-text answer is ever written on the port).
  void set_tls(const QSslConfiguration& config) { tls_ = config; }
  const ConnectionLimits& limits() const { return limits_; }
  int open_connections() const;  // sockets not yet closed, WebSockets included
  // The guard of the socket a WebSocket came from (by its peer address and port), or null.
  ConnectionGuard* guard_of(const QWebSocket& ws) const;

 protected:
  void incomingConnection(qintptr descriptor) override;

 private:
  friend class ConnectionGuard;
  void add(ConnectionGuard* g) { guards_.emplace(g, g->client()); }
  void remove(ConnectionGuard* g) { guards_.erase(g); }
  bool make_room(const QHostAddress& client);
  void attach_new();

  ConnectionLimits limits_;
  std::optional<QSslConfiguration> tls_;
  std::map<ConnectionGuard*, QHostAddress> guards_;
  std::vector<QPointer<ConnectionGuard>> unattached_;
};

// The client address a cap counts by (an IPv4-mapped IPv6 address counts as its IPv4 one).
QHostAddress client_key(const QHostAddress& a);

}  // namespace meshwork::web
