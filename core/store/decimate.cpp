#include "core/store/decimate.h"

#include <algorithm>
#include <cmath>

namespace meshwork::store {

// Buckets are 1.5 pixel columns wide: nb = floor(2P/3) buckets keep at most 3 points each, i.e.
// at most 3 * 2P/3 = 2P points (+ the first point) for P columns.
Decimator::Decimator(double x_min, double x_max, int pixels)
    : x_min_(x_min), x_max_(x_max), pixels_(std::max(1, pixels * 2 / 3)) {
  scale_ = x_max_ > x_min_ ? pixels_ / (x_max_ - x_min_) : 0.0;
  columns_.resize(static_cast<size_t>(pixels_));
}

int Decimator::column_of(double x) const {
  const double c = std::floor((x - x_min_) * scale_);
  return static_cast<int>(std::clamp(c, 0.0, static_cast<double>(pixels_ - 1)));
}

void Decimator::add(double x, double y) {
  if (std::isnan(y) || std::isnan(x) || x < x_min_ || x > x_max_) return;
  ++added_;
  const Point p{x, y};
  if (!have_first_) {
    first_ = p;
    have_first_ = true;
  }
  Column& c = columns_[static_cast<size_t>(column_of(x))];
  if (!c.used) {
    c = Column{true, p, p, p};
    return;
  }
  if (y < c.min.y) c.min = p;
  if (y > c.max.y) c.max = p;
  c.last = p;
}

std::vector<Point> Decimator::finish() {
  std::vector<Point> out;
  if (!have_first_) return out;
  out.reserve(columns_.size() * 3 + 1);
  out.push_back(first_);
  auto push = [&out](const Point& p) {
    if (out.back().x != p.x || out.back().y != p.y) out.push_back(p);
  };
  for (const Column& c : columns_) {
    if (!c.used) continue;
    // The three points in x order (min and max may come in either order, last is last).
    const Point& a = c.min.x <= c.max.x ? c.min : c.max;
    const Point& b = c.min.x <= c.max.x ? c.max : c.min;
    push(a);
    push(b);
    push(c.last);
  }
  return out;
}

std::vector<Point> decimate(const std::vector<Point>& points, int pixels) {
  if (points.empty()) return {};
  Decimator d(points.front().x, points.back().x, pixels);
  for (const Point& p : points) d.add(p.x, p.y);
  return d.finish();
}

}  // namespace meshwork::store
