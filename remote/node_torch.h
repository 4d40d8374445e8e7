// --node-torch: nodes that already have the same torch wheel, at another path than this
// machine's. meshtrain finds LibTorch through its DT_RPATH (the build's absolute paths to the
// wheel's torch/lib and nvidia/*/lib, cmake/MeshworkTorch.cmake); a copy whose run path names the
// node's site-packages instead runs there without a bundle. patchelf (scripts/bootstrap) rewrites
// it here, so the node needs nothing but the wheel; deploy's ldd check then proves it resolves.
#pragma once

#include <filesystem>
#include <string>

#include "core/error.h"

namespace meshwork::remote {

// Writes <out_dir>/meshtrain: `trainer` with every run path entry under this machine's
// site-packages (the directory holding torch/lib) moved to `node_site_packages` (absolute: the
// node's site-packages, which holds torch/ and nvidia/). Returns the copy's path.
Result<std::string> retarget_trainer(const std::string& trainer, const std::string& node_site_packages,
                                     const std::filesystem::path& out_dir);

}  // namespace meshwork::remote
