// Probes nodes off the GUI thread through remote's probe (SSH, or directly for "local"), one pool
// task per node so each card shows its own progress. Results come back as queued signals. An
// unknown host key is not accepted here: it is reported with its fingerprint, and the node is
// probed again only after the user accepts that exact key (accept_host_key).
#pragma once

#include <QHash>
#include <QObject>
#include <QThreadPool>

#include "remote/ssh_session.h"
#include "ui/cluster_model.h"

namespace meshwork::ui {

class NodeProber : public QObject {
  Q_OBJECT
 public:
  explicit NodeProber(QObject* parent = nullptr);
  ~NodeProber() override;

  // ssh_config / known_hosts / identity files (empty: the user's own). Defaults come from the
  // environment: MESHWORK_SSH_CONFIG, MESHWORK_KNOWN_HOSTS, MESHWORK_IDENTITY.
  void set_ssh_options(const remote::SshOptions& options) { options_ = options; }
  const remote::SshOptions& ssh_options() const { return options_; }

  void probe(const QString& host);
  // Trust `fingerprint` for `host` (written to known_hosts by remote) and probe it again.
  void accept_host_key(const QString& host, const QString& fingerprint);
  bool busy() const { return running_ > 0; }

 Q_SIGNALS:
  void progress(const QString& host, int percent, const QString& text);
  void probed(const QString& host, const meshwork::ui::NodeInfo& info);
  void failed(const QString& host, const QString& error);
  void host_key_unknown(const QString& host, const QString& fingerprint);
  void idle();  // no probe running any more

 private:
  void start(const QString& host, const QString& accepted_fingerprint);

  remote::SshOptions options_;
  QThreadPool pool_;
  int running_ = 0;
};

}  // namespace meshwork::ui
