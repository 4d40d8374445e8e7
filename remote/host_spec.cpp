#include "remote/host_spec.h"

#include <charconv>
#include <fstream>
#include <sstream>

namespace meshwork::remote {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::optional<int> parse_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string HostSpec::to_string() const {
  std::string out;
  if (!user.empty()) out += user + "@";
  // Any host with a colon is bracketed: "[fe80:21]" must not print as "fe80:21" (host:port).
  const bool v6 = host.find(':') != std::string::npos;
  if (v6) {
    out += "[" + host + "]";
  } else {
    out += host;
  }
  if (port != 0) out += ":" + std::to_string(port);
  return out;
}

Result<HostSpec> parse_host_spec(std::string_view text, std::string_view field) {
  const std::string original(text);
  const std::string allowed = "must be host, user@host, host:port or user@host:port (port 1-65535)";
  text = trim(text);
  if (text.empty()) return Error{std::string(field), original, allowed};
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == ' ' || c == '\t' || c == 0x7f) {
      return Error{std::string(field), original, "must not contain spaces or control characters"};
    }
  }
  HostSpec spec;
  if (auto at = text.rfind('@'); at != std::string_view::npos) {
    spec.user = std::string(text.substr(0, at));
    text.remove_prefix(at + 1);
    if (spec.user.empty()) return Error{std::string(field), original, allowed};
  }
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) return Error{std::string(field), original, allowed};
    spec.host = std::string(text.substr(1, close - 1));
    text.remove_prefix(close + 1);
    if (!text.empty()) {
      if (text.front() != ':') return Error{std::string(field), original, allowed};
      text.remove_prefix(1);
      auto port = parse_int(text);
      if (!port || *port < 1 || *port > 65535) return Error{std::string(field), original, allowed};
      spec.port = *port;
    }
  } else if (auto colon = text.find(':'); colon != std::string_view::npos &&
                                          text.find(':', colon + 1) == std::string_view::npos) {
    spec.host = std::string(text.substr(0, colon));
    auto port = parse_int(text.substr(colon + 1));
    if (!port || *port < 1 || *port > 65535) return Error{std::string(field), original, allowed};
    spec.port = *port;
  } else {
    spec.host = std::string(text);  // a name, an IPv4 address or a bare IPv6 address
  }
  if (spec.host.empty() || spec.host.front() == '-') {
    // A host starting with '-' would read as an option to any tool it reached.
    return Error{std::string(field), original, allowed};
  }
  if (spec.host.find_first_of("[]") != std::string::npos) {
    // Brackets only delimit an IPv6 address; inside a name they make the text ambiguous.
    return Error{std::string(field), original, allowed};
  }
  return spec;
}

Result<std::vector<HostEntry>> parse_hostfile(std::string_view text, std::string_view file_name) {
  std::vector<HostEntry> out;
  int line_no = 0;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const std::string where = std::string(file_name) + ":" + std::to_string(line_no);
    // Split on whitespace: host, then key=value words (only slots= is meaningful).
    std::vector<std::string_view> words;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      if (j > i) words.push_back(line.substr(i, j - i));
      i = j;
    }
    auto spec = parse_host_spec(words[0], where);
    if (!spec) return spec.error();
    HostEntry entry{*spec, 0};
    for (size_t w = 1; w < words.size(); ++w) {
      if (words[w].rfind("slots=", 0) == 0) {
        auto n = parse_int(words[w].substr(6));
        if (!n || *n < 1) return Error{where, std::string(words[w]), "slots must be an integer >= 1"};
        entry.slots = *n;
      } else {
        return Error{where, std::string(words[w]), "allowed after the host: slots=N"};
      }
    }
    out.push_back(std::move(entry));
  }
  if (out.empty()) return Error{std::string(file_name), "", "names no host (one `host slots=N` a line)"};
  return out;
}

Result<std::vector<HostEntry>> load_hostfile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"--hostfile", path, "must be a readable file"};
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hostfile(ss.str(), path);
}

Result<std::vector<HostEntry>> parse_host_list(std::string_view text, std::string_view field) {
  std::vector<HostEntry> out;
  while (true) {
    auto comma = text.find(',');
    auto spec = parse_host_spec(text.substr(0, comma), field);
    if (!spec) return spec.error();
    out.push_back({*spec, 0});
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace meshwork::remote
