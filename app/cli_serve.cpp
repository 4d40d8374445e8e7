// `meshwork serve`: the run store for browsers (docs/web.md).
//   meshwork serve [--db PATH] [--listen ADDR:PORT] [--token-file PATH]
// On 127.0.0.1 (the default) it serves this machine. Any other address needs the token: made
// once (0600) and printed once; every start prints a fresh one-time login link.
#include <QCoreApplication>
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
    "usage: meshwork serve [--db PATH] [--listen ADDR:PORT] [--token-file PATH]\n"
    "Serves the run store read-only to browsers: the runs list, each run live, and compare.\n"
    "  --db PATH           the run store (default $XDG_DATA_HOME/meshwork/runs.db)\n"
    "  --listen ADDR:PORT  default 127.0.0.1:8765; port 0 picks a free one. An address other\n"
    "                      than loopback requires the token (Authorization: Bearer TOKEN, or the\n"
    "                      cookie the printed one-time link sets)\n"
    "  --token-file PATH   where the token is kept, 0600 (default $XDG_CONFIG_HOME/meshwork/web-token)\n";

void quit_on_signal(int) { QCoreApplication::quit(); }
}  // namespace

int serve_main(const Args& args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::cout << kUsage;
    return kExitOk;
  }
  auto f = parse_args(args, {{"--db", "PATH", ""}, {"--listen", "ADDR:PORT", ""}, {"--token-file", "PATH", ""}},
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
  int argc = 1;
  char name[] = "meshwork";
  char* argv[] = {name, nullptr};
  QCoreApplication app(argc, argv);
  auto server = web::WebServer::start(o);
  if (!server) return fail(server.error());
  // Scripts (and the workbench, which starts this as a child) read the first line for the URL.
  std::cout << "meshwork serve: " << (*server)->base_url().toStdString() << "/ (store " << o.db.string()
            << "; read-only; Ctrl-C stops)" << std::endl;
  if ((*server)->token_required()) {
    const auto file = o.token_file.empty() ? web::default_token_path() : o.token_file;
    if ((*server)->token_created())
      std::cout << "token (made now, shown once; kept 0600 in " << file.string() << "): " << (*server)->token()
                << std::endl;
    else
      std::cout << "token: in " << file.string() << " (0600)" << std::endl;
    auto link = (*server)->new_login_link();
    if (!link) return fail(link.error());
    std::cout << "open once to sign this browser in (valid 10 minutes): " << link->toStdString() << std::endl;
  }
  std::signal(SIGINT, quit_on_signal);
  std::signal(SIGTERM, quit_on_signal);
  return app.exec() == 0 ? kExitOk : kExitError;
}

}  // namespace meshwork::cli
