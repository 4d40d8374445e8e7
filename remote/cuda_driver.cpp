#include "remote/cuda_driver.h"

#include <cctype>
#include <map>

namespace meshwork::remote {

namespace {

// NVIDIA's published Linux drivers (CUDA Toolkit release notes, table "CUDA Toolkit and
// Corresponding Driver Versions"). Minimum per major: minor version compatibility; per
// major.minor: the driver the toolkit was released with.
const std::map<int, std::string>& minimum_per_major() {
  static const std::map<int, std::string> m = {{11, "450.80.02"}, {12, "525.60.13"}, {13, "580.65.06"}};
  return m;
}
const std::map<std::pair<int, int>, std::string>& released_with() {
  static const std::map<std::pair<int, int>, std::string> m = {
      {{12, 0}, "525.60.13"}, {{12, 1}, "530.30.02"}, {{12, 2}, "535.54.03"}, {{12, 3}, "545.23.06"},
      {{12, 4}, "550.54.14"}, {{12, 5}, "555.42.02"}, {{12, 6}, "560.28.03"}, {{12, 8}, "570.26"},
      {{12, 9}, "575.51.03"}, {{13, 0}, "580.65.06"}};
  return m;
}

bool older(const std::vector<int>& a, const std::vector<int>& b) {
  return a < b;  // lexicographic on the numeric parts: 550.90.07 < 580.65.06
}

}  // namespace

std::vector<int> parse_version(const std::string& text) {
  std::vector<int> out;
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t end = text.size();
  while (end > i && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  if (i == end) return {};
  int v = 0;
  bool digit = false;
  for (; i < end; ++i) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (v > 100000000) return {};
      v = v * 10 + (c - '0');
      digit = true;
    } else if (c == '.' && digit) {
      out.push_back(v);
      v = 0;
      digit = false;
    } else {
      return {};
    }
  }
  if (!digit) return {};
  out.push_back(v);
  return out;
}

Result<DriverVerdict> check_cuda_driver(const std::string& host, const std::string& driver_version,
                                        const std::string& cuda_runtime) {
  const auto cuda = parse_version(cuda_runtime);
  if (cuda.size() < 2) return Error{"bundle cuda_requirement", cuda_runtime, "must be a CUDA version such as 13.2"};
  const auto driver = parse_version(driver_version);
  if (driver.empty()) {
    return Error{host, "driver " + (driver_version.empty() ? std::string("(none reported)") : driver_version),
                 "nvidia-smi must report the NVIDIA driver version (is the driver installed and loaded?)"};
  }
  auto min_it = minimum_per_major().find(cuda[0]);
  if (min_it == minimum_per_major().end()) {
    return Error{"bundle cuda_requirement", cuda_runtime, "CUDA 11, 12 or 13 (no driver table for this major)"};
  }
  DriverVerdict v;
  v.minimum = min_it->second;
  if (auto r = released_with().find({cuda[0], cuda[1]}); r != released_with().end()) v.released = r->second;
  if (older(driver, parse_version(v.minimum))) {
    return Error{host, "NVIDIA driver " + driver_version,
                 "the bundle's CUDA " + cuda_runtime + " runtime needs driver >= " + v.minimum +
                     " (CUDA " + std::to_string(cuda[0]) + ".x minor version compatibility); update the driver "
                     "on this node, or build the bundle from a torch wheel for an older CUDA"};
  }
  if (!v.released.empty() && older(driver, parse_version(v.released))) {
    v.warning = host + ": NVIDIA driver " + driver_version + " is older than " + v.released + ", the one CUDA " +
                cuda_runtime + " was released with: it runs through minor version compatibility "
                "(kernels needing PTX JIT would fail)";
  }
  return v;
}

std::vector<Error> check_cuda_nodes(const std::vector<NodeInfo>& nodes, const std::string& cuda_runtime,
                                    std::vector<std::string>* warnings) {
  std::vector<Error> errors;
  for (const NodeInfo& n : nodes) {
    if (n.gpus.empty()) {
      errors.push_back(Error{n.host, "no GPU", "a CUDA launch needs NVIDIA GPUs on every node (nvidia-smi found none)"});
      continue;
    }
    // Every GPU of a node has the same driver; the first one speaks for the node.
    auto v = check_cuda_driver(n.host, n.gpus.front().driver_version, cuda_runtime);
    if (!v) {
      errors.push_back(v.error());
    } else if (!v->warning.empty() && warnings) {
      warnings->push_back(v->warning);
    }
  }
  return errors;
}

}  // namespace meshwork::remote
