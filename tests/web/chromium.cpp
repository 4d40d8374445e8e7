#include "chromium.h"

#include <QByteArray>
#include <QDeadlineTimer>
#include <QEventLoop>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QNetworkAccessManager>
#include <QNetworkProxy>
#include <QNetworkReply>
#include <QProcess>
#include <QStandardPaths>
#include <QThread>
#include <QTimer>
#include <QWebSocket>
#include <csignal>
#include <unistd.h>

namespace meshwork::testing {

namespace {
void set_error(QString* error, const QString& text) {
  if (error) *error = text;
}
}  // namespace

std::unique_ptr<HeadlessChromium> HeadlessChromium::start(QString* error) {
  std::unique_ptr<HeadlessChromium> browser(new HeadlessChromium);
  if (!browser->launch(error)) return nullptr;  // the destructor cleans up whatever was started
  return browser;
}

bool HeadlessChromium::launch(QString* error) {
  QString program = qEnvironmentVariable("MESHWORK_CHROMIUM");
  if (program.isEmpty()) program = QStandardPaths::findExecutable("chromium");
  if (program.isEmpty()) return set_error(error, "chromium not found (install Debian `chromium`)"), false;
  if (!dir_.isValid()) return set_error(error, "cannot create a temporary directory"), false;

  // The profile lives in its own subdirectory so the log beside it survives for error messages.
  const QString profile = dir_.filePath("profile");
  process_ = std::make_unique<QProcess>();
  process_->setProgram(program);
  // --disable-dev-shm-usage: a container's /dev/shm is often 64 MB, where Chromium's renderer
  // would crash on a big page; its shared memory then lives in /tmp.
  process_->setArguments({"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--remote-debugging-port=0",
                          "--user-data-dir=" + profile, "--no-first-run", "--no-default-browser-check",
                          "--disable-extensions", "--window-size=1280,900",
                          // the web view's TLS tests serve a self-signed certificate made at start
                          "--ignore-certificate-errors", "about:blank"});
  process_->setStandardOutputFile(QProcess::nullDevice());
  process_->setStandardErrorFile(dir_.filePath("chromium.log"));
  // Chromium forks renderer/GPU/zygote children that outlive a killed parent; a session of its own
  // lets the destructor kill them all with one kill(-pgid).
  process_->setChildProcessModifier([] { ::setsid(); });
  process_->start();
  if (!process_->waitForStarted(10000))
    return set_error(error, "cannot start " + program + ": " + process_->errorString()), false;
  pid_ = process_->processId();

  // Port 0 lets Chromium pick a free port (no clashes between parallel tests); it writes the port
  // it got to DevToolsActivePort ("PORT\n/devtools/browser/ID") once it listens.
  QDeadlineTimer deadline(20000);
  int port = 0;
  while (port <= 0) {
    QFile file(profile + "/DevToolsActivePort");
    if (file.open(QIODevice::ReadOnly)) port = QString::fromLatin1(file.readLine()).trimmed().toInt();
    if (port > 0) break;
    if (process_->state() == QProcess::NotRunning)
      return set_error(error, "chromium exited during startup:\n" + log_tail()), false;
    if (deadline.hasExpired())
      return set_error(error, "chromium wrote no DevToolsActivePort within 20 s:\n" + log_tail()), false;
    process_->waitForFinished(50);  // a 50 ms sleep that wakes early if Chromium dies
  }

  // The page target of about:blank may be listed a moment after the port opens: retry until found.
  QNetworkAccessManager network;
  network.setProxy(QNetworkProxy::NoProxy);  // a proxy from the environment must not see loopback
  QString ws_url;
  while (ws_url.isEmpty()) {
    std::unique_ptr<QNetworkReply> reply(
        network.get(QNetworkRequest(QUrl(QString("http://127.0.0.1:%1/json/list").arg(port)))));
    spin_until([&] { return reply->isFinished(); }, std::max<qint64>(deadline.remainingTime(), 1));
    if (reply->isFinished() && reply->error() == QNetworkReply::NoError) {
      for (const QJsonValue target : QJsonDocument::fromJson(reply->readAll()).array())
        if (target["type"].toString() == "page") {
          ws_url = target["webSocketDebuggerUrl"].toString();
          break;
        }
    }
    if (!ws_url.isEmpty()) break;
    if (deadline.hasExpired())
      return set_error(error, "no page target in /json/list within 20 s: " + reply->errorString()), false;
    QThread::msleep(50);
  }

  socket_ = std::make_unique<QWebSocket>();
  socket_->setProxy(QNetworkProxy::NoProxy);
  // Connected before any loop spins so every state change is seen in arrival order.
  QObject::connect(socket_.get(), &QWebSocket::textMessageReceived,
                   [this](const QString& text) { on_message(text); });
  socket_->open(QUrl(ws_url));
  if (!spin_until([&] { return socket_->state() == QAbstractSocket::ConnectedState; },
                  std::max<qint64>(deadline.remainingTime(), 1000)))
    return set_error(error, "cannot connect to " + ws_url + ": " + socket_->errorString()), false;
  for (const char* domain : {"Runtime.enable", "Page.enable"})
    if (!call(domain, {}, error)) return false;
  return true;
}

HeadlessChromium::~HeadlessChromium() {
  if (socket_) {
    QObject::disconnect(socket_.get(), nullptr, nullptr, nullptr);
    socket_->abort();
  }
  if (process_) {
    // Chromium was started as a session (and group) leader, so its pid is the group id: SIGKILL to
    // the group takes the children too, even if the parent already died.
    if (pid_ > 0) ::kill(-static_cast<pid_t>(pid_), SIGKILL);
    process_->waitForFinished(5000);
  }
  // Children may still be exiting (and holding profile files) a moment after SIGKILL; retry.
  for (int attempt = 0; attempt < 20 && dir_.isValid() && !dir_.remove(); ++attempt) QThread::msleep(50);
}

bool HeadlessChromium::spin_until(const std::function<bool()>& done, int timeout_ms) {
  QDeadlineTimer deadline(timeout_ms);
  while (!done()) {
    if (deadline.hasExpired()) return false;
    if (process_ && process_->state() == QProcess::NotRunning) return false;
    if (socket_ && socket_->state() == QAbstractSocket::UnconnectedState && !pending_.isEmpty()) return false;
    // Each wake-up source below only quits the loop; the state is re-checked at the top.
    QEventLoop loop;
    QTimer::singleShot(std::max<qint64>(deadline.remainingTime(), 0), &loop, &QEventLoop::quit);
    QTimer::singleShot(50, &loop, &QEventLoop::quit);  // polls things that emit no signal (isFinished)
    if (socket_) {
      QObject::connect(socket_.get(), &QWebSocket::textMessageReceived, &loop, &QEventLoop::quit);
      QObject::connect(socket_.get(), &QWebSocket::stateChanged, &loop, &QEventLoop::quit);
    }
    loop.exec();
  }
  return true;
}

void HeadlessChromium::on_message(const QString& text) {
  const QJsonObject message = QJsonDocument::fromJson(text.toUtf8()).object();
  if (message.contains("id")) {
    const int id = message["id"].toInt();
    if (pending_.remove(id)) responses_.insert(id, message);  // late answers to timed-out calls are dropped
    return;
  }
  const QString method = message["method"].toString();
  const QJsonObject params = message["params"].toObject();
  if (method == "Page.loadEventFired") {
    ++load_events_;
  } else if (method == "Runtime.exceptionThrown") {
    const QJsonObject details = params["exceptionDetails"].toObject();
    const QString description = details["exception"]["description"].toString();
    console_errors_ << (description.isEmpty() ? details["text"].toString() : description);
  } else if (method == "Runtime.consoleAPICalled" && params["type"].toString() == "error") {
    QStringList parts;
    for (const QJsonValue arg : params["args"].toArray()) {
      const QJsonValue value = arg["value"];
      parts << (value.isString() ? value.toString()
                : value.isUndefined() ? arg["description"].toString()
                                      : QString::fromUtf8(QJsonDocument(QJsonArray{value}).toJson(QJsonDocument::Compact)).mid(1).chopped(1));
    }
    console_errors_ << parts.join(' ');
  }
}

std::optional<QJsonObject> HeadlessChromium::call(const QString& method, const QJsonObject& params, QString* error,
                                                   int timeout_ms) {
  if (!socket_ || socket_->state() != QAbstractSocket::ConnectedState)
    return set_error(error, method + ": not connected to chromium"), std::nullopt;
  const int id = next_id_++;
  pending_.insert(id);
  socket_->sendTextMessage(QString::fromUtf8(
      QJsonDocument(QJsonObject{{"id", id}, {"method", method}, {"params", params}}).toJson(QJsonDocument::Compact)));
  if (!spin_until([&] { return responses_.contains(id); }, timeout_ms)) {
    pending_.remove(id);
    if (process_->state() == QProcess::NotRunning || socket_->state() != QAbstractSocket::ConnectedState)
      return set_error(error, method + ": chromium went away:\n" + log_tail()), std::nullopt;
    return set_error(error, QString("%1: no answer within %2 ms").arg(method).arg(timeout_ms)), std::nullopt;
  }
  const QJsonObject response = responses_.take(id);
  if (response.contains("error")) {
    const QJsonObject e = response["error"].toObject();
    return set_error(error, method + ": " + e["message"].toString() + " " + e["data"].toString()), std::nullopt;
  }
  return response["result"].toObject();
}

bool HeadlessChromium::navigate(const QString& url, QString* error, int timeout_ms) {
  QDeadlineTimer deadline(timeout_ms);
  // Counting load events from before the command: the event may arrive before Page.navigate's answer.
  const int loads_before = load_events_;
  const auto result = call("Page.navigate", {{"url", url}}, error, timeout_ms);
  if (!result) return false;
  if (result->contains("errorText"))
    return set_error(error, "navigate " + url + ": " + (*result)["errorText"].toString()), false;
  // No loaderId means a same-document navigation (a #fragment): no load event will come.
  if (!result->contains("loaderId")) return true;
  if (!spin_until([&] { return load_events_ > loads_before; }, std::max<qint64>(deadline.remainingTime(), 0)))
    return set_error(error, QString("navigate %1: no load event within %2 ms").arg(url).arg(timeout_ms)), false;
  return true;
}

std::optional<QJsonValue> HeadlessChromium::evaluate(const QString& expression, QString* error, int timeout_ms) {
  const auto result = call("Runtime.evaluate",
                           {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}}, error,
                           timeout_ms);
  if (!result) return std::nullopt;
  if (result->contains("exceptionDetails")) {
    const QJsonObject details = (*result)["exceptionDetails"].toObject();
    return set_error(error, details["text"].toString() + ": " + details["exception"]["description"].toString()),
           std::nullopt;
  }
  const QJsonObject remote = (*result)["result"].toObject();
  // NaN, Infinity and -0 are not JSON: CDP sends them as strings in unserializableValue.
  if (remote.contains("unserializableValue")) {
    const QString v = remote["unserializableValue"].toString();
    return QJsonValue(v == "NaN" ? qQNaN() : v == "Infinity" ? qInf() : v == "-Infinity" ? -qInf() : v.toDouble());
  }
  return remote["value"];  // Undefined when the expression's value is undefined
}

bool HeadlessChromium::wait_for(const QString& expression, int timeout_ms, QString* error) {
  QDeadlineTimer deadline(timeout_ms);
  QString last_error;
  for (;;) {
    QString eval_error;
    const auto value =
        evaluate("!!(" + expression + ")", &eval_error, std::max<qint64>(deadline.remainingTime(), 1));
    if (value && value->toBool()) return true;
    if (!value) last_error = eval_error;
    if (process_->state() == QProcess::NotRunning)
      return set_error(error, "chromium went away:\n" + log_tail()), false;
    if (deadline.hasExpired()) break;
    spin_until([] { return false; }, std::min<qint64>(50, deadline.remainingTime()));
  }
  set_error(error, QString("timed out after %1 ms waiting for %2%3")
                       .arg(timeout_ms)
                       .arg(expression, last_error.isEmpty() ? QString() : " (last error: " + last_error + ")"));
  return false;
}

bool HeadlessChromium::screenshot(const QString& path, QString* error) {
  const auto result = call("Page.captureScreenshot", {{"format", "png"}}, error, 20000);
  if (!result) return false;
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      file.write(QByteArray::fromBase64((*result)["data"].toString().toLatin1())) < 0)
    return set_error(error, "cannot write " + path + ": " + file.errorString()), false;
  return true;
}

bool HeadlessChromium::set_extra_headers(const QVariantMap& headers, QString* error) {
  if (!network_enabled_) {
    if (!call("Network.enable", {}, error)) return false;
    network_enabled_ = true;
  }
  QJsonObject values;  // CDP wants every header value as a string
  for (auto it = headers.begin(); it != headers.end(); ++it) values.insert(it.key(), it.value().toString());
  return call("Network.setExtraHTTPHeaders", {{"headers", values}}, error).has_value();
}

QString HeadlessChromium::log_tail() const {
  QFile file(dir_.filePath("chromium.log"));
  if (!file.open(QIODevice::ReadOnly)) return "(no chromium log)";
  const QByteArray log = file.readAll();
  return QString::fromUtf8(log.right(2000));
}

}  // namespace meshwork::testing
