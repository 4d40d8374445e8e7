#include "ui/browser_server.h"

#include <QCoreApplication>
#include <QDir>
#include <QRegularExpression>

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

}  // namespace meshwork::ui
