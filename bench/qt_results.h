// What the Qt benchmarks (gui_bench, scale_views) put around their measurements: the machine's
// load as JSON and the results file.
#pragma once

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <cstdlib>
#include <iostream>
#include <string_view>

#include "bench/measure.h"

namespace meshwork::bench {

// load_average() as a JSON array: 1, 5 and 15 minutes.
inline QJsonArray load_average_json() {
  QJsonArray a;
  for (double x : load_average()) a.append(x);
  return a;
}

// Writes `results` to `out` and says so. A file that cannot be written ends the benchmark
// (exit 1) in the words of its other failures: "<bench>: FAILED: <phase>: <why>".
inline void write_results(std::string_view bench, const QJsonObject& results, const QString& out) {
  QFile f(out);
  if (!f.open(QIODevice::WriteOnly)) {
    std::cerr << bench << ": FAILED: writing results: " << out.toStdString() << ": cannot be written\n";
    std::exit(1);
  }
  f.write(QJsonDocument(results).toJson());
  std::cout << "wrote " << out.toStdString() << "\n";
}

}  // namespace meshwork::bench
