#include "ui/node_prober.h"

#include <QMetaObject>
#include <algorithm>

#include "remote/probe.h"
#include "core/handover.h"

namespace meshwork::ui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }

// remote's probe result as the card shows it.
NodeInfo to_ui(const QString& host, const remote::NodeInfo& r) {
  NodeInfo n;
  n.host = host;
  n.hostname = q(r.hostname);
  n.state = NodeInfo::State::online;
  n.progress = 100;
  n.cpu_cores = r.cpus;
  n.memory_bytes = double(r.mem_total_bytes);
  for (const remote::GpuInfo& g : r.gpus)
    n.gpus.push_back({q(g.name), g.memory_total_mib > 0 ? double(g.memory_total_mib) * 1048576.0 : 0.0});
  // The weakest GPU-to-GPU link bounds a collective over the node's GPUs: NV# is NVLink, the
  // PCIe path kinds (PIX, PXB, PHB, NODE, SYS) mean tp traffic crosses PCIe or the CPU.
  if (r.gpus.size() > 1) {
    const std::string& w = r.gpu_link;
    if (w.rfind("NV", 0) == 0) {
      n.links = QStringLiteral("NVLink (%1) between all GPUs").arg(q(w));
      n.fast_links = true;
    } else if (!w.empty()) {
      n.links = QStringLiteral("PCIe only (weakest path %1)").arg(q(w));
      n.fast_links = false;
    } else {
      n.links = QStringLiteral("unknown (no nvidia-smi topo)");
    }
  }
  for (const remote::IbPort& p : r.ib_ports) {
    QString s = QStringLiteral("%1/%2 %3").arg(q(p.device)).arg(p.port).arg(p.roce() ? "RoCE" : "IB");
    if (p.rate_gbps > 0) s += QStringLiteral(" %1 Gb/s").arg(p.rate_gbps);
    if (!p.active()) s += QStringLiteral(" (%1)").arg(q(p.state));
    n.ib_ports << s;
  }
  // One rank per GPU; on CPU nodes up to 4 ranks (each gets cores/ranks threads), which the
  // user can change on the card.
  n.slots = n.has_gpus() ? static_cast<int>(n.gpus.size()) : std::clamp(r.cpus, 1, 4);
  if (!r.warnings.empty()) {
    QStringList w;
    for (const auto& s : r.warnings) w << q(s);
    n.error = w.join("\n");
  }
  return n;
}

remote::SshOptions options_from_env() {
  remote::SshOptions o;
  if (const char* v = std::getenv("MESHWORK_SSH_CONFIG")) o.ssh_config = v;
  if (const char* v = std::getenv("MESHWORK_KNOWN_HOSTS")) o.known_hosts = v;
  if (const char* v = std::getenv("MESHWORK_IDENTITY")) o.identity = v;
  return o;
}
}  // namespace

NodeProber::NodeProber(QObject* parent) : QObject(parent), options_(options_from_env()) {
  pool_.setMaxThreadCount(16);  // probes wait on the network, not on the CPU
}

NodeProber::~NodeProber() { pool_.waitForDone(); }

void NodeProber::probe(const QString& host) { start(host, {}); }

void NodeProber::accept_host_key(const QString& host, const QString& fingerprint) {
  start(host, fingerprint);
}

void NodeProber::start(const QString& host, const QString& accepted_fingerprint) {
  auto spec = remote::parse_host_spec(host.toStdString());
  if (!spec) {
    Q_EMIT failed(host, q(spec.error().message()));
    return;
  }
  ++running_;
  Q_EMIT progress(host, 5, tr("connecting"));
  remote::SshOptions options = options_;
  // Trust exactly the key the user saw, nothing else.
  const std::string fp = accepted_fingerprint.toStdString();
  if (!fp.empty())
    options.on_unknown_host_key = [fp](const std::string&, const std::string& seen) { return seen == fp; };
  pool_.start(handed_over([this, host, spec = *spec, options] {
    auto report = [this, host](const remote::ProbeProgress& p) {
      const int pct = p.stage == "connecting" ? 20 : p.stage == "probing" ? 60 : 100;
      const QString text = q(p.stage) + (p.message.empty() ? QString() : ": " + q(p.message));
      QMetaObject::invokeMethod(this, handed_over([this, host, pct, text] { Q_EMIT progress(host, pct, text); }),
                                Qt::QueuedConnection);
    };
    auto results = remote::probe_hosts({spec}, options, report);
    QMetaObject::invokeMethod(
        this,
        handed_over([this, host, results = std::move(results)] {
          --running_;
          if (results.empty()) {
            Q_EMIT failed(host, tr("probe returned nothing"));
          } else if (const auto& r = results.front(); r.info) {
            Q_EMIT probed(host, to_ui(host, *r.info));
          } else if (r.error && r.error->kind == remote::ConnectFailure::host_key_unknown &&
                     !r.error->fingerprint.empty()) {
            Q_EMIT host_key_unknown(host, q(r.error->fingerprint));
          } else if (r.error) {
            Q_EMIT failed(host, q(r.error->error.message()));
          } else {
            Q_EMIT failed(host, tr("probe failed without a reason"));
          }
          if (running_ == 0) Q_EMIT idle();
        }),
        Qt::QueuedConnection);
  }));
}

}  // namespace meshwork::ui
