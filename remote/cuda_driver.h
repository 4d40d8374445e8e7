// Before a CUDA launch from a runtime bundle: can the node's NVIDIA driver run the bundle's CUDA
// runtime? The driver is the node's (it must match its kernel module), the runtime (libcudart,
// cuBLAS, ...) is the bundle's, so an old driver fails only at the first CUDA call on the node
// ("CUDA driver version is insufficient for CUDA runtime version"), after the deploy. We check
// it first, from the probe's nvidia-smi driver_version.
//
// The rule is NVIDIA's (CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver
// Versions"): since CUDA 11, a runtime of major version M runs on any driver at least the first
// driver of that major ("minor version compatibility": 11.x >= 450.80.02, 12.x >= 525.60.13,
// 13.x >= 580.65.06). Below that: refused. Between that and the driver the exact toolkit was
// released with (kept in the table where known): allowed with a warning, because kernels that
// need PTX JIT of a newer ISA fail there (the wheel ships cubins for its architectures, so a
// training step normally does not JIT).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "remote/probe.h"

namespace meshwork::remote {

// "550.90.07" -> {550, 90, 7}; empty when it is not a version.
std::vector<int> parse_version(const std::string& text);

struct DriverVerdict {
  std::string minimum;   // the driver the runtime needs at least (minor version compatibility)
  std::string released;  // the driver the exact toolkit came with ("" if not in the table)
  std::string warning;   // set when the driver is between the two
};

// The verdict for one driver and one CUDA runtime version ("13.2"). Error: the driver is too
// old, or a version is not one.
Result<DriverVerdict> check_cuda_driver(const std::string& host, const std::string& driver_version,
                                        const std::string& cuda_runtime);

// Every GPU node of a probe against the bundle's CUDA requirement; one Error per refused node
// (the first names the node, its driver, the bundle's CUDA version and the minimum). Warnings
// go to `warnings`. A node without GPUs is refused too: a CUDA launch needs them.
std::vector<Error> check_cuda_nodes(const std::vector<NodeInfo>& nodes, const std::string& cuda_runtime,
                                    std::vector<std::string>* warnings = nullptr);

}  // namespace meshwork::remote
