// The cluster panel against real sshd's in network namespaces (tests/cluster fixture): a node
// with an unknown host key waits for the user's yes, shows the fingerprint, and after acceptance
// its card fills with what remote's probe found. Skips when the fixture is not up.
#include <QDir>
#include <QFile>
#include <QTest>

#include "test_support.h"
#include "ui/cluster_panel.h"
#include "ui/node_card.h"
#include "ui/node_prober.h"
#include "ui/plan_state.h"

using namespace meshwork;
using namespace meshwork::ui;

class ClusterProbeTest : public QObject {
  Q_OBJECT
  QTemporaryDir settings_;
  QTemporaryDir tmp_;

  void use_test_cluster(MainWindow& w) {
    remote::SshOptions o;
    o.ssh_config = MESHWORK_TEST_CLUSTER_DIR "/ssh_config";
    o.identity = MESHWORK_TEST_CLUSTER_DIR "/id_ed25519";
    o.known_hosts = tmp_.filePath("known_hosts").toStdString();  // empty: every key is unknown
    w.prober()->set_ssh_options(o);
    w.cluster_panel()->set_ask_host_keys(false);
  }

 private Q_SLOTS:
  void initTestCase() {
    test::isolate_settings(settings_);
    if (test::cluster_nodes().size() < 2) QSKIP("no test cluster (run under ctest: fixture cluster_up)");
  }

  void probeOfNamespaceNodeFillsCardAfterKeyAccepted() {
    MainWindow w(false);
    w.show();
    use_test_cluster(w);
    w.cluster_panel()->add_hosts("node0");  // an alias of the fixture's ssh_config
    const int row = w.cluster()->find("node0");
    QVERIFY(row >= 0);
    // Unknown key: not trusted on its own; the card shows the fingerprint.
    QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::awaiting_key, 30000);
    const QString fp = w.cluster()->node(row).fingerprint;
    QVERIFY(fp.startsWith("SHA256:"));
    QVERIFY(w.cluster_panel()->card("node0")->error_text().contains(fp));
    w.cluster_panel()->accept_host_key("node0");
    QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::online, 30000);
    const NodeInfo& n = w.cluster()->node(row);
    QVERIFY(n.cpu_cores > 0);
    QVERIFY(n.memory_bytes > 0);
    QVERIFY(!n.hostname.isEmpty());
    const QString shown = w.cluster_panel()->card("node0")->devices_text();
    QVERIFY2(shown.contains(QStringLiteral("%1 cores").arg(n.cpu_cores)), qPrintable(shown));
    // The plan now counts the node's ranks.
    QCOMPARE(w.plan()->cluster().world_size, w.cluster()->node(0).slots + n.slots);
    // The key was remembered: probing again needs no decision.
    w.cluster_panel()->probe("node0");
    QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::online, 30000);
  }

  void unreachableNodeShowsErrorOnCard() {
    MainWindow w(false);
    w.show();
    use_test_cluster(w);
    const QString host = test::cluster_nodes().first() + ":1";  // nothing listens on port 1
    w.cluster_panel()->add_hosts(host);
    const int row = w.cluster()->rowCount() - 1;
    QTRY_COMPARE_WITH_TIMEOUT(w.cluster()->node(row).state, NodeInfo::State::failed, 30000);
    const QString err = w.cluster_panel()->card(w.cluster()->node(row).host)->error_text();
    QVERIFY2(!err.isEmpty(), "the card shows the probe's error");
  }
};

QTEST_MAIN(ClusterProbeTest)
#include "cluster_probe_test.moc"
