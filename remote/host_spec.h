// How the user names nodes: `user@host:port`, an ~/.ssh/config alias, "local" (this machine, no
// SSH), or a DeepSpeed-style hostfile (`host slots=N`, `#` comments). Parsing only; connecting is
// ssh_session.h's job, where ssh_config (HostName, User, Port, IdentityFile, ProxyJump) applies.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace meshwork::remote {

struct HostSpec {
  std::string user;   // empty: from ssh_config, else the local user
  std::string host;   // a name, an address or an ssh_config alias ("local": this machine)
  int port = 0;       // 0: from ssh_config, else 22
  bool is_local() const { return host == "local"; }
  // The canonical text form: [user@]host[:port], IPv6 literals always bracketed (parses back).
  std::string to_string() const;
  bool operator==(const HostSpec&) const = default;
};

// Parses "host", "user@host", "host:port", "user@host:port", "[v6::addr]:port". Errors name
// `field` and say what is allowed; control characters and whitespace in a host are refused.
Result<HostSpec> parse_host_spec(std::string_view text, std::string_view field = "host");

struct HostEntry {
  HostSpec spec;
  int slots = 0;  // 0: not given (the launcher uses --nproc-per-node or the node's GPU count)
};

// DeepSpeed hostfile: one `host [slots=N]` per line; `#` starts a comment; blank lines ignored.
// Errors name "<file>:<line>" and the offending text.
Result<std::vector<HostEntry>> parse_hostfile(std::string_view text,
                                              std::string_view file_name = "hostfile");
Result<std::vector<HostEntry>> load_hostfile(const std::string& path);

// "h1,h2" (the --hosts flag), each optionally "host:port" / "user@host" / "host slots=N" not
// allowed here: slots come from --nproc-per-node.
Result<std::vector<HostEntry>> parse_host_list(std::string_view text, std::string_view field = "--hosts");

}  // namespace meshwork::remote
