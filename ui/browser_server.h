// View -> Serve in the browser: runs `meshwork serve` on the workbench's store as a child process
// (127.0.0.1, a free port) and hands its URL over once it listens. A child, not a server inside
// the GUI: the web server's queries never share the GUI thread or the store worker's connection,
// and closing the workbench stops it.
#pragma once

#include <QObject>
#include <QProcess>
#include <QUrl>

namespace meshwork::ui {

class BrowserServer : public QObject {
  Q_OBJECT
 public:
  explicit BrowserServer(QObject* parent = nullptr);
  ~BrowserServer() override;

  // Starts serving `db` (no-op while it already serves it: ready() is emitted again).
  void start(const QString& db);
  void stop();
  bool serving() const { return url_.isValid(); }
  QUrl url() const { return url_; }
  // The `meshwork` executable beside the workbench; tests point it at the build's.
  void set_program(const QString& program) { program_ = program; }

  // Opens `url` in the user's browser: $BROWSER's first command when set, else xdg-open (as Qt
  // does), started detached so the browser outlives the workbench. A browser that cannot start,
  // or that exits with an error within a few seconds (Chromium refuses to run as root without
  // --no-sandbox), is reported by browser_failed() with its words and the URL to open by hand.
  void open_in_browser(const QUrl& url);

 Q_SIGNALS:
  void ready(const QUrl& url);
  void failed(const QString& message);
  void browser_failed(const QString& message);

 private:
  void read_output();
  QString program_;
  QString db_;
  QProcess process_;
  QByteArray output_;
  QUrl url_;
  bool stopping_ = false;
};

}  // namespace meshwork::ui
