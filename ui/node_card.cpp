#include "ui/node_card.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTextDocument>
#include <QToolButton>
#include <QVBoxLayout>
#include <map>

#include "ui/format.h"
#include "ui/panel_widgets.h"
#include "ui/theme.h"

namespace meshwork::ui {

NodeCard::NodeCard(QWidget* parent) : QFrame(parent) {
  setObjectName("NodeCard");
  setFixedWidth(kCardWidth);
  auto* lay = new_column_layout(this, {16, 12, 14, 12}, 6);
  auto* head = new QHBoxLayout;
  auto* titles = new QVBoxLayout;
  titles->setSpacing(0);
  title_ = new QLabel(this);
  QFont tf = title_->font();
  tf.setBold(true);
  tf.setPointSizeF(tf.pointSizeF() * 1.15);
  title_->setFont(tf);
  subtitle_ = new QLabel(this);
  subtitle_->setProperty("role", "muted");
  titles->addWidget(title_);
  titles->addWidget(subtitle_);
  head->addLayout(titles, 1);
  state_label_ = new QLabel(this);
  head->addWidget(state_label_, 0, Qt::AlignTop);
  remove_ = new QToolButton(this);
  remove_->setText(QStringLiteral("✕"));
  remove_->setAutoRaise(true);
  remove_->setToolTip(tr("Remove this node"));
  head->addWidget(remove_, 0, Qt::AlignTop);
  lay->addLayout(head);

  progress_ = new QProgressBar(this);
  progress_->setRange(0, 100);
  progress_->setTextVisible(false);
  progress_->setFixedHeight(6);
  lay->addWidget(progress_);
  progress_text_ = new QLabel(this);
  progress_text_->setProperty("role", "muted");
  lay->addWidget(progress_text_);

  error_ = add_wrapped_label(lay, this, "NodeError");
  error_->setTextFormat(Qt::RichText);
  error_->setProperty("role", "error");
  error_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* err_row = new QHBoxLayout;
  err_row->addStretch();
  retry_ = new QPushButton(tr("Retry"), this);
  err_row->addWidget(retry_);
  lay->addLayout(err_row);

  devices_ = add_wrapped_label(lay, this, "NodeDevices");
  devices_->setTextFormat(Qt::RichText);
  links_ = add_wrapped_label(lay, this);
  links_->setTextFormat(Qt::RichText);
  ib_ = add_wrapped_label(lay, this);
  ib_->setProperty("role", "muted");

  auto* ranks_row = new QHBoxLayout;
  auto* rl = new QLabel(tr("Ranks on this node"), this);
  rl->setProperty("role", "muted");
  ranks_row->addWidget(rl);
  ranks_row->addStretch();
  ranks_ = new QSpinBox(this);
  ranks_->setRange(1, 1024);
  ranks_->setKeyboardTracking(false);
  ranks_->setToolTip(tr("Processes (ranks) to run here: one per GPU, or CPU ranks"));
  ranks_row->addWidget(ranks_);
  lay->addLayout(ranks_row);

  connect(remove_, &QToolButton::clicked, this, [this] { Q_EMIT remove_requested(host_); });
  connect(retry_, &QPushButton::clicked, this, [this] {
    if (state_ == NodeInfo::State::awaiting_key) Q_EMIT trust_requested(host_);
    else Q_EMIT probe_requested(host_);
  });
  connect(ranks_, qOverload<int>(&QSpinBox::valueChanged), this,
          [this](int v) { Q_EMIT slots_changed(host_, v); });
}

void NodeCard::set_node(const NodeInfo& n) {
  host_ = n.host;
  state_ = n.state;
  title_->setText(n.is_local() ? tr("This machine") : n.host);
  QString sub = n.is_local() ? tr("local · no SSH") : tr("SSH");
  if (!n.hostname.isEmpty()) sub = n.hostname + " · " + sub;
  if (n.described) sub = tr("described by hardware");
  subtitle_->setText(sub);
  remove_->setVisible(!n.is_local());

  using S = NodeInfo::State;
  QString state_text;
  QColor state_color = muted_text_color();
  switch (n.state) {
    case S::unprobed: state_text = tr("not probed"); break;
    case S::probing: state_text = tr("probing…"); break;
    case S::online: state_text = tr("● online"); state_color = ok_color(); break;
    case S::failed: state_text = tr("● unreachable"); state_color = error_color(); break;
    case S::awaiting_key: state_text = tr("● host key?"); state_color = warning_color(); break;
  }
  state_label_->setText(state_text);
  state_label_->setStyleSheet(QStringLiteral("color: %1; font-weight: 600;").arg(state_color.name()));

  progress_->setVisible(n.state == S::probing);
  progress_->setValue(n.progress);
  progress_text_->setVisible(n.state == S::probing && !n.progress_text.isEmpty());
  progress_text_->setText(n.progress_text);
  error_->setVisible(!n.error.isEmpty());
  // A fingerprint is one long token: give it a line of its own in a fixed-width font.
  if (n.state == S::awaiting_key)
    error_->setText(tr("Unknown host key — compare before trusting:<br><tt>%1</tt>").arg(n.fingerprint.toHtmlEscaped()));
  else
    error_->setText(n.error.toHtmlEscaped().replace("\n", "<br>"));
  retry_->setVisible(!n.error.isEmpty() && n.state != S::probing);
  retry_->setText(n.state == S::awaiting_key ? tr("Review key…") : tr("Retry"));

  // Devices: identical GPUs grouped ("8 × NVIDIA H100 80GB HBM3 · 79.6 GiB each").
  QStringList lines;
  if (n.cpu_cores > 0 || n.memory_bytes > 0)
    lines << tr("<b>CPU</b> %1 cores · %2 memory").arg(n.cpu_cores).arg(format_bytes(n.memory_bytes));
  std::map<std::pair<QString, double>, int> groups;
  for (const GpuInfo& g : n.gpus) ++groups[{g.name, g.memory_bytes}];
  for (const auto& [key, count] : groups)
    lines << tr("<b>GPU</b> %1 × %2 · %3 each").arg(count).arg(key.first.toHtmlEscaped(), format_bytes(key.second));
  if (n.state != S::online && lines.isEmpty()) lines << tr("<i>Probe to see its devices.</i>");
  devices_->setText(lines.join("<br>"));
  devices_->setVisible(!lines.isEmpty());

  if (n.has_gpus() && !n.links.isEmpty()) {
    const QColor c = n.fast_links ? ok_color() : warning_color();
    links_->setText(tr("<b>Links</b> <span style='color:%1'>%2</span>%3")
                        .arg(c.name(), n.links.toHtmlEscaped(),
                             n.fast_links ? QString() : tr(" — keep tp off this node or expect slow steps")));
    links_->show();
  } else {
    links_->hide();
  }
  ib_->setText(n.ib_ports.isEmpty() ? QString() : tr("InfiniBand / RoCE: ") + n.ib_ports.join(" · "));
  ib_->setVisible(!n.ib_ports.isEmpty());
  {
    QSignalBlocker block(ranks_);
    ranks_->setValue(n.slots);
  }
  update();
}

QString NodeCard::height_key(const NodeInfo& n) {
  // Mirrors set_node(): the state (progress bar, retry button, fingerprint line), the error text,
  // the device, link and port lines. Numbers are included because they change line widths.
  QString key = QString::number(static_cast<int>(n.state));
  key += n.progress_text.isEmpty() ? QLatin1String("|-|") : QLatin1String("|p|");
  // A probe's error names the host: masked (same length), so a thousand refused nodes share a
  // key. The grid measures cards on screen exactly, so a rare difference off screen is fixed
  // when the card scrolls in.
  QString error = n.error;
  if (!n.host.isEmpty()) error.replace(n.host, QString(n.host.size(), QLatin1Char('#')));
  key += error + QLatin1Char('|');
  if (n.state == NodeInfo::State::awaiting_key) key += n.fingerprint;
  key += QStringLiteral("|%1|%2|").arg(n.cpu_cores).arg(n.memory_bytes);
  for (const GpuInfo& g : n.gpus) key += g.name + QString::number(g.memory_bytes) + QLatin1Char(',');
  if (n.has_gpus()) key += QLatin1Char('|') + n.links + (n.fast_links ? QLatin1String("+") : QLatin1String("-"));
  key += QLatin1Char('|') + n.ib_ports.join(QLatin1Char(','));
  return key;
}

QString NodeCard::devices_text() const { return devices_->text() + "\n" + links_->text() + "\n" + ib_->text(); }
QString NodeCard::error_text() const {
  if (error_->isHidden()) return {};
  QTextDocument doc;
  doc.setHtml(error_->text());
  return doc.toPlainText();
}

void NodeCard::set_selected(bool selected) {
  selected_ = selected;
  update();
}

void NodeCard::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) Q_EMIT clicked(host_);
  QFrame::mousePressEvent(e);
}

void NodeCard::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF r = QRectF(rect()).adjusted(1, 1, -1, -1);
  p.setPen(QPen(selected_ ? palette().color(QPalette::Highlight) : border_color(), selected_ ? 2 : 1));
  p.setBrush(card_color());
  p.drawRoundedRect(r, 8, 8);
  // A state stripe down the left edge: green online, red failed, amber waiting on a key.
  QColor stripe = border_color();
  if (state_ == NodeInfo::State::online) stripe = ok_color();
  if (state_ == NodeInfo::State::failed) stripe = error_color();
  if (state_ == NodeInfo::State::awaiting_key) stripe = warning_color();
  if (state_ == NodeInfo::State::probing) stripe = palette().color(QPalette::Highlight);
  p.setPen(Qt::NoPen);
  p.setBrush(stripe);
  p.drawRoundedRect(QRectF(r.left(), r.top() + 8, 4, r.height() - 16), 2, 2);
}

}  // namespace meshwork::ui
