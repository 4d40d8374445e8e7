// InfiniBand / RoCE ports (ibstat, ibv_devinfo, /sys/class/infiniband) and OS facts. See
// probe_parsers.h.
#include <cctype>

#include "remote/parse_util.h"
#include "remote/probe_parsers.h"

namespace meshwork::remote {

using namespace detail;

namespace {

// "4: ACTIVE" / "PORT_ACTIVE (4)" / "ACTIVE" -> "Active": the spelling ibstat uses.
std::string normalize_state(std::string_view s) {
  s = trim(s);
  if (auto colon = s.find(':'); colon != std::string_view::npos) s = trim(s.substr(colon + 1));
  if (auto paren = s.find(" ("); paren != std::string_view::npos) s = s.substr(0, paren);
  if (starts_with(s, "PORT_")) s.remove_prefix(5);
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    out += static_cast<char>(i == 0 ? std::toupper(static_cast<unsigned char>(s[i]))
                                    : std::tolower(static_cast<unsigned char>(s[i])));
  }
  return out;
}

// "key: value" with any indentation; false if the line has no colon.
bool key_value(std::string_view line, std::string& key, std::string& value) {
  line = trim(line);
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return false;
  key = std::string(trim(line.substr(0, colon)));
  value = std::string(trim(line.substr(colon + 1)));
  return true;
}

}  // namespace

Result<std::vector<IbPort>> parse_ibstat(std::string_view text) {
  std::vector<IbPort> out;
  std::string device, ca_type;
  bool in_port = false;
  for (const std::string& raw : split_lines(text)) {
    std::string_view line = trim(raw);
    if (starts_with(line, "CA '")) {
      auto end = line.rfind('\'');
      device = std::string(line.substr(4, end > 4 ? end - 4 : 0));
      ca_type.clear();
      in_port = false;
      continue;
    }
    std::string key, value;
    if (!key_value(line, key, value)) continue;
    if (key == "CA type") {
      ca_type = value;
    } else if (starts_with(key, "Port ") && value.empty() && to_int(key.substr(5))) {
      IbPort p;
      p.device = device;
      p.port = static_cast<int>(*to_int(key.substr(5)));
      p.ca_type = ca_type;
      out.push_back(p);
      in_port = true;
    } else if (in_port && !out.empty()) {
      if (key == "State") out.back().state = normalize_state(value);
      else if (key == "Rate") out.back().rate_gbps = leading_number(value).value_or(0);
      else if (key == "Link layer") out.back().link_layer = value;
    }
  }
  if (out.empty()) return Error{"ibstat", std::string(trim(text)).substr(0, 80), "expected \"CA '<name>'\" blocks with ports"};
  return out;
}

Result<std::vector<IbPort>> parse_ibv_devinfo(std::string_view text) {
  std::vector<IbPort> out;
  std::string device, part;
  for (const std::string& raw : split_lines(text)) {
    std::string key, value;
    if (!key_value(raw, key, value)) continue;
    if (key == "hca_id") {
      device = value;
      part.clear();
    } else if (key == "vendor_part_id") {
      part = value;
    } else if (key == "port") {
      IbPort p;
      p.device = device;
      p.port = static_cast<int>(to_int(value).value_or(1));
      p.ca_type = part;
      out.push_back(p);
    } else if (!out.empty() && out.back().device == device) {
      if (key == "state") out.back().state = normalize_state(value);
      else if (key == "link_layer") out.back().link_layer = value;
    }
  }
  if (out.empty()) return Error{"ibv_devinfo", std::string(trim(text)).substr(0, 80), "expected hca_id blocks with ports"};
  return out;
}

Result<std::vector<IbPort>> parse_sysfs_ib_listing(std::string_view text) {
  std::vector<IbPort> out;
  for (const std::string& raw : split_lines(text)) {
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    auto w = words(line);
    if (w.size() < 3) return Error{"/sys/class/infiniband", std::string(line), "expected \"<device> <port> <state>|<rate>|<link_layer>\""};
    IbPort p;
    p.device = w[0];
    p.port = static_cast<int>(to_int(w[1]).value_or(1));
    // The rest after the second word, split on '|'.
    auto rest_pos = line.find(w[1], w[0].size()) + w[1].size();
    auto parts = split(trim(line.substr(rest_pos)), '|');
    p.state = normalize_state(parts[0]);
    if (parts.size() > 1) p.rate_gbps = leading_number(parts[1]).value_or(0);
    if (parts.size() > 2) p.link_layer = std::string(trim(parts[2]));
    out.push_back(std::move(p));
  }
  return out;
}

Result<MemInfo> parse_meminfo(std::string_view text) {
  MemInfo m;
  for (const std::string& raw : split_lines(text)) {
    auto w = words(raw);
    if (w.size() < 2) continue;
    auto kib = to_int(w[1]);
    // More than 8 EiB is not a machine's memory but a garbled line (an overflow, found by fuzzing).
    if (!kib || *kib < 0 || *kib > (int64_t{1} << 53)) continue;
    if (w[0] == "MemTotal:") m.total_bytes = *kib * 1024;
    if (w[0] == "MemAvailable:") m.available_bytes = *kib * 1024;
  }
  if (m.total_bytes <= 0) return Error{"/proc/meminfo", "", "expected a MemTotal line"};
  return m;
}

std::string parse_os_release(std::string_view text) {
  std::string name, version, pretty;
  for (const std::string& raw : split_lines(text)) {
    auto eq = raw.find('=');
    if (eq == std::string::npos) continue;
    std::string key = raw.substr(0, eq);
    std::string value = raw.substr(eq + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (key == "PRETTY_NAME") pretty = value;
    if (key == "NAME") name = value;
    if (key == "VERSION") version = value;
  }
  if (!pretty.empty()) return pretty;
  if (!version.empty()) return name + " " + version;
  return name;
}

}  // namespace meshwork::remote
