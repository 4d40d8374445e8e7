#include "web/host_check.h"

#include <arpa/inet.h>

#include <QHostInfo>
#include <algorithm>
#include <cctype>
#include <charconv>

namespace meshwork::web {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Strict forms only (inet_pton): "127.1" or "2130706433" are names here, never addresses.
bool is_address_literal(std::string_view name) {
  unsigned char buf[16];
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') {
    const std::string inner(name.substr(1, name.size() - 2));
    return inet_pton(AF_INET6, inner.c_str(), buf) == 1;
  }
  return inet_pton(AF_INET, std::string(name).c_str(), buf) == 1;
}

bool is_name_char(unsigned char c) { return std::isalnum(c) || c == '-' || c == '.' || c == '_'; }

}  // namespace

std::optional<HostPort> parse_host_header(std::string_view text) {
  if (text.empty() || text.size() > 255) return std::nullopt;
  HostPort hp;
  std::string_view port;
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    hp.name = lower(text.substr(0, close + 1));
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      if (port.empty()) return std::nullopt;
    }
    for (char c : hp.name)
      if (!(std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.' || c == '[' || c == ']'))
        return std::nullopt;
  } else {
    const size_t colon = text.find(':');
    hp.name = lower(text.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = text.substr(colon + 1);
      if (port.empty()) return std::nullopt;
    }
    if (hp.name.empty() || !std::all_of(hp.name.begin(), hp.name.end(), [](char c) { return is_name_char(c); }))
      return std::nullopt;
    if (hp.name.back() == '.') hp.name.pop_back();  // "localhost." is localhost
    if (hp.name.empty()) return std::nullopt;
  }
  if (!port.empty()) {
    int p = -1;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) return std::nullopt;
    hp.port = p;
  }
  return hp;
}

HostAllowList::HostAllowList(std::vector<std::string> public_names) {
  names_.push_back("localhost");
  const auto add = [&](std::string name) {
    name = lower(name);
    if (!name.empty() && name.back() == '.') name.pop_back();
    if (!name.empty() && std::find(names_.begin(), names_.end(), name) == names_.end()) names_.push_back(name);
  };
  const QString host = QHostInfo::localHostName();
  if (!host.isEmpty()) {
    add(host.toStdString());
    const QString domain = QHostInfo::localDomainName();
    if (!domain.isEmpty() && !host.contains('.')) add((host + '.' + domain).toStdString());
  }
  for (auto& n : public_names) add(std::move(n));
}

bool HostAllowList::allows_name(std::string_view name) const {
  if (is_address_literal(name)) return true;
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

bool HostAllowList::allows_host(std::string_view host_header) const {
  const auto hp = parse_host_header(host_header);
  return hp && allows_name(hp->name);
}

bool HostAllowList::allows_origin(std::string_view origin, std::string_view host_header, bool tls) const {
  if (origin.empty()) return true;
  const std::string_view scheme = tls ? "https://" : "http://";
  if (origin.substr(0, scheme.size()) != scheme) return false;
  const auto from = parse_host_header(origin.substr(scheme.size()));
  const auto host = parse_host_header(host_header);
  if (!from || !host || !allows_name(from->name)) return false;
  // A browser leaves the scheme's default port out of both; compare what is there.
  const int fallback = tls ? 443 : 80;
  return from->name == host->name && from->port.value_or(fallback) == host->port.value_or(fallback);
}

std::string HostAllowList::describe() const {
  std::string out = "localhost, an IP address";
  for (size_t i = 1; i < names_.size(); ++i) out += ", " + names_[i];
  return out;
}

}  // namespace meshwork::web
