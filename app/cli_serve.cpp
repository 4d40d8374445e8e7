// `meshwork serve`: the run store for browsers (docs/web.md).
//   meshwork serve [--db PATH] [--listen ADDR:PORT] [--token-file PATH] [--public-name NAME]
//                  [--tls-cert FILE --tls-key FILE | --insecure-http] [limits]
// On 127.0.0.1 (the default) it serves this machine. Any other address needs the token (made
// once, 0600, printed once; every start prints a fresh one-time login link) and speaks TLS.
#include <QCoreApplication>
#include <QLoggingCategory>
#include <algorithm>
#include <csignal>
#include <iostream>

#include "app/commands.h"
#include "core/cli_args.h"
#include "core/store/paths.h"
#include "web/server.h"

namespace meshwork::cli {

namespace {
constexpr const char* kUsage =
    "usage: meshwork serve [--db PATH] [--listen ADDR:PORT] [--token-file PATH] [--public-name NAME]\n"
    "                      [--tls-cert FILE --tls-key FILE | --insecure-http]\n"
    "Serves the run store read-only to browsers: the runs list, each run live, and compare.\n"
    "  --db PATH           the run store (default $XDG_DATA_HOME/meshwork/runs.db)\n"
    "  --listen ADDR:PORT  default 127.0.0.1:8765; port 0 picks a free one. An address other\n"
    "                      than loopback requires the token (Authorization: Bearer TOKEN, or the\n"
    "                      cookie the printed one-time link sets)\n"
    "  --token-file PATH   where the token is kept, 0600 (default $XDG_CONFIG_HOME/meshwork/web-token)\n"
    "  --public-name NAME  a name browsers use for this server (a DNS alias, a proxy's name);\n"
    "                      repeatable. localhost, IP addresses and this machine's host name are\n"
    "                      always allowed; a request naming any other host is refused (421)\n"
    "  --tls-cert FILE     PEM certificate (chain) for HTTPS; with --tls-key. Off loopback without\n"
    "  --tls-key FILE      them a self-signed certificate is made at start and its SHA-256\n"
    "                      fingerprint printed: compare it with the one the browser shows\n"
    "  --insecure-http     off loopback, serve plain HTTP (the token, login link and session\n"
    "                      cookie then cross the network in clear)\n"
    "Limits (docs/web.md, \"Limits\"; the defaults suit a shared login node):\n"
    "  --max-connections N             connections in all (default 512; never more than the\n"
    "                                  descriptor limit allows)\n"
    "  --max-connections-per-client N  connections per client address (default 64)\n"
    "  --max-live-per-client N         live pages (WebSockets) per client address (default 32)\n"
    "  --idle-timeout SECONDS          a connection idle this long is closed (default 60)\n";

void quit_on_signal(int) { QCoreApplication::quit(); }
}  // namespace

int serve_main(const Args& args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::cout << kUsage;
    return kExitOk;
  }
  auto f = parse_args(args,
                      {{"--db", "PATH", ""}, {"--listen", "ADDR:PORT", ""}, {"--token-file", "PATH", ""},
                       {"--public-name", "NAME", ""}, {"--tls-cert", "FILE", ""}, {"--tls-key", "FILE", ""},
                       {"--insecure-http", "", ""}, {"--max-connections", "N", ""},
                       {"--max-connections-per-client", "N", ""}, {"--max-live-per-client", "N", ""},
                       {"--idle-timeout", "SECONDS", ""}},
                      "meshwork serve");
  if (!f) return fail(f.error());
  if (!f->positional.empty()) return fail(Error{"argument", f->positional[0], "serve takes no arguments (see --help)"});
  web::WebServer::Options o;
  o.db = f->value("--db") ? std::filesystem::path(*f->value("--db")) : store::default_db_path();
  if (auto l = f->value("--listen")) {
    auto parsed = web::parse_listen(*l);
    if (!parsed) return fail(parsed.error());
    o.listen = *parsed;
  }
  if (auto t = f->value("--token-file")) o.token_file = *t;
  for (const auto& [flag, value] : f->given) {
    if (flag != "--public-name") continue;
    if (!web::parse_host_header(value) || value.find(':') != std::string::npos)
      return fail(Error{"--public-name", value, "a host name (letters, digits, '-', '.'; no port)"});
    o.public_names.push_back(value);
  }
  if (auto c = f->value("--tls-cert")) o.tls_cert = *c;
  if (auto k = f->value("--tls-key")) o.tls_key = *k;
  o.insecure_http = f->has("--insecure-http");
  if (auto v = f->value("--max-connections")) {
    auto n = parse_integer("--max-connections", *v, 8, 1 << 20, "a whole number of connections, at least 8");
    if (!n) return fail(n.error());
    o.limits.max_connections = static_cast<int>(*n);
  }
  if (auto v = f->value("--max-connections-per-client")) {
    auto n = parse_integer("--max-connections-per-client", *v, 1, 1 << 20, "a whole number of connections, at least 1");
    if (!n) return fail(n.error());
    o.limits.max_connections_per_client = static_cast<int>(*n);
  }
  if (auto v = f->value("--max-live-per-client")) {
    auto n = parse_integer("--max-live-per-client", *v, 1, 1 << 20, "a whole number of live pages, at least 1");
    if (!n) return fail(n.error());
    o.limits.max_live_per_client = static_cast<int>(*n);
  }
  if (auto v = f->value("--idle-timeout")) {
    auto n = parse_integer("--idle-timeout", *v, 1, 24 * 3600, "whole seconds, 1 to 86400");
    if (!n) return fail(n.error());
    o.limits.idle_timeout_ms = static_cast<int>(*n * 1000);
  }
  if (!f->value("--max-connections-per-client"))
    o.limits.max_connections_per_client = std::min(o.limits.max_connections_per_client, o.limits.max_connections);
  if (o.limits.max_connections_per_client > o.limits.max_connections)
    return fail(Error{"--max-connections-per-client", std::to_string(o.limits.max_connections_per_client),
                      "at most --max-connections (" + std::to_string(o.limits.max_connections) + ")"});
  int argc = 1;
  char name[] = "meshwork";
  char* argv[] = {name, nullptr};
  QCoreApplication app(argc, argv);
  // Qt HTTP Server warns once per WebSocket upgrade a handler refuses (a rebinding Host is
  // answered 421 that way): the server logs nothing per request, so a hostile client cannot
  // fill the terminal or a log file.
  QLoggingCategory::setFilterRules(QStringLiteral("qt.httpserver.warning=false"));
  auto server = web::WebServer::start(o);
  if (!server) return fail(server.error());
  // Scripts (and the workbench, which starts this as a child) read the first line for the URL.
  std::cout << "meshwork serve: " << (*server)->base_url().toStdString() << "/ (store " << o.db.string()
            << "; read-only; Ctrl-C stops)" << std::endl;
  if ((*server)->tls())
    std::cout << "TLS: " << ((*server)->tls_self_signed() ? "self-signed certificate made now" : "certificate from --tls-cert")
              << ", SHA-256 fingerprint " << (*server)->tls_fingerprint().toStdString() << std::endl;
  else if (!o.listen.address.isLoopback())
    std::cout << "warning: plain HTTP off loopback (--insecure-http): the login link, the session cookie and "
                 "Bearer tokens cross the network in clear"
              << std::endl;
  if ((*server)->token_required()) {
    const auto file = o.token_file.empty() ? web::default_token_path() : o.token_file;
    if ((*server)->token_created())
      std::cout << "token (made now, shown once; kept 0600 in " << file.string() << "): " << (*server)->token()
                << std::endl;
    else
      std::cout << "token: in " << file.string() << " (0600)" << std::endl;
    auto link = (*server)->new_login_link();
    if (!link) return fail(link.error());
    std::cout << "open once to sign this browser in (valid 10 minutes; the session lasts 12 hours or until "
                 "this server stops): "
              << link->toStdString() << std::endl;
  }
  std::signal(SIGINT, quit_on_signal);
  std::signal(SIGTERM, quit_on_signal);
  return app.exec() == 0 ? kExitOk : kExitError;
}

}  // namespace meshwork::cli
