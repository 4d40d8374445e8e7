#include "ui/memory_panel.h"

#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

#include "ui/axis_colors.h"
#include "ui/format.h"
#include "ui/theme.h"

namespace meshwork::ui {

MemoryPanel::MemoryPanel(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setObjectName("MemoryPanel");
}

void MemoryPanel::set_breakdown(const std::optional<MemoryEstimate>& breakdown,
                                const QString& error, const QString& device_name) {
  breakdown_ = breakdown;
  error_ = error;
  device_name_ = device_name;
  update();
}

QString MemoryPanel::headline() const {
  if (!breakdown_) return error_.isEmpty() ? tr("Estimating memory…") : error_;
  const MemoryEstimate& b = *breakdown_;
  QString amount = tr("%1 of %2 per rank")
                       .arg(format_bytes(double(b.memory.total())), format_bytes(b.capacity_bytes));
  if (b.stages > 1)
    amount += tr(" (worst of %1 stages: stage %2, %3 layers; bubble %4)")
                  .arg(b.stages)
                  .arg(b.memory.pp_stage)
                  .arg(qint64(b.memory.stage_layers))
                  .arg(format_percent(b.time.pp_bubble_fraction));
  if (!shape_valid_) return tr("Shape not valid (see the editor) · would use %1").arg(amount);
  if (b.fits) return tr("Fits: %1").arg(amount);
  QString s = tr("Does not fit: %1").arg(amount);
  if (!b.breaking_term.empty()) s += tr(" — %1 breaks it").arg(QString::fromStdString(b.breaking_term));
  return s;
}

QString MemoryPanel::time_basis() const {
  if (!breakdown_ || breakdown_->time.tokens_per_s <= 0) return {};
  return QString::fromStdString(ui::time_basis(*breakdown_));
}

QString MemoryPanel::time_basis_detail() const {
  if (!breakdown_ || breakdown_->time.tokens_per_s <= 0) return {};
  return QString::fromStdString(ui::time_basis_detail(*breakdown_));
}

void MemoryPanel::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const bool dark = is_dark();
  const QRectF area = QRectF(rect()).adjusted(14, 8, -14, -8);
  const QFontMetricsF fm(font());
  segments_.clear();
  basis_rect_ = QRectF();

  // Headline.
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.setPen(!breakdown_ ? muted_text_color()
                       : (breakdown_->fits ? palette().color(QPalette::Text) : error_color()));
  const QString title = tr("Memory per rank") + (device_name_.isEmpty() ? "" : " · " + device_name_);
  p.drawText(QPointF(area.left(), area.top() + fm.ascent()), title);
  p.setFont(font());
  const double tx = area.left() + QFontMetricsF(bold).horizontalAdvance(title) + 14;
  const double right = area.right();
  p.drawText(QRectF(tx, area.top(), right - tx, fm.height()), Qt::AlignLeft | Qt::AlignVCenter,
             fm.elidedText(headline(), Qt::ElideRight, right - tx));
  if (!breakdown_) return;
  const MemoryEstimate& b = *breakdown_;
  const std::vector<meshwork::MemoryTerm> terms = b.memory.peak_terms();  // sum to the total

  // Bar: scale so both the total and the capacity line fit with a margin.
  const double scale_max = std::max(double(b.memory.total()), b.capacity_bytes) * 1.06;
  const QRectF bar(area.left(), area.top() + fm.height() + 10, area.width(), 26);
  p.setPen(Qt::NoPen);
  p.setBrush(dark ? QColor("#2a2e33") : QColor("#eceef1"));
  p.drawRoundedRect(bar, 3, 3);
  double x = bar.left();
  for (size_t i = 0; i < terms.size(); ++i) {
    const double w = scale_max > 0 ? bar.width() * double(terms[i].bytes) / scale_max : 0;
    QRectF seg(x, bar.top(), w, bar.height());
    segments_.push_back(seg);
    p.setBrush(memory_term_color(static_cast<int>(i), dark));
    p.drawRect(seg);
    if (w > fm.horizontalAdvance(QString::fromStdString(terms[i].name)) + 10) {
      p.setPen(dark ? QColor("#111418") : QColor("#ffffff"));
      if (i >= 3) p.setPen(QColor("#111418"));
      p.drawText(seg, Qt::AlignCenter, QString::fromStdString(terms[i].name));
      p.setPen(Qt::NoPen);
    }
    x += w;
  }
  // The part over capacity, hatched red.
  if (b.capacity_bytes > 0) {
    const double cx = bar.left() + bar.width() * b.capacity_bytes / scale_max;
    if (!b.fits && x > cx) {
      p.setBrush(QBrush(error_color(), Qt::BDiagPattern));
      p.drawRect(QRectF(cx, bar.top(), x - cx, bar.height()));
      p.setPen(QPen(error_color(), 2));
      p.setBrush(Qt::NoBrush);
      p.drawRoundedRect(bar.adjusted(0, 0, 0, 0).intersected(QRectF(bar.left(), bar.top(), x - bar.left(), bar.height())), 3, 3);
    }
    p.setPen(QPen(b.fits ? palette().color(QPalette::Text) : error_color(), 2, Qt::SolidLine));
    p.drawLine(QPointF(cx, bar.top() - 5), QPointF(cx, bar.bottom() + 5));
    const QString cap = tr("capacity %1").arg(format_bytes(b.capacity_bytes));
    const double cw = fm.horizontalAdvance(cap);
    p.drawText(QPointF(std::min(cx - cw / 2, area.right() - cw), bar.bottom() + 5 + fm.ascent()), cap);
  }
  // Legend: term, swatch, amount.
  double lx = area.left();
  const double ly = bar.bottom() + 8 + fm.height();
  for (size_t i = 0; i < terms.size(); ++i) {
    const QString t = QStringLiteral("%1 %2").arg(QString::fromStdString(terms[i].name),
                                                  format_bytes(double(terms[i].bytes)));
    const bool breaking = !b.fits && terms[i].name == b.breaking_term;
    p.setPen(Qt::NoPen);
    p.setBrush(memory_term_color(static_cast<int>(i), dark));
    p.drawRoundedRect(QRectF(lx, ly + 3, 11, fm.height() - 6), 2, 2);
    lx += 15;
    QFont f = font();
    f.setBold(breaking);
    p.setFont(f);
    p.setPen(breaking ? error_color() : palette().color(QPalette::Text));
    p.drawText(QPointF(lx, ly + fm.ascent()), t);
    lx += QFontMetricsF(f).horizontalAdvance(t) + 16;
  }
  p.setFont(font());
  // Bottom line: the verdict on the left, core's speed estimate for the same shape on the right.
  const QRectF bottom(area.left(), ly + fm.height() + 4, area.width(), fm.height());
  double verdict_width = bottom.width();
  if (b.time.tokens_per_s > 0) {
    // The tag at the right end: measured numbers (calibrated, or fitted to stored runs) in the
    // "ok" colour, partly calibrated in the warning colour, defaults muted.
    const QString basis = time_basis();
    const bool calibrated = basis.startsWith(QLatin1String("calibrated")) || basis.startsWith(QLatin1String("fitted"));
    const bool partly = basis.startsWith(QLatin1String("partly calibrated"));
    QFont small = font();
    small.setPointSizeF(small.pointSizeF() * 0.9);
    const QFontMetricsF sm(small);
    const double tag_w = sm.horizontalAdvance(basis) + 12;
    basis_rect_ = QRectF(bottom.right() - tag_w, bottom.top() + 1, tag_w, bottom.height() - 2);
    const QColor tag_color = calibrated ? ok_color() : (partly ? warning_color() : muted_text_color());
    p.setPen(QPen(tag_color, 1));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(basis_rect_, basis_rect_.height() / 2, basis_rect_.height() / 2);
    p.setFont(small);
    p.drawText(basis_rect_, Qt::AlignCenter, basis);
    p.setFont(font());
    const QString speed = tr("≈ %1 · MFU %2 · step %3")
                              .arg(format_tokens_per_s(b.time.tokens_per_s), format_percent(b.time.mfu),
                                   format_seconds(b.time.step_s));
    p.setPen(muted_text_color());
    const QRectF speed_rect(bottom.left(), bottom.top(), bottom.width() - tag_w - 8, bottom.height());
    p.drawText(speed_rect, Qt::AlignRight | Qt::AlignVCenter, speed);
    verdict_width -= fm.horizontalAdvance(speed) + tag_w + 24;
  }
  if (!b.verdict.empty()) {
    p.setPen(b.fits ? muted_text_color() : error_color());
    p.drawText(QRectF(bottom.left(), bottom.top(), verdict_width, bottom.height()),
               Qt::AlignLeft | Qt::AlignVCenter,
               fm.elidedText(QString::fromStdString(b.verdict), Qt::ElideRight, verdict_width));
  }
}

void MemoryPanel::mouseMoveEvent(QMouseEvent* e) {
  if (!breakdown_) return;
  if (basis_rect_.contains(e->position())) {
    QToolTip::showText(e->globalPosition().toPoint(), time_basis_detail(), this);
    return;
  }
  const std::vector<meshwork::MemoryTerm> terms = breakdown_->memory.peak_terms();
  for (size_t i = 0; i < segments_.size() && i < terms.size(); ++i) {
    if (segments_[i].contains(e->position())) {
      const auto& t = terms[i];
      QToolTip::showText(e->globalPosition().toPoint(),
                         QStringLiteral("%1: %2").arg(QString::fromStdString(t.name), format_bytes(double(t.bytes))),
                         this);
      return;
    }
  }
  QToolTip::hideText();
}

}  // namespace meshwork::ui
