#include "ui/browser_server.h"

#include <QCoreApplication>
#include <QDesktopServices>
#include <QDir>
#include <QFile>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryFile>
#include <QTimer>
#include <memory>

namespace meshwork::ui {

BrowserServer::BrowserServer(QObject* parent)
    : QObject(parent), program_(QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("meshwork"))) {
  connect(&process_, &QProcess::readyReadStandardOutput, this, &BrowserServer::read_output);
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus) {
    url_ = QUrl();
    if (stopping_) return;  // stop() asked for it
    const QString err = QString::fromUtf8(process_.readAllStandardError()).trimmed();
    Q_EMIT failed(err.isEmpty() ? tr("meshwork serve exited with code %1").arg(code) : err);
  });
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) Q_EMIT failed(tr("%1 could not be started: %2").arg(program_, process_.errorString()));
  });
}

BrowserServer::~BrowserServer() { stop(); }

void BrowserServer::start(const QString& db) {
  if (process_.state() != QProcess::NotRunning && db == db_) {
    if (url_.isValid()) Q_EMIT ready(url_);
    return;
  }
  stop();
  db_ = db;
  output_.clear();
  url_ = QUrl();
  process_.start(program_, {QStringLiteral("serve"), QStringLiteral("--db"), db, QStringLiteral("--listen"),
                            QStringLiteral("127.0.0.1:0")});
}

void BrowserServer::stop() {
  if (process_.state() == QProcess::NotRunning) return;
  stopping_ = true;
  process_.terminate();  // SIGTERM: the server quits its event loop and closes its sockets
  if (!process_.waitForFinished(3000)) {
    process_.kill();
    process_.waitForFinished(1000);
  }
  stopping_ = false;
  url_ = QUrl();
}

void BrowserServer::read_output() {
  output_ += process_.readAllStandardOutput();
  if (url_.isValid()) return;
  // Its first line: "meshwork serve: http://127.0.0.1:PORT/ (store ...)".
  static const QRegularExpression first(QStringLiteral("^meshwork serve: (http://\\S+/) "));
  const auto m = first.match(QString::fromUtf8(output_));
  if (!m.hasMatch()) return;
  url_ = QUrl(m.captured(1));
  Q_EMIT ready(url_);
}

void BrowserServer::open_in_browser(const QUrl& url) {
#if defined(Q_OS_UNIX) && !defined(Q_OS_MACOS)
  // xdg-open and $BROWSER report a failure only through their exit code and stderr: a shell
  // started detached runs the browser, keeps its stderr in a file and appends the exit code
  // when it ends; the file is read for a few seconds. A browser that stays up is left alone.
  const QString browser = qEnvironmentVariable("BROWSER").section(':', 0, 0).trimmed();
  const QString program = browser.isEmpty() ? QStringLiteral("xdg-open") : browser;
  auto log = std::make_shared<QTemporaryFile>(QDir::temp().filePath(QStringLiteral("meshwork-browser-XXXXXX.log")));
  if (!log->open()) {
    Q_EMIT browser_failed(tr("The browser was not started (no temporary file: %1). Open %2 yourself.")
                              .arg(log->errorString(), url.toString()));
    return;
  }
  log->close();
  const QString script = QStringLiteral("\"$0\" \"$1\" >/dev/null 2>\"$2\"; echo \"meshwork-exit:$?\" >>\"$2\"");
  if (!QProcess::startDetached(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), script, program, url.toString(), log->fileName()})) {
    Q_EMIT browser_failed(tr("/bin/sh could not be started to open the browser. Open %1 yourself.").arg(url.toString()));
    return;
  }
  auto* poll = new QTimer(this);
  auto ticks = std::make_shared<int>(0);
  connect(poll, &QTimer::timeout, this, [this, poll, ticks, log, program, url] {
    QFile f(log->fileName());
    const QString text = f.open(QIODevice::ReadOnly) ? QString::fromLocal8Bit(f.readAll()) : QString();
    static const QRegularExpression exit_line(QStringLiteral("meshwork-exit:(\\d+)\\s*$"));
    const auto m = exit_line.match(text);
    if (!m.hasMatch() && ++*ticks < 50) return;  // 10 s: a browser still up by then started
    poll->deleteLater();
    if (!m.hasMatch() || m.captured(1) == QLatin1String("0")) return;
    const QString said = text.left(m.capturedStart()).trimmed().section('\n', -4);
    const QString why = m.captured(1) == QLatin1String("127") ? tr("%1 was not found").arg(program)
                        : said.isEmpty() ? tr("%1 exited with code %2").arg(program, m.captured(1))
                                         : tr("%1 exited with code %2: %3").arg(program, m.captured(1), said);
    Q_EMIT browser_failed(tr("The browser did not open (%1). The server runs: open %2 yourself.").arg(why, url.toString()));
  });
  poll->start(200);
#else
  if (!QDesktopServices::openUrl(url))
    Q_EMIT browser_failed(tr("The browser did not open. The server runs: open %1 yourself.").arg(url.toString()));
#endif
}

}  // namespace meshwork::ui
