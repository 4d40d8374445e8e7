// Which names this server answers to: the defence against DNS rebinding. A page of an attacker's
// site whose name later resolves to this machine reaches the server with the attacker's name in
// `Host`; a request is answered only when `Host` names this server (docs/security.md), and a
// WebSocket only when its `Origin` is a page this server served.
//
// Allowed names: `localhost`, any IP address literal (an address is not a name an attacker's DNS
// can point here), this machine's host name (short and qualified) and each `--public-name`.
// The port is not compared: `ssh -L 9000:localhost:8765` shows the browser another port, and a
// rebinding attack is defeated by the name alone. An Origin must match the request's own Host
// exactly (scheme, name and port): another page on the same name but another port (another
// user's server on a login node) is another origin.
#pragma once

#include <QHostAddress>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace meshwork::web {

struct HostPort {
  std::string name;  // lowercase; an IPv6 literal keeps its brackets
  std::optional<int> port;
};
// "name", "name:port", "[v6]", "[v6]:port"; nullopt for anything else (empty, spaces, bad port).
std::optional<HostPort> parse_host_header(std::string_view text);

class HostAllowList {
 public:
  // `public_names` as given to --public-name; this machine's names are added here.
  explicit HostAllowList(std::vector<std::string> public_names = {});

  bool allows_host(std::string_view host_header) const;
  // A WebSocket's Origin header (empty: a client that is not a browser, allowed; browsers always
  // send it): "http(s)://NAME[:PORT]" whose scheme is this listener's and whose name and port
  // are those of `host_header`, itself allowed.
  bool allows_origin(std::string_view origin, std::string_view host_header, bool tls) const;
  // "localhost, IP addresses, NAME, ..." for error messages.
  std::string describe() const;
  const std::vector<std::string>& names() const { return names_; }

 private:
  bool allows_name(std::string_view name) const;
  std::vector<std::string> names_;  // lowercase, `localhost` first
};

}  // namespace meshwork::web
