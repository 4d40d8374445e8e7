#include "core/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace meshwork {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// Three significant digits: 1.23, 12.3, 123.
std::string sig3(double v) {
  if (v < 10) return fmt("%.2f", v);
  if (v < 100) return fmt("%.1f", v);
  return fmt("%.0f", v);
}

}  // namespace

Result<int64_t> parse_size(std::string_view text, std::string_view field) {
  const std::string f(field);
  const std::string allowed = "a size with a unit, e.g. 80GiB, 80GB or 81920MiB";
  std::string s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  const size_t num_start = i;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  const std::string number = s.substr(num_start, i - num_start);
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  const std::string unit = lower(s.substr(i));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.'))
    return Error{f, std::string(text), allowed};
  double scale = 0;
  if (unit == "b") scale = 1;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1024.0 * 1024;
  else if (unit == "gib") scale = 1024.0 * 1024 * 1024;
  else if (unit == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  if (scale == 0) return Error{f, std::string(text), allowed};
  const double bytes = std::strtod(number.c_str(), nullptr) * scale;
  if (!(bytes >= 1) || bytes > 9.0e18) return Error{f, std::string(text), allowed + " (> 0)"};
  return static_cast<int64_t>(std::llround(bytes));
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (std::abs(bytes) < 1024) return fmt("%.0f B", bytes);
  int u = 0;
  double v = bytes;
  while (std::abs(v) >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return sig3(v) + " " + units[u];
}

std::string format_gib(double bytes) { return fmt("%.1f", bytes / (1024.0 * 1024 * 1024)); }

std::string format_seconds(double s) {
  if (!std::isfinite(s)) return "-";
  if (s < 1e-3) return fmt("%.0f us", s * 1e6);
  if (s < 1) return sig3(s * 1e3) + " ms";
  if (s < 60) return sig3(s) + " s";
  if (s < 3600) {
    const int64_t total = std::llround(s);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", static_cast<long long>(total / 60),
                  static_cast<long long>(total % 60));
    return buf;
  }
  const int64_t minutes = std::llround(s / 60);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld h %02lld min", static_cast<long long>(minutes / 60),
                static_cast<long long>(minutes % 60));
  return buf;
}

std::string format_count(double n) {
  if (std::abs(n) < 1e3) return fmt("%.0f", n);
  if (std::abs(n) < 1e6) return sig3(n / 1e3) + "k";
  if (std::abs(n) < 1e9) return sig3(n / 1e6) + "M";
  if (std::abs(n) < 1e12) return sig3(n / 1e9) + "B";
  return sig3(n / 1e12) + "T";
}

std::string format_tokens_per_s(double t) {
  if (!std::isfinite(t)) return "-";
  return format_count(t) + " tokens/s";
}

std::string format_percent(double fraction) { return fmt("%.1f%%", fraction * 100); }

}  // namespace meshwork
