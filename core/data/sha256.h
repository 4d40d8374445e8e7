// SHA-256 of a file, as lowercase hex (the manifest's fingerprints of tokenizers and inputs).
#pragma once

#include <filesystem>
#include <string>

#include "core/error.h"

namespace meshwork::data {

// Reads the file in 1 MiB blocks (OpenSSL's libcrypto; ~1 GB/s with SHA extensions). An unreadable
// file is Error{field, path, "cannot be read (<reason>)"} of kind io.
Result<std::string> sha256_file(const std::filesystem::path& path, const std::string& field);

}  // namespace meshwork::data
