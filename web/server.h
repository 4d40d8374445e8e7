// `meshwork serve`: the run store over HTTP for browsers (docs/web.md). Qt HTTP Server parses
// requests; this class only checks who asks (web/access.h), hands /api/ paths to Api
// (web/api.h), serves the pages compiled in as Qt resources, and pushes "this changed" to live
// pages over WebSockets. Read-only: the store is opened read-only and only GET is answered.
#pragma once

#include <QAbstractHttpServer>
#include <QHostAddress>
#include <QMap>
#include <QThreadPool>
#include <QTimer>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "web/access.h"
#include "web/api.h"
#include "web/host_check.h"
#include "web/connection_guard.h"

class QWebSocket;

namespace meshwork::web {

inline constexpr int kMaxUrlBytes = 8192;
inline constexpr int kMaxLiveClients = 256;

struct Listen {
  QHostAddress address = QHostAddress::LocalHost;
  quint16 port = 8765;
};
// "ADDR:PORT", "[IPv6]:PORT" or "PORT" (on 127.0.0.1); port 0 picks a free one.
Result<Listen> parse_listen(std::string_view text);

class WebServer : public QAbstractHttpServer {
  Q_OBJECT
 public:
  struct Options {
    std::filesystem::path db;
    Listen listen;
    std::filesystem::path token_file;  // used only when the address is not loopback
    int poll_ms = 200;                 // how often live pages' runs are looked at
    // Names browsers may use for this server besides localhost, IP addresses and this machine's
    // host name (web/host_check.h); the first is the name the printed link uses.
    std::vector<std::string> public_names;
    // TLS (web/tls.h): a certificate and key, or on a non-loopback address without them a
    // self-signed certificate made now. Plain HTTP off loopback only with insecure_http.
    std::filesystem::path tls_cert, tls_key;
    bool insecure_http = false;
    ConnectionLimits limits;           // what one client may make the server hold (docs/web.md)
  };
  // Opens the store read-only, sets up access and listens. Errors name the flag at fault.
  static Result<std::unique_ptr<WebServer>> start(const Options& options, QObject* parent = nullptr);
  ~WebServer() override;

  // http(s)://NAME:PORT: the first public name, else this machine's name on a wildcard
  // address (0.0.0.0, ::), else the address.
  QString base_url() const;
  bool tls() const { return tls_; }
  bool tls_self_signed() const { return tls_self_signed_; }
  const QString& tls_fingerprint() const { return tls_fingerprint_; }  // SHA-256, "AB:CD:..."
  const std::string& session_cookie_name() const { return access_.cookie_name(); }
  quint16 port() const { return port_; }
  bool token_required() const { return access_.required(); }
  bool token_created() const { return token_created_; }
  const std::string& token() const { return access_.token(); }
  Result<QString> new_login_link();  // base_url()/login?code=...
  int live_clients() const { return static_cast<int>(live_.size()); }
  int open_connections() const { return tcp_ ? tcp_->open_connections() : 0; }

 protected:
  bool handleRequest(const QHttpServerRequest& request, QTcpSocket* socket) override;
  void missingHandler(const QHttpServerRequest& request, QTcpSocket* socket) override;

 private:
  WebServer(std::unique_ptr<Api> api, Access access, QObject* parent);
  void accept_websockets();
  void poll();
  // API requests run on pool_, each on an Api of its own (a read-only connection: SQLite WAL
  // readers never wait for each other or for the writer), and the answer is written back on this
  // thread. A query of 8 runs then never holds up pages, other queries or live pushes.
  void answer_api(QHttpServerResponder&& responder, QTcpSocket* socket, std::string path, Params params);
  std::unique_ptr<Api> take_api();
  void give_api(std::unique_ptr<Api> api);

  struct Watch {
    std::unique_ptr<QWebSocket> socket;
    store::RunId run = 0;  // 0: the runs list
    int64_t version = -1;  // last sent
  };

  std::unique_ptr<Api> api_;  // this thread's: the live poll
  std::filesystem::path db_;
  std::mutex apis_mutex_;
  std::vector<std::unique_ptr<Api>> idle_apis_;
  QThreadPool pool_;
  Access access_;
  HostAllowList hosts_;
  bool tls_ = false;
  bool tls_self_signed_ = false;
  QString tls_fingerprint_;
  QString link_name_;  // base_url()'s host when not the address
  bool token_created_ = false;
  QHostAddress address_;
  quint16 port_ = 0;
  GuardedTcpServer* tcp_ = nullptr;  // a child of this server (bind)
  QMap<QString, QString> static_files_;  // served name -> resource path
  std::map<QWebSocket*, Watch> live_;
  QTimer poll_timer_;
  int64_t data_version_ = -1;
};

}  // namespace meshwork::web
