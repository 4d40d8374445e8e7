// Decimation for charts (M4-style): a line chart needs, per bucket of x, only the points that decide
// what is drawn there: the min and max (so spikes survive) and the last (so the line joins the
// next bucket correctly); plus the exact first and last point of the range. Buckets are 1.5 pixel
// columns wide (2P/3 buckets for P columns), so the result holds at most 2 points per pixel column
// (+ first and last), whatever the input size.
#pragma once

#include <cstdint>
#include <vector>

#include "core/store/run_store.h"

namespace meshwork::store {

// Accepts points in increasing x; keeps per bucket min, max, last, and the overall first point.
// Points outside [x_min, x_max] are ignored.
class Decimator {
 public:
  Decimator(double x_min, double x_max, int pixels);
  void add(double x, double y);
  // The kept points sorted by x (duplicates removed); `add` must not be called afterwards.
  std::vector<Point> finish();
  int64_t added() const { return added_; }

 private:
  struct Column {
    bool used = false;
    Point min, max, last;
  };
  int column_of(double x) const;
  bool have_first_ = false;
  Point first_;
  double x_min_, x_max_, scale_;
  int pixels_;
  std::vector<Column> columns_;
  int64_t added_ = 0;
};

// Convenience: decimate a whole sorted vector.
std::vector<Point> decimate(const std::vector<Point>& points, int pixels);

}  // namespace meshwork::store
