// A real headless Chromium driven over the Chrome DevTools Protocol, for the web view's tests
// (docs/web.md). Synchronous: each call sends one CDP command and spins a local QEventLoop until
// its answer (or the timeout), so a GoogleTest test only needs a QCoreApplication. Chromium runs
// in its own process group with a fresh profile; the destructor kills the whole group (renderer,
// GPU and zygote children included) and removes the profile.
//
// The binary is $MESHWORK_CHROMIUM when set, else `chromium` (Debian) on PATH. As root Chromium
// refuses to start without --no-sandbox, which start() always passes.
#pragma once

#include <QHash>
#include <QJsonObject>
#include <QJsonValue>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QVariantMap>
#include <functional>
#include <memory>
#include <optional>

class QProcess;
class QWebSocket;

namespace meshwork::testing {

class HeadlessChromium {
 public:
  // nullptr and *error set when Chromium is missing, fails to start, or its page target cannot be
  // reached within ~20 s.
  static std::unique_ptr<HeadlessChromium> start(QString* error);
  ~HeadlessChromium();
  HeadlessChromium(const HeadlessChromium&) = delete;
  HeadlessChromium& operator=(const HeadlessChromium&) = delete;

  // Page.navigate, then waits for the page's load event. A failed navigation (connection refused,
  // DNS, ...) is an error; an HTTP error status is not (the page still loads).
  bool navigate(const QString& url, QString* error, int timeout_ms = 20000);
  // Runtime.evaluate (returnByValue, awaitPromise). A thrown exception or rejected promise is an
  // error: "<text>: <description>". `undefined` comes back as QJsonValue::Undefined.
  std::optional<QJsonValue> evaluate(const QString& expression, QString* error, int timeout_ms = 10000);
  // Evaluates `expression` every 50 ms until it is truthy; false (and *error) on timeout. Exceptions
  // while polling are not fatal (the page may not have defined things yet); the last one is
  // reported on timeout.
  bool wait_for(const QString& expression, int timeout_ms, QString* error);
  // Page.captureScreenshot of the viewport as PNG.
  bool screenshot(const QString& path, QString* error);
  // Extra HTTP headers sent with every later request of the page (e.g. Authorization, Cookie).
  bool set_extra_headers(const QVariantMap& headers, QString* error);
  // Uncaught exceptions and console.error() messages seen since start().
  QStringList console_errors() const { return console_errors_; }

 private:
  HeadlessChromium() = default;
  bool launch(QString* error);
  // Sends one CDP command and waits for its answer's "result"; protocol errors become *error.
  std::optional<QJsonObject> call(const QString& method, const QJsonObject& params, QString* error,
                                  int timeout_ms = 10000);
  // Spins the event loop until done() or timeout_ms; false on timeout or when Chromium went away.
  bool spin_until(const std::function<bool()>& done, int timeout_ms);
  void on_message(const QString& text);
  QString log_tail() const;

  QTemporaryDir dir_;
  std::unique_ptr<QProcess> process_;
  std::unique_ptr<QWebSocket> socket_;
  qint64 pid_ = 0;
  int next_id_ = 1;
  QSet<int> pending_;
  QHash<int, QJsonObject> responses_;
  int load_events_ = 0;
  bool network_enabled_ = false;
  QStringList console_errors_;
};

}  // namespace meshwork::testing
