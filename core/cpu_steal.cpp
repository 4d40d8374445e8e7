#include "core/cpu_steal.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

namespace meshwork {

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
  // The aggregate line comes first; per-CPU lines ("cpu0 ...") follow it.
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.size() < 4 || line.substr(0, 4) != "cpu ") continue;
    uint64_t columns[8] = {};
    size_t pos = 4;
    for (int c = 0; c < 8; ++c) {
      while (pos < line.size() && line[pos] == ' ') ++pos;
      const auto [next, ec] = std::from_chars(line.data() + pos, line.data() + line.size(), columns[c]);
      if (ec != std::errc{}) return std::nullopt;
      pos = static_cast<size_t>(next - line.data());
    }
    CpuTimes t;
    t.steal = columns[7];
    for (uint64_t v : columns) t.total += v;
    return t;
  }
  return std::nullopt;
}

std::optional<CpuTimes> read_cpu_times() {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::string first;
  std::getline(in, first);
  return parse_proc_stat(first);
}

double steal_share(const std::optional<CpuTimes>& before, const std::optional<CpuTimes>& after) {
  if (!before || !after || after->total <= before->total || after->steal < before->steal) return 0.0;
  return static_cast<double>(after->steal - before->steal) / static_cast<double>(after->total - before->total);
}

}  // namespace meshwork
