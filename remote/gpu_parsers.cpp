// nvidia-smi parsers: the CSV query, the plain table and `nvlink -s`. See probe_parsers.h.
#include "remote/parse_util.h"
#include "remote/probe_parsers.h"

namespace meshwork::remote {

using namespace detail;

std::string strip_ansi(std::string_view text) {
  // CSI sequences: ESC '[' parameters... final byte in 0x40..0x7e.
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      size_t j = i + 2;
      while (j < text.size() && !(text[j] >= 0x40 && text[j] <= 0x7e)) ++j;
      i = j;
      continue;
    }
    out += text[i];
  }
  return out;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.emplace_back(line);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

const std::vector<std::string>& probe_gpu_query_fields() {
  static const std::vector<std::string> fields = {
      "index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "compute_cap",
      "driver_version"};
  return fields;
}

namespace {

// "memory.total [MiB]" -> "memory.total"; nvidia-smi also accepts aliases (gpu_name,
// gpu_bus_id) and prints them under their canonical names, so only units need stripping.
std::string header_name(std::string_view h) {
  h = trim(h);
  if (auto b = h.find(" ["); b != std::string_view::npos) h = h.substr(0, b);
  return std::string(h);
}

// "40960 MiB" -> "40960", "0 %" -> "0", "765 MHz" -> "765", "[N/A]" stays.
std::string strip_unit(std::string_view v) {
  v = trim(v);
  for (std::string_view unit : {" MiB", " %", " MHz", " W"}) {
    if (v.size() > unit.size() && v.substr(v.size() - unit.size()) == unit) {
      return std::string(v.substr(0, v.size() - unit.size()));
    }
  }
  return std::string(v);
}

bool looks_like_header(const std::vector<std::string>& cells) {
  for (const std::string& c : cells) {
    const std::string h = header_name(c);
    if (h == "index" || h == "name" || h == "memory.total" || h == "pci.bus_id" ||
        h == "uuid" || h == "timestamp" || h == "driver_version" || h == "memory.used") {
      return true;
    }
  }
  return false;
}

}  // namespace

Result<std::vector<GpuInfo>> parse_query_gpu_csv(std::string_view text,
                                                 const std::vector<std::string>& fields) {
  std::vector<GpuInfo> out;
  std::vector<std::string> columns = fields;
  bool first = true;
  for (const std::string& raw : split_lines(text)) {
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    // Field values never contain ", " except inside a GPU name? nvidia-smi does not quote;
    // GPU names have no commas, so a plain split is what every consumer of this format does.
    std::vector<std::string> cells = split(line, ',');
    if (first && looks_like_header(cells)) {
      columns.clear();
      for (const std::string& c : cells) columns.push_back(header_name(c));
      first = false;
      continue;
    }
    first = false;
    if (cells.size() != columns.size()) {
      return Error{"nvidia-smi --query-gpu", std::string(line),
                   "expected " + std::to_string(columns.size()) + " comma-separated fields"};
    }
    GpuInfo gpu;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string v = strip_unit(cells[i]);
      gpu.fields[columns[i]] = v;
      const std::string& c = columns[i];
      const auto n = to_int(v);
      // A negative or absurd number is a garbled line, never a size: left unknown (-1), as
      // "[N/A]" is (fuzzer find: "-1559 MiB" became a negative memory).
      const bool count = n && *n >= 0;
      if (c == "index" && count && *n < (1 << 20)) gpu.index = static_cast<int>(*n);
      else if (c == "name") gpu.name = v;
      else if (c == "uuid") gpu.uuid = v;
      else if (c == "pci.bus_id") gpu.pci_bus_id = v;
      else if (c == "memory.total" && count) gpu.memory_total_mib = *n;
      else if (c == "memory.used" && count) gpu.memory_used_mib = *n;
      else if (c == "compute_cap") gpu.compute_cap = v;
      else if (c == "driver_version") gpu.driver_version = v;
    }
    if (gpu.index < 0) gpu.index = static_cast<int>(out.size());
    out.push_back(std::move(gpu));
  }
  return out;
}

Result<SmiSummary> parse_smi_table(std::string_view text) {
  SmiSummary s;
  bool banner = false;
  bool in_processes = false;
  const std::vector<std::string> lines = split_lines(strip_ansi(text));
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (auto p = line.find("Driver Version:"); p != std::string::npos) {
      banner = true;
      auto w = words(std::string_view(line).substr(p + 15));
      if (!w.empty()) s.driver_version = w[0];
      if (auto c = line.find("CUDA Version:"); c != std::string::npos) {
        auto cw = words(std::string_view(line).substr(c + 13));
        if (!cw.empty()) s.cuda_version = cw[0];
      }
      continue;
    }
    if (line.find("Processes:") != std::string::npos) in_processes = true;
    if (line.size() < 2 || line[0] != '|') continue;
    const std::vector<std::string> cells = split(std::string_view(line).substr(1), '|');
    if (in_processes) {
      auto w = words(cells[0]);
      if (w.size() >= 2 && to_int(w[0]) && w.back().find("MiB") != std::string::npos) ++s.process_rows;
      continue;
    }
    // A GPU row: "|   0  NVIDIA H100 80GB HBM3   On  |   00000000:19:00.0 Off |  0 |"
    // followed by "| N/A 27C P0 72W / 700W |  1MiB /  81559MiB | ...".
    if (cells.size() < 3) continue;
    auto w = words(cells[0]);
    if (w.size() < 2 || !to_int(w[0])) continue;
    SmiSummary::Gpu g;
    g.index = static_cast<int>(*to_int(w[0]));
    // The name runs from the second word to the persistence mode (last word: On/Off).
    size_t last = w.size();
    if (last > 2 && (w.back() == "On" || w.back() == "Off")) --last;
    for (size_t k = 1; k < last; ++k) g.name += (k > 1 ? " " : "") + w[k];
    auto bw = words(cells[1]);
    if (!bw.empty()) g.bus_id = bw[0];
    if (i + 1 < lines.size() && lines[i + 1].size() > 1 && lines[i + 1][0] == '|') {
      auto next = split(std::string_view(lines[i + 1]).substr(1), '|');
      if (next.size() >= 2) {
        auto mw = words(next[1]);  // "1MiB", "/", "81559MiB"
        if (mw.size() == 3) {
          // In range before converting (a garbled 3e85 MiB was undefined behaviour: fuzzer find).
          auto mib = [](std::optional<double> v) -> int64_t {
            return v && *v >= 0 && *v < 9e15 ? static_cast<int64_t>(*v) : -1;
          };
          g.memory_used_mib = mib(leading_number(mw[0]));
          g.memory_total_mib = mib(leading_number(mw[2]));
        }
      }
    }
    s.gpus.push_back(std::move(g));
  }
  if (!banner) return Error{"nvidia-smi", "", "expected the banner with \"Driver Version:\""};
  return s;
}

Result<NvlinkStatus> parse_nvlink_status(std::string_view text) {
  NvlinkStatus st;
  for (const std::string& raw : split_lines(strip_ansi(text))) {
    std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (starts_with(line, "GPU ")) {
      NvlinkStatus::Gpu g;
      auto colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      if (auto n = to_int(line.substr(4, colon - 4))) g.index = static_cast<int>(*n);
      std::string_view rest = trim(line.substr(colon + 1));
      if (auto u = rest.find(" (UUID:"); u != std::string_view::npos) rest = rest.substr(0, u);
      g.name = std::string(rest);
      st.gpus.push_back(std::move(g));
    } else if (starts_with(line, "Link ") && !st.gpus.empty()) {
      auto colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      std::string_view v = trim(line.substr(colon + 1));
      if (v == "<inactive>") {
        ++st.gpus.back().links_inactive;
      } else if (auto gbps = leading_number(v)) {
        ++st.gpus.back().links_active;
        st.gpus.back().link_gbps = std::max(st.gpus.back().link_gbps, *gbps);
      }
    } else if (st.message.empty()) {
      st.message = std::string(line);
    }
  }
  if (st.gpus.empty()) return Error{"nvidia-smi nvlink -s", std::string(trim(text)).substr(0, 80),
                                    "expected lines \"GPU n: <name> (UUID: ...)\""};
  return st;
}

}  // namespace meshwork::remote
