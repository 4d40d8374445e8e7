#include "ui/inspector.h"

#include <QLabel>
#include <QScrollArea>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/axis_colors.h"
#include "ui/format.h"
#include "ui/theme.h"

namespace meshwork::ui {

namespace {
QString members_text(const std::vector<int>& members, int focus) {
  QStringList parts;
  const size_t shown = std::min<size_t>(members.size(), 24);
  for (size_t i = 0; i < shown; ++i)
    parts << (members[i] == focus ? QStringLiteral("<b>%1</b>").arg(members[i]) : QString::number(members[i]));
  QString s = parts.join(", ");
  if (members.size() > shown) s += QStringLiteral(", … (%1 in all)").arg(members.size());
  return s;
}
}  // namespace

Inspector::Inspector(QWidget* parent) : QWidget(parent) {
  setObjectName("Inspector");
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  auto* inner = new QWidget(scroll);
  auto* lay = new QVBoxLayout(inner);
  lay->setContentsMargins(14, 10, 14, 10);
  title_ = new QLabel(inner);
  title_->setProperty("role", "heading");
  title_->setWordWrap(true);
  body_ = new QLabel(inner);
  body_->setWordWrap(true);
  body_->setTextFormat(Qt::RichText);
  body_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  body_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  lay->addWidget(title_);
  lay->addWidget(body_, 1);
  scroll->setWidget(inner);
  outer->addWidget(scroll);
  show_nothing();
}

QString Inspector::text() const { return title_->text() + "\n" + body_->text(); }

void Inspector::show_nothing() {
  title_->setText(tr("Nothing selected"));
  body_->setText(tr("<span style='color:%1'>Click a node card or a rank in the mesh to see its "
                    "details here.</span>").arg(muted_text_color().name()));
}

void Inspector::show_node(const NodeInfo& n, int index) {
  title_->setText(n.is_local() ? tr("This machine") : n.host);
  QString h = QStringLiteral("<table cellspacing=4>");
  auto row = [&](const QString& k, const QString& v) {
    h += QStringLiteral("<tr><td style='color:%1'>%2</td><td>%3</td></tr>").arg(muted_text_color().name(), k, v);
  };
  row(tr("Node"), QString::number(index));
  if (!n.hostname.isEmpty()) row(tr("Hostname"), n.hostname.toHtmlEscaped());
  row(tr("Ranks"), QString::number(n.slots));
  if (n.cpu_cores) row(tr("CPU cores"), QString::number(n.cpu_cores));
  if (n.memory_bytes > 0) row(tr("Memory"), format_bytes(n.memory_bytes));
  for (size_t i = 0; i < n.gpus.size(); ++i)
    row(tr("GPU %1").arg(i), n.gpus[i].name.toHtmlEscaped() + " · " + format_bytes(n.gpus[i].memory_bytes));
  if (!n.links.isEmpty()) row(tr("GPU links"), n.links.toHtmlEscaped());
  for (const QString& p : n.ib_ports) row(tr("Port"), p.toHtmlEscaped());
  if (!n.fingerprint.isEmpty()) row(tr("Host key"), "<tt>" + n.fingerprint.toHtmlEscaped() + "</tt>");
  h += "</table>";
  if (!n.error.isEmpty())
    h += QStringLiteral("<p style='color:%1'>%2</p>").arg(error_color().name(), n.error.toHtmlEscaped());
  body_->setText(h);
}

void Inspector::show_rank(const DeviceMesh& mesh, int rank, const QStringList& node_names) {
  const MeshCoord c = mesh.coord_of(rank);
  const int node = mesh.node_of(rank);
  title_->setText(tr("Rank %1").arg(rank));
  const bool dark = is_dark();
  QString h = QStringLiteral("<p>");
  QString where = tr("node %1").arg(node);
  if (node < node_names.size() && !node_names[node].isEmpty()) where += " (" + node_names[node].toHtmlEscaped() + ")";
  h += tr("On %1, local rank %2.</p>").arg(where).arg(mesh.local_rank_of(rank));
  h += QStringLiteral("<table cellspacing=3>");
  for (Axis a : kAxes) {
    h += QStringLiteral("<tr><td><span style='color:%1'>■</span> %2</td><td align=right><b>%3</b></td><td style='color:%4'>of %5</td></tr>")
             .arg(axis_color(a, dark).name(), axis_label(a))
             .arg(c.get(a))
             .arg(muted_text_color().name())
             .arg(mesh.shape().size(a));
  }
  const MeshShape& shape = mesh.shape();
  const QColor experts = expert_color(dark);
  if (shape.ep > 1)  // borrowed from dp_shard x cp x tp, so a coordinate of its own, not a factor of the world
    h += QStringLiteral("<tr><td><span style='color:%1'>■</span> %2</td><td align=right><b>%3</b></td><td style='color:%4'>of %5</td></tr>")
             .arg(experts.name(), QString::fromUtf8(kEpName.data(), static_cast<int>(kEpName.size())))
             .arg(mesh.expert_group_rank(rank, ExpertGroupKind::ep))
             .arg(muted_text_color().name())
             .arg(shape.ep);
  h += "</table><p><b>" + tr("Groups") + "</b></p>";
  if (shape.ep > 1) {
    // The sparse mesh's groups: who this rank exchanges tokens with (ep), and who shares its
    // experts' shards (efsdp).
    for (ExpertGroupKind g : kExpertGroupKinds) {
      if (shape.expert_group_size(g) <= 1) continue;
      const std::vector<int> members = mesh.expert_group_members(rank, g);
      const bool crosses = std::any_of(members.begin(), members.end(), [&](int m) { return mesh.node_of(m) != mesh.node_of(rank); });
      const QString what = g == ExpertGroupKind::ep ? tr("ep (token all-to-all)") : tr("efsdp (expert shards)");
      h += QStringLiteral("<p style='margin:2px 0'><span style='color:%1'>■</span> <b>%2</b> · rank %3 in it%4<br>"
                          "<span style='color:%5'>%6</span></p>")
               .arg(experts.name(), what.toHtmlEscaped())
               .arg(mesh.expert_group_rank(rank, g))
               .arg(crosses ? QStringLiteral(" · <span style='color:%1'>crosses nodes</span>").arg(muted_text_color().name())
                            : QString())
               .arg(muted_text_color().name(), members_text(members, rank));
    }
  }
  for (GroupKind g : kGroupKinds) {
    if (mesh.shape().group_size(g) <= 1) continue;
    const bool crosses = mesh.group_crosses_nodes(rank, g);
    h += QStringLiteral("<p style='margin:2px 0'><span style='color:%1'>■</span> <b>%2</b> #%3 · rank %4 in it%5<br>"
                        "<span style='color:%6'>%7</span></p>")
             .arg(group_color(g, dark).name(), group_label(g).toHtmlEscaped())
             .arg(mesh.group_index(rank, g))
             .arg(mesh.group_rank(rank, g))
             .arg(crosses ? QStringLiteral(" · <span style='color:%1'>crosses nodes</span>").arg(
                                (g == GroupKind::tp ? error_color() : muted_text_color()).name())
                          : QString())
             .arg(muted_text_color().name(), members_text(mesh.group_members(rank, g), rank));
  }
  body_->setText(h);
}

}  // namespace meshwork::ui
