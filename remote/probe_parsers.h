// Parsers for what a node tells the probe: nvidia-smi (CSV query, `topo -m`, the plain table,
// `nvlink -s`), InfiniBand/RoCE ports (ibstat, ibv_devinfo, /sys/class/infiniband), /proc/meminfo
// and /etc/os-release. Pure functions over text, tested on real recorded outputs
// (tests/data/gpu-cluster). They never throw; unparseable input
// gives an Error naming what was expected.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace meshwork::remote {

// ---- GPUs: nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] ----
struct GpuInfo {
  int index = -1;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
  int64_t memory_total_mib = -1;  // -1: not reported
  int64_t memory_used_mib = -1;
  std::string compute_cap;        // "9.0"
  std::string driver_version;
  std::map<std::string, std::string> fields;  // every column as printed (units stripped)
};

// The fields the probe asks for, in order (used when the output has no header line).
const std::vector<std::string>& probe_gpu_query_fields();
// Parses CSV rows. With a header line (format=csv), columns are matched by name ("memory.total
// [MiB]" -> "memory.total"); without one, `fields` gives the column order. Units in values
// ("40960 MiB", "0 %") are stripped; "[N/A]" stays as written in `fields` and leaves typed
// members at their defaults. Rows without an index get their position as index.
Result<std::vector<GpuInfo>> parse_query_gpu_csv(
    std::string_view text, const std::vector<std::string>& fields = probe_gpu_query_fields());

// ---- GPU interconnect: nvidia-smi topo -m ----
enum class LinkKind { self, nvlink, pix, pxb, phb, node, sys, unknown };
std::string_view link_kind_name(LinkKind kind);  // "X", "NV", "PIX", ... ("NV" without count)

struct TopoLink {
  LinkKind kind = LinkKind::unknown;
  int nvlinks = 0;  // NV#: the number of bonded links
  std::string text() const;  // as nvidia-smi prints it: "NV18", "PIX", "X"
};

struct TopoMatrix {
  std::vector<std::string> devices;  // column/row names: "GPU0", "NIC3", "mlx5_0"
  std::vector<std::string> nic_names;  // per device: the NIC legend's name ("mlx5_3"), else empty
  std::vector<std::vector<TopoLink>> links;  // links[i][j], devices x devices
  std::vector<std::string> cpu_affinity;     // per device row, as printed ("" if none)
  std::vector<std::string> numa_affinity;
  std::vector<int> gpu_rows() const;  // indices of the GPU devices
  std::vector<int> nic_rows() const;
  // The slowest link between any two GPUs ("NV18", "SYS"; "" with fewer than two GPUs): what a
  // collective over all GPUs of the node is bounded by.
  std::string weakest_gpu_link() const;
  bool all_gpus_nvlinked() const;
};

// Accepts tab-separated output and output whose tabs became spaces; strips ANSI escapes (recent
// drivers underline the header); accepts the old format (NICs named mlx5_N in the matrix) and the
// new one (NIC# with a "NIC Legend").
Result<TopoMatrix> parse_topo_matrix(std::string_view text);

// ---- plain `nvidia-smi` table: the banner's versions and one row per GPU ----
struct SmiSummary {
  std::string driver_version;
  std::string cuda_version;  // "12.4", "N/A"
  struct Gpu {
    int index = -1;
    std::string name;  // may be truncated by nvidia-smi ("NVIDIA A100-PCI...")
    std::string bus_id;
    int64_t memory_used_mib = -1;
    int64_t memory_total_mib = -1;
  };
  std::vector<Gpu> gpus;
  int process_rows = 0;  // rows in the Processes table (not "No running processes found")
};
Result<SmiSummary> parse_smi_table(std::string_view text);

// ---- nvidia-smi nvlink -s ----
struct NvlinkStatus {
  struct Gpu {
    int index = -1;
    std::string name;
    int links_active = 0;
    int links_inactive = 0;
    double link_gbps = 0;  // GB/s per active link (the largest printed)
  };
  std::vector<Gpu> gpus;
  std::string message;  // "Device does not have or support Nvlink", MIG mode, ...
};
Result<NvlinkStatus> parse_nvlink_status(std::string_view text);

// ---- InfiniBand / RoCE ports ----
struct IbPort {
  std::string device;       // "mlx5_0"
  int port = 1;
  std::string state;        // "Active", "Down", "Init", ...
  std::string link_layer;   // "InfiniBand" | "Ethernet" (RoCE)
  double rate_gbps = 0;     // 400, 200, 100; 0 if unknown
  std::string ca_type;      // "MT4129" (ibstat) or vendor part id (ibv_devinfo)
  bool active() const { return state == "Active"; }
  bool roce() const { return link_layer == "Ethernet"; }
};
Result<std::vector<IbPort>> parse_ibstat(std::string_view text);
Result<std::vector<IbPort>> parse_ibv_devinfo(std::string_view text);
// The probe's own listing of /sys/class/infiniband: one line per port,
//   <device> <port> <state file> | <rate file> | <link_layer file>
// e.g. "mlx5_0 1 4: ACTIVE|400 Gb/sec (4X NDR)|InfiniBand".
Result<std::vector<IbPort>> parse_sysfs_ib_listing(std::string_view text);

// ---- OS facts ----
struct MemInfo {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
};
Result<MemInfo> parse_meminfo(std::string_view text);
// PRETTY_NAME of /etc/os-release (quotes removed), else NAME VERSION, else "".
std::string parse_os_release(std::string_view text);

// Helpers shared by the parsers (exposed for tests).
std::string strip_ansi(std::string_view text);
std::vector<std::string> split_lines(std::string_view text);

}  // namespace meshwork::remote
