// Probe output is whatever a node's nvidia-smi, ibstat, ibv_devinfo, /proc/meminfo and
// /etc/os-release print: versions differ, terminals wrap and colour it, tabs become spaces.
// The first byte picks the parser. Invariants: never a crash; a refusal names what; the
// topology matrix is square with one affinity entry per device; numbers are in range.
#include <cmath>
#include <cstdint>

#include "remote/probe_parsers.h"
#include "tests/fuzz/fuzz_check.h"

using namespace meshwork;
using namespace meshwork::remote;

namespace {

template <class T>
bool refused(const Result<T>& r, std::string_view parser) {
  if (r) return false;
  fuzz::check_refusal(r.error(), parser);
  return true;
}

void check_topo(const TopoMatrix& m) {
  const size_t n = m.devices.size();
  FUZZ_CHECK(m.links.size() == n, "topo: rows != devices");
  for (const auto& row : m.links) FUZZ_CHECK(row.size() == n, "topo: a row's width != devices");
  FUZZ_CHECK(m.cpu_affinity.size() == n && m.numa_affinity.size() == n, "topo: affinity per device");
  FUZZ_CHECK(m.nic_names.size() == n, "topo: nic names per device");
  for (int g : m.gpu_rows()) FUZZ_CHECK(g >= 0 && static_cast<size_t>(g) < n, "topo: gpu row");
  (void)m.weakest_gpu_link();
  (void)m.all_gpus_nvlinked();
}

void check_ports(const std::vector<IbPort>& ports) {
  for (const auto& p : ports)
    FUZZ_CHECK(std::isfinite(p.rate_gbps) && p.rate_gbps >= 0, "ib: rate not a finite >= 0");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text = fuzz::as_text(data + 1, size - 1);
  switch (data[0] % 9) {
    case 0:
      if (auto r = parse_query_gpu_csv(text); !refused(r, "query-gpu csv"))
        for (const auto& g : *r) FUZZ_CHECK(g.memory_total_mib >= -1, "gpu: memory < -1");
      break;
    case 1:
      if (auto r = parse_topo_matrix(text); !refused(r, "topo -m")) check_topo(*r);
      break;
    case 2:
      if (auto r = parse_smi_table(text); !refused(r, "nvidia-smi"))
        for (const auto& g : r->gpus) FUZZ_CHECK(g.memory_total_mib >= -1, "smi: memory < -1");
      break;
    case 3:
      if (auto r = parse_nvlink_status(text); !refused(r, "nvlink -s"))
        for (const auto& g : r->gpus)
          FUZZ_CHECK(g.links_active >= 0 && std::isfinite(g.link_gbps), "nvlink: counts");
      break;
    case 4:
      if (auto r = parse_ibstat(text); !refused(r, "ibstat")) check_ports(*r);
      break;
    case 5:
      if (auto r = parse_ibv_devinfo(text); !refused(r, "ibv_devinfo")) check_ports(*r);
      break;
    case 6:
      if (auto r = parse_sysfs_ib_listing(text); !refused(r, "sysfs ib")) check_ports(*r);
      break;
    case 7:
      if (auto r = parse_meminfo(text); !refused(r, "meminfo"))
        FUZZ_CHECK(r->total_bytes >= 0 && r->available_bytes >= 0, "meminfo: negative bytes");
      break;
    default:
      (void)parse_os_release(text);
      (void)strip_ansi(text);
      break;
  }
  return 0;
}
