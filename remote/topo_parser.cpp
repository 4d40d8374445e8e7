// `nvidia-smi topo -m`: the GPU/NIC link matrix. See probe_parsers.h.
#include <algorithm>

#include "remote/parse_util.h"
#include "remote/probe_parsers.h"

namespace meshwork::remote {

using namespace detail;

std::string_view link_kind_name(LinkKind kind) {
  switch (kind) {
    case LinkKind::self: return "X";
    case LinkKind::nvlink: return "NV";
    case LinkKind::pix: return "PIX";
    case LinkKind::pxb: return "PXB";
    case LinkKind::phb: return "PHB";
    case LinkKind::node: return "NODE";
    case LinkKind::sys: return "SYS";
    case LinkKind::unknown: break;
  }
  return "?";
}

std::string TopoLink::text() const {
  if (kind == LinkKind::nvlink) return "NV" + std::to_string(nvlinks);
  return std::string(link_kind_name(kind));
}

namespace {

std::optional<TopoLink> parse_link(std::string_view cell) {
  cell = trim(cell);
  if (cell == "X") return TopoLink{LinkKind::self, 0};
  if (cell == "PIX") return TopoLink{LinkKind::pix, 0};
  if (cell == "PXB") return TopoLink{LinkKind::pxb, 0};
  if (cell == "PHB") return TopoLink{LinkKind::phb, 0};
  if (cell == "NODE") return TopoLink{LinkKind::node, 0};
  if (cell == "SYS") return TopoLink{LinkKind::sys, 0};
  if (starts_with(cell, "NV")) {
    if (auto n = to_int(cell.substr(2)); n && *n > 0) return TopoLink{LinkKind::nvlink, static_cast<int>(*n)};
  }
  return std::nullopt;
}

// Larger is slower: NVLink (more links faster) < PIX < PXB < PHB < NODE < SYS.
int slowness(const TopoLink& l) {
  switch (l.kind) {
    case LinkKind::nvlink: return 100 - std::min(l.nvlinks, 99);
    case LinkKind::pix: return 200;
    case LinkKind::pxb: return 300;
    case LinkKind::phb: return 400;
    case LinkKind::node: return 500;
    case LinkKind::sys: return 600;
    default: return 700;
  }
}

bool is_gpu_name(std::string_view d) { return starts_with(d, "GPU") && to_int(d.substr(3)).has_value(); }

}  // namespace

std::vector<int> TopoMatrix::gpu_rows() const {
  std::vector<int> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (is_gpu_name(devices[i])) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::vector<int> TopoMatrix::nic_rows() const {
  std::vector<int> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!is_gpu_name(devices[i])) out.push_back(static_cast<int>(i));
  }
  return out;
}

std::string TopoMatrix::weakest_gpu_link() const {
  const auto g = gpu_rows();
  const TopoLink* worst = nullptr;
  for (int a : g) {
    for (int b : g) {
      if (a == b) continue;
      const TopoLink& l = links[a][b];
      if (!worst || slowness(l) > slowness(*worst)) worst = &l;
    }
  }
  return worst ? worst->text() : "";
}

bool TopoMatrix::all_gpus_nvlinked() const {
  const auto g = gpu_rows();
  if (g.size() < 2) return false;
  for (int a : g) {
    for (int b : g) {
      if (a != b && links[a][b].kind != LinkKind::nvlink) return false;
    }
  }
  return true;
}

Result<TopoMatrix> parse_topo_matrix(std::string_view text) {
  const std::vector<std::string> lines = split_lines(strip_ansi(text));
  TopoMatrix m;
  size_t i = 0;
  // The header: the first line naming GPU0 as a column (rows start with a device name instead).
  for (; i < lines.size(); ++i) {
    auto w = words(lines[i]);
    // The header's first word is GPU0 too (its leading tab or spaces vanish in words()), but a
    // row's second cell is GPU0's link to itself, "X", and the header's second word never is.
    if (w.size() > 1 && w[0] == "GPU0" && w[1] != "X") break;
  }
  if (i == lines.size()) return Error{"nvidia-smi topo -m", "", "expected a header line naming GPU0"};
  for (const std::string& w : words(lines[i])) {
    if (w == "CPU" || w == "NUMA" || w == "Affinity") break;
    m.devices.push_back(w);
  }
  const size_t n = m.devices.size();
  m.links.assign(n, std::vector<TopoLink>(n));
  m.cpu_affinity.assign(n, "");
  m.numa_affinity.assign(n, "");
  m.nic_names.assign(n, "");
  std::vector<bool> seen(n, false);
  for (++i; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    auto w = words(line);
    if (w.empty()) break;  // the blank line before the Legend
    auto it = std::find(m.devices.begin(), m.devices.end(), w[0]);
    if (it == m.devices.end()) {
      return Error{"nvidia-smi topo -m", line, "expected a row starting with one of the header's devices"};
    }
    const size_t r = static_cast<size_t>(it - m.devices.begin());
    if (w.size() < n + 1) {
      return Error{"nvidia-smi topo -m", line, "expected " + std::to_string(n) + " link cells"};
    }
    for (size_t c = 0; c < n; ++c) {
      auto l = parse_link(w[c + 1]);
      if (!l) return Error{"nvidia-smi topo -m", w[c + 1], "a link must be X, NV#, PIX, PXB, PHB, NODE or SYS"};
      m.links[r][c] = *l;
    }
    if (line.find('\t') != std::string::npos) {
      // Tab-separated: the affinity columns keep their positions even when empty (Slurm jobs
      // print an empty CPU Affinity).
      auto cells = split(line, '\t');
      if (cells.size() > n + 1) m.cpu_affinity[r] = std::string(trim(cells[n + 1]));
      if (cells.size() > n + 2) m.numa_affinity[r] = std::string(trim(cells[n + 2]));
    } else {
      if (w.size() > n + 1) m.cpu_affinity[r] = w[n + 1];
      if (w.size() > n + 2) m.numa_affinity[r] = w[n + 2];
    }
    seen[r] = true;
  }
  for (size_t r = 0; r < n; ++r) {
    if (!seen[r]) return Error{"nvidia-smi topo -m", m.devices[r], "has no row"};
    if (!is_gpu_name(m.devices[r])) m.nic_names[r] = m.devices[r];  // old format: mlx5_N rows
  }
  // "NIC Legend:" maps NIC# to the device name ("  NIC0: mlx5_0").
  for (; i < lines.size(); ++i) {
    std::string_view line = trim(lines[i]);
    auto colon = line.find(':');
    if (colon == std::string_view::npos || !starts_with(line, "NIC")) continue;
    auto it = std::find(m.devices.begin(), m.devices.end(), std::string(line.substr(0, colon)));
    if (it != m.devices.end()) m.nic_names[it - m.devices.begin()] = std::string(trim(line.substr(colon + 1)));
  }
  return m;
}

}  // namespace meshwork::remote
