#include "ui/plot_layer.h"

#include <QPainter>
#include <algorithm>
#include <cmath>

namespace meshwork::ui {

namespace {
// Consecutive points closer than this (device pixels) are drawn as pixel columns.
constexpr double kDense = 2.0;
// Points per drawPolyline of the sparse segments.
constexpr int kChunk = 16;

// x * a / 255 on each of the four 8-bit channels (premultiplied ARGB).
inline uint32_t byte_mul(uint32_t x, uint32_t a) {
  uint32_t t = (x & 0xff00ffu) * a;
  t = ((t + ((t >> 8) & 0xff00ffu) + 0x800080u) >> 8) & 0xff00ffu;
  x = ((x >> 8) & 0xff00ffu) * a;
  x = (x + ((x >> 8) & 0xff00ffu) + 0x800080u) & 0xff00ff00u;
  return x | t;
}
// Source-over of `src` (premultiplied) at coverage `a` (0..255).
inline void blend(uint32_t* px, uint32_t src, uint32_t a) {
  if (a >= 255 && (src >> 24) == 255) {
    *px = src;
    return;
  }
  const uint32_t s = a >= 255 ? src : byte_mul(src, a);
  *px = s + byte_mul(*px, 255 - (s >> 24));
}

// A layer being drawn: the image, its clip (the plot area in layer pixels) and the per-column
// extents of the dense stretch being collected.
struct Canvas {
  QImage* image;
  uint32_t* bits;
  qsizetype stride;  // in pixels
  int width, height;
  double clip_l, clip_t, clip_r, clip_b;
  bool aa;
  std::vector<float> lo, hi;  // per column; lo > hi: untouched
  int touched_min = INT32_MAX, touched_max = -1;

  Canvas(QImage* img, QRectF clip, bool antialias)
      : image(img), bits(reinterpret_cast<uint32_t*>(img->bits())), stride(img->bytesPerLine() / 4),
        width(img->width()), height(img->height()), clip_l(clip.left()), clip_t(clip.top()),
        clip_r(clip.right()), clip_b(clip.bottom()), aa(antialias),
        lo(static_cast<size_t>(img->width()), INFINITY), hi(static_cast<size_t>(img->width()), -INFINITY) {}

  // Adds segment a-b's extent in every pixel column it crosses.
  void add(QPointF a, QPointF b, bool extend_lo = true, bool extend_hi = true) {
    if (a.x() > b.x()) std::swap(a, b);
    if (!(b.x() >= 0) || !(a.x() < width)) return;  // outside (or NaN)
    const int c0 = std::max(0, static_cast<int>(std::floor(a.x())));
    const int c1 = std::min(width - 1, static_cast<int>(std::floor(b.x())));
    const double dx = b.x() - a.x(), slope = dx > 0 ? (b.y() - a.y()) / dx : 0;
    for (int c = c0; c <= c1; ++c) {
      double ya = a.y(), yb = b.y();
      if (dx > 0) {
        ya = a.y() + (std::max(a.x(), static_cast<double>(c)) - a.x()) * slope;
        yb = a.y() + (std::min(b.x(), static_cast<double>(c + 1)) - a.x()) * slope;
      }
      const auto [mn, mx] = std::minmax(ya, yb);
      if (extend_lo) lo[static_cast<size_t>(c)] = std::min(lo[static_cast<size_t>(c)], static_cast<float>(mn));
      if (extend_hi) hi[static_cast<size_t>(c)] = std::max(hi[static_cast<size_t>(c)], static_cast<float>(mx));
      touched_min = std::min(touched_min, c);
      touched_max = std::max(touched_max, c);
    }
  }

  // One column's span [top, bottom) in `color` (premultiplied), ends by coverage.
  void span(int c, double top, double bottom, uint32_t color) {
    top = std::max(top, clip_t);
    bottom = std::min(bottom, clip_b);
    if (!aa) {
      top = std::round(top);
      bottom = std::max(top + 1, std::round(bottom));
    }
    if (!(bottom > top)) return;
    const int r0 = std::max(0, static_cast<int>(std::floor(top)));
    const int r1 = std::min(height - 1, static_cast<int>(std::ceil(bottom)) - 1);
    if (r1 < r0) return;
    uint32_t* px = bits + static_cast<qsizetype>(r0) * stride + c;
    auto cover = [&](int r) {
      const double f = std::min<double>(r + 1, bottom) - std::max<double>(r, top);
      return f >= 1 ? 255u : static_cast<uint32_t>(std::max(0.0, f) * 255 + 0.5);
    };
    blend(px, color, cover(r0));  // the two ends by their coverage, the rows between whole
    if (r1 == r0) return;
    px += stride;
    if ((color >> 24) == 255) {
      for (int r = r0 + 1; r < r1; ++r, px += stride) *px = color;
    } else {
      for (int r = r0 + 1; r < r1; ++r, px += stride) blend(px, color, 255);
    }
    blend(px, color, cover(r1));
  }

  // Draws the collected columns (widened by `half` above and below) and forgets them. `dash`:
  // on/off lengths in pixels (empty: solid), along x.
  void flush(double half, uint32_t color, const std::vector<double>& dash) {
    double period = 0;
    for (double d : dash) period += d;
    const int c_lo = std::max(touched_min, static_cast<int>(std::floor(clip_l)));
    const int c_hi = std::min(touched_max, static_cast<int>(std::ceil(clip_r)) - 1);
    for (int c = c_lo; c <= c_hi; ++c) {
      float& l = lo[static_cast<size_t>(c)];
      float& h = hi[static_cast<size_t>(c)];
      if (l <= h) {
        bool on = true;
        if (period > 0) {
          double phase = std::fmod(c + 0.5, period);
          for (size_t k = 0; k < dash.size(); ++k) {
            if (phase < dash[k]) {
              on = k % 2 == 0;
              break;
            }
            phase -= dash[k];
          }
        }
        if (on) span(c, l - half, h + half, color);
      }
    }
    for (int c = std::max(0, touched_min); c <= touched_max && c < width; ++c) {
      lo[static_cast<size_t>(c)] = INFINITY;
      hi[static_cast<size_t>(c)] = -INFINITY;
    }
    touched_min = INT32_MAX;
    touched_max = -1;
  }
};

double pen_margin(const QPen& pen, double scale) { return std::max(1.0, pen.widthF()) * scale; }
QPointF clamped(QPointF p) { return {p.x(), std::clamp(p.y(), -1e6, 1e6)}; }

uint32_t premultiplied(QColor c) { return qPremultiply(c.rgba()); }

QColor opaque(QColor c) {
  c.setAlpha(255);
  return c;
}

// Clips segment a-b to `r` (Liang-Barsky); false when nothing of it is inside.
bool clip_segment(QPointF& a, QPointF& b, const QRectF& r) {
  double t0 = 0, t1 = 1;
  const double dx = b.x() - a.x(), dy = b.y() - a.y();
  const double p[4] = {-dx, dx, -dy, dy};
  const double q[4] = {a.x() - r.left(), r.right() - a.x(), a.y() - r.top(), r.bottom() - a.y()};
  for (int i = 0; i < 4; ++i) {
    if (p[i] == 0) {
      if (q[i] < 0) return false;
      continue;
    }
    const double t = q[i] / p[i];
    if (p[i] < 0) t0 = std::max(t0, t);
    else t1 = std::min(t1, t);
    if (t0 > t1) return false;
  }
  const QPointF a0 = a;
  if (t1 < 1) b = QPointF(a0.x() + t1 * dx, a0.y() + t1 * dy);
  if (t0 > 0) a = QPointF(a0.x() + t0 * dx, a0.y() + t0 * dy);
  return true;
}

// Draws `pts` (layer pixels) as sparse polylines: a few points per call, the dash pattern
// carried on from one call to the next.
void stroke_chunks(QPainter& p, QPen pen, const std::vector<QPointF>& pts) {
  if (pts.size() < 2) return;
  const bool dashed = pen.style() != Qt::SolidLine && pen.style() != Qt::NoPen;
  const double w = std::max(1.0, pen.widthF());
  double length = 0;
  p.setPen(pen);
  p.setBrush(Qt::NoBrush);
  for (size_t i = 0; i + 1 < pts.size(); i += kChunk - 1) {
    const size_t n = std::min<size_t>(kChunk, pts.size() - i);
    if (dashed) {
      pen.setDashOffset(length / w);
      p.setPen(pen);
      for (size_t k = i + 1; k < i + n; ++k) length += std::hypot(pts[k].x() - pts[k - 1].x(), pts[k].y() - pts[k - 1].y());
    }
    p.drawPolyline(pts.data() + i, static_cast<int>(n));
  }
}
}  // namespace

QPointF PlotLayer::map(QPointF data, bool right, const QRectF& area, const PlotRanges& r) {
  const double y0 = right && r.has_right ? r.r0 : r.y0, y1 = right && r.has_right ? r.r1 : r.y1;
  if (!(r.x1 > r.x0) || !(y1 > y0)) return {};
  return {area.left() + (data.x() - r.x0) * area.width() / (r.x1 - r.x0),
          area.bottom() - (data.y() - y0) * area.height() / (y1 - y0)};
}

void PlotLayer::paint(QPainter* painter, const QRectF& area, const PlotRanges& ranges) {
  if (!(area.width() > 0) || !(area.height() > 0)) return;
  Key k;
  k.version = version_;
  k.area = area;
  k.device = painter->deviceTransform();
  k.ranges = ranges;
  k.aa = painter->testRenderHint(QPainter::Antialiasing);
  // Layer pixels = device pixels when the device transform only scales and moves (hi-dpi
  // included); otherwise painter pixels that the painter transforms.
  const QTransform& dt = k.device;
  const bool to_device = dt.type() <= QTransform::TxScale && dt.m11() > 0 && std::abs(dt.m11() - dt.m22()) < 1e-9;
  const double scale = to_device ? dt.m11() : 1.0;
  const QPointF shift = to_device ? QPointF(dt.dx(), dt.dy()) : QPointF();
  const QPointF tl = area.topLeft() * scale + shift, br = area.bottomRight() * scale + shift;
  const QPoint origin(static_cast<int>(std::floor(tl.x())), static_cast<int>(std::floor(tl.y())));
  const QSize size(static_cast<int>(std::ceil(br.x())) - origin.x(), static_cast<int>(std::ceil(br.y())) - origin.y());
  if (size.width() <= 0 || size.height() <= 0 || size.width() > 16384 || size.height() > 16384) return;
  if (!have_layer_ || !(k == drawn_)) {
    rasterize(k, scale, shift, origin, size);
    drawn_ = k;
    have_layer_ = true;
  }
  layer_.setDevicePixelRatio(scale);
  painter->drawImage((QPointF(origin) - shift) / scale, layer_);
}

void PlotLayer::rasterize(const Key& k, double scale, QPointF shift, QPoint origin, QSize size) {
  ++rasterized_;
  if (layer_.size() != size) layer_ = QImage(size, QImage::Format_ARGB32_Premultiplied);
  layer_.setDevicePixelRatio(1.0);
  layer_.fill(Qt::transparent);
  // Data -> layer pixels.
  const QRectF& area = k.area;
  const PlotRanges& r = k.ranges;
  const double ax = r.x1 > r.x0 ? scale * area.width() / (r.x1 - r.x0) : 0;
  const double bx = scale * area.left() + shift.x() - origin.x() - ax * r.x0;
  const QRectF clip(QPointF(scale * area.left() + shift.x() - origin.x(), scale * area.top() + shift.y() - origin.y()),
                    area.size() * scale);
  if (!(ax > 0)) return;

  for (const PlotSeries& s : series_) {
    if (!s.visible || s.points.size() < 2) continue;
    const double y0 = s.right && r.has_right ? r.r0 : r.y0, y1 = s.right && r.has_right ? r.r1 : r.y1;
    if (!(y1 > y0)) continue;
    const double ay = -scale * area.height() / (y1 - y0);
    const double by = scale * area.bottom() + shift.y() - origin.y() - ay * y0;
    auto map = [&](QPointF d) { return QPointF(ax * d.x() + bx, ay * d.y() + by); };
    // Sparse segments are clipped to a little more than the plot (QPainter wants coordinates it
    // can hold in fixed point); dense ones are drawn per column, clipped there.
    const QRectF bounds = clip.adjusted(-8 - pen_margin(s.pen, scale), -8 - pen_margin(s.pen, scale),
                                        8 + pen_margin(s.pen, scale), 8 + pen_margin(s.pen, scale));
    // The points in the x range, and one more on each side (sorted series only).
    size_t i0 = 0, i1 = s.points.size();
    if (s.sorted) {
      auto lo = std::lower_bound(s.points.begin(), s.points.end(), r.x0, [](const QPointF& p, double x) { return p.x() < x; });
      auto hi = std::upper_bound(s.points.begin(), s.points.end(), r.x1, [](double x, const QPointF& p) { return x < p.x(); });
      i0 = static_cast<size_t>(std::max<std::ptrdiff_t>(0, lo - s.points.begin() - 1));
      i1 = static_cast<size_t>(std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(s.points.size()), hi - s.points.begin() + 1));
    }
    if (i1 - i0 < 2) continue;

    std::vector<QPointF> up;
    up.reserve(i1 - i0);
    for (size_t i = i0; i < i1; ++i) up.push_back(map(s.points[i]));
    const bool dense_area = s.area && (up.back().x() - up.front().x()) / static_cast<double>(up.size() - 1) < kDense;
    bool sparse = s.area && !dense_area;  // anything QPainter strokes or fills
    for (size_t i = 1; !s.area && !sparse && i < up.size(); ++i) sparse = std::abs(up[i].x() - up[i - 1].x()) >= kDense;

    // A translucent series that QPainter draws goes opaque onto the scratch layer, then onto the
    // layer at its opacity. Pixel columns blend their own translucency (one span per column).
    const QColor ink = s.area ? s.brush.color() : s.pen.color();
    const bool via_scratch = ink.alpha() < 255 && sparse;
    QImage* target = &layer_;
    if (via_scratch) {
      if (scratch_.size() != size) scratch_ = QImage(size, QImage::Format_ARGB32_Premultiplied);
      scratch_.fill(Qt::transparent);
      target = &scratch_;
    }
    Canvas canvas(target, clip, k.aa);
    QPen pen = s.pen;
    pen.setWidthF(std::max(1.0, pen.widthF()) * scale);
    pen.setCosmetic(false);
    pen.setJoinStyle(Qt::RoundJoin);  // a zigzag's tip stays on its data point (chunks join there too)
    if (via_scratch) pen.setColor(opaque(pen.color()));
    const double half = pen.widthF() / 2;
    std::vector<double> dash;
    if (pen.style() != Qt::SolidLine)
      for (double d : pen.dashPattern()) dash.push_back(d * pen.widthF());
    const uint32_t pen_color = premultiplied(pen.color());

    QPainter p(target);
    p.setRenderHint(QPainter::Antialiasing, k.aa);
    // No clip: the layer is the plot area (rounded out to whole pixels); a fractional clip rect
    // would make the raster engine intersect every span with a clip path.
    if (s.area) {
      std::vector<QPointF> down;
      down.reserve(i1 - i0);
      for (size_t i = i0; i < i1 && i < s.lower.size(); ++i) down.push_back(map(s.lower[i]));
      if (down.size() != up.size()) continue;
      const QColor fill = via_scratch ? opaque(s.brush.color()) : s.brush.color();
      if (dense_area) {
        // Dense: per column, from the highest upper edge to the lowest lower edge, then the
        // upper edge in the outline's pen.
        for (size_t i = 1; i < up.size(); ++i) {
          canvas.add(clamped(up[i - 1]), clamped(up[i]), true, false);
          canvas.add(clamped(down[i - 1]), clamped(down[i]), false, true);
        }
        canvas.flush(0, premultiplied(fill), {});
        if (s.pen.style() != Qt::NoPen) {
          for (size_t i = 1; i < up.size(); ++i) canvas.add(clamped(up[i - 1]), clamped(up[i]));
          canvas.flush(half, pen_color, dash);
        }
      } else {
        QPolygonF poly;
        poly.reserve(static_cast<qsizetype>(2 * up.size()));
        auto inside = [&](QPointF q) {  // x beyond the plot only where the range cuts a segment
          return QPointF(std::clamp(q.x(), bounds.left(), bounds.right()), std::clamp(q.y(), bounds.top(), bounds.bottom()));
        };
        for (const QPointF& q : up) poly << inside(q);
        for (auto it = down.rbegin(); it != down.rend(); ++it) poly << inside(*it);
        p.setPen(s.pen.style() == Qt::NoPen ? QPen(Qt::NoPen) : pen);
        p.setBrush(fill);
        p.drawPolygon(poly);
      }
    } else {
      // Dense stretches into columns, sparse segments into polylines, in one walk.
      std::vector<QPointF> run;
      auto end_run = [&] {
        stroke_chunks(p, pen, run);
        run.clear();
      };
      for (size_t i = 1; i < up.size(); ++i) {
        QPointF a = up[i - 1], b = up[i];
        if (std::abs(b.x() - a.x()) < kDense) {
          canvas.add(QPointF(a.x(), std::clamp(a.y(), -1e6, 1e6)), QPointF(b.x(), std::clamp(b.y(), -1e6, 1e6)));
          end_run();
        } else if (!clip_segment(a, b, bounds)) {
          end_run();
        } else {
          if (!run.empty() && run.back() != a) end_run();
          if (run.empty()) run.push_back(a);
          run.push_back(b);
        }
      }
      stroke_chunks(p, pen, run);
      canvas.flush(half, pen_color, dash);
    }
    p.end();
    if (via_scratch) {
      QPainter onto(&layer_);
      onto.setOpacity(ink.alphaF());
      onto.drawImage(0, 0, scratch_);
    }
  }
}

}  // namespace meshwork::ui
