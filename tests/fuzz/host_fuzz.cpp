// Host specs, hostfiles and --hosts lists are typed or pasted by users (and hostfiles come from
// other tools: DeepSpeed, MPI). Invariants: never a crash; a refusal names the field; every
// accepted host has a non-empty name without whitespace, control bytes or a leading '-' (an ssh
// option), a port in 1..65535, and prints (to_string) to text that parses back to itself.
#include <cstdint>
#include <string>

#include "remote/host_spec.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;

namespace {

void check_spec(const remote::HostSpec& spec) {
  const std::string& host = spec.host;
  const int port = spec.port;
  FUZZ_CHECK(!host.empty(), "an accepted host has no name");
  for (unsigned char c : host)
    FUZZ_CHECK(c > ' ' && c != 0x7f, "an accepted host name holds whitespace or a control byte");
  FUZZ_CHECK(host.front() != '-', "an accepted host name starts with '-' (an ssh option)");
  FUZZ_CHECK(port == 0 || (port >= 1 && port <= 65535), "an accepted port is out of range");
  for (unsigned char c : spec.user)
    FUZZ_CHECK(c > ' ' && c != 0x7f, "an accepted user holds whitespace");
  auto again = remote::parse_host_spec(spec.to_string());
  FUZZ_CHECK(again.ok() && *again == spec, "to_string does not parse back: " + spec.to_string());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 3;
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  if (which == 0) {
    auto spec = remote::parse_host_spec(text);
    if (!spec) return fuzz::check_refusal(spec.error(), "parse_host_spec"), 0;
    check_spec(*spec);
  } else {
    auto hosts = which == 1 ? remote::parse_hostfile(text) : remote::parse_host_list(text);
    if (!hosts) return fuzz::check_refusal(hosts.error(), "hostfile/--hosts"), 0;
    for (const auto& entry : *hosts) {
      check_spec(entry.spec);
      FUZZ_CHECK(entry.slots >= 0, "an accepted host has a negative slot count");
    }
  }
  return 0;
}
