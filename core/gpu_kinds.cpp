#include "core/gpu_kinds.h"

#include <algorithm>
#include <cctype>

namespace meshwork {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kT = 1e12;
constexpr double kGBps = 1e9;
}  // namespace

const std::vector<GpuKind>& gpu_kinds() {
  // Memory: the data sheet's capacity, in GiB (HBM is sized in GiB). Links: NVLink 4 (H100,
  // H200) 450 GB/s, NVLink 5 (B200) 900 GB/s, NVLink 3 (A100) 300 GB/s, Infinity Fabric (MI300X)
  // 448 GB/s, PCIe Gen4 x16 (L40S) 32 GB/s, each per direction; NICs 400 Gb/s (50 GB/s) on the
  // H100/H200/B200/MI300X reference systems, 200 Gb/s (25 GB/s) on A100 and L40S ones.
  static const std::vector<GpuKind> kinds = {
      {"h100-80gb", "NVIDIA H100 80 GB (SXM)", 80 * kGiB, 989 * kT, 494 * kT, 450 * kGBps, 50 * kGBps},
      {"h200", "NVIDIA H200 141 GB (SXM)", 141 * kGiB, 989 * kT, 494 * kT, 450 * kGBps, 50 * kGBps},
      {"b200", "NVIDIA B200 180 GB", 180 * kGiB, 2250 * kT, 1100 * kT, 900 * kGBps, 50 * kGBps},
      {"a100-40gb", "NVIDIA A100 40 GB (SXM)", 40 * kGiB, 312 * kT, 156 * kT, 300 * kGBps, 25 * kGBps},
      {"a100-80gb", "NVIDIA A100 80 GB (SXM)", 80 * kGiB, 312 * kT, 156 * kT, 300 * kGBps, 25 * kGBps},
      {"l40s", "NVIDIA L40S 48 GB (PCIe)", 48 * kGiB, 362 * kT, 183 * kT, HardwareModel::kPcieIntraNodeBytesPerS, 25 * kGBps},
      {"mi300x", "AMD Instinct MI300X 192 GB", 192 * kGiB, 1307 * kT, 654 * kT, 448 * kGBps, 50 * kGBps},
  };
  return kinds;
}

std::string gpu_kind_ids() {
  std::string s;
  for (const GpuKind& k : gpu_kinds()) s += (s.empty() ? "" : ", ") + k.id;
  return s;
}

Result<GpuKind> find_gpu_kind(std::string_view id, const std::string& field) {
  std::string lower(id);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const GpuKind& k : gpu_kinds())
    if (k.id == lower) return k;
  return Error{field, std::string(id), "one of " + gpu_kind_ids()};
}

HardwareModel hardware_for(const GpuKind& kind) {
  HardwareModel h = HardwareModel::h100();
  h.peak_flops_bf16 = kind.peak_flops_bf16;
  h.peak_flops_fp32 = kind.peak_flops_fp32;
  h.intra_node_bytes_per_s = kind.intra_node_bytes_per_s;
  h.inter_node_bytes_per_s = kind.inter_node_bytes_per_s;
  return h;
}

HardwareModel hardware_for(const DescribedClusterSource& c) {
  GpuKind k;
  k.peak_flops_bf16 = c.peak_flops_bf16;
  k.peak_flops_fp32 = c.peak_flops_fp32;
  k.intra_node_bytes_per_s = c.intra_node_bytes_per_s;
  k.inter_node_bytes_per_s = c.inter_node_bytes_per_s;
  return hardware_for(k);
}

DescribedClusterSource describe_cluster(const GpuKind& kind, int nodes, int gpus_per_node, std::string name) {
  DescribedClusterSource d;
  d.name = std::move(name);
  d.nodes = nodes;
  d.gpus_per_node = gpus_per_node;
  d.gpu = kind.id;
  d.gpu_memory_bytes = kind.memory_bytes;
  d.peak_flops_bf16 = kind.peak_flops_bf16;
  d.peak_flops_fp32 = kind.peak_flops_fp32;
  d.intra_node_bytes_per_s = kind.intra_node_bytes_per_s;
  d.inter_node_bytes_per_s = kind.inter_node_bytes_per_s;
  return d;
}

}  // namespace meshwork
