// Where a rank's output goes: its metrics lines (MetricsSink) and its log (Log).
//   metrics  RUN_DIR/metrics-rank<r>.jsonl, plus --metrics PATH shared by every rank, plus
//            stdout for rank 0 when there is no --metrics (docs/metrics.md).
//   log      RUN_DIR/rank<r>.log, echoed to stderr by rank 0 of an unsupervised run.
#pragma once

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace meshwork::trainer {

// Whole lines to every sink with one write() each (O_APPEND): ranks sharing --metrics PATH never
// interleave inside a line.
class MetricsSink {
 public:
  MetricsSink(const std::filesystem::path& rank_file, const std::string& shared, bool to_stdout);
  ~MetricsSink();
  MetricsSink(const MetricsSink&) = delete;
  MetricsSink& operator=(const MetricsSink&) = delete;

  bool ok() const;  // every file opened
  void write(const std::string& line);

 private:
  std::vector<int> fds_;
  bool to_stdout_;
};

class Log {
 public:
  Log(const std::filesystem::path& path, bool echo) : out_(path, std::ios::app), echo_(echo) {}
  template <class... A>
  void operator()(const A&... parts) {
    std::ostringstream s;
    (s << ... << parts);
    out_ << s.str() << "\n";
    out_.flush();
    if (echo_) std::cerr << "meshtrain: " << s.str() << "\n";
  }

 private:
  std::ofstream out_;
  bool echo_;
};

}  // namespace meshwork::trainer
