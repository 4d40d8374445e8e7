// Where the bundled resources are (model presets, the sample corpus, the tokenizer worker, the
// runtime bundles of an installed package), for every binary alike, run from an install tree, a
// runtime bundle or the build tree:
//
//   1. $MESHWORK_RESOURCE_DIR, when set (it wins even when it does not exist: a mistyped
//      override shows as a missing file, not as the wrong resources);
//   2. <directory of the executable>/../share/meshwork, when it exists (an install: /usr/bin ->
//      /usr/share/meshwork; an unpacked runtime bundle: bin/ -> share/meshwork);
//   3. the source tree's resources/, baked in at build time (a binary run from build/bin).
#pragma once

#include <filesystem>

namespace meshwork {

std::filesystem::path resource_dir();

// The folder holding README.md and docs/*.md: <executable dir>/../share/doc/meshwork when
// installed, else the source tree.
std::filesystem::path docs_dir();

// The directory of the running executable (/proc/self/exe, links resolved); empty if unknown.
std::filesystem::path executable_dir();

}  // namespace meshwork
