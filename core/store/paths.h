// Where the run store lives by default (XDG base directories): $XDG_DATA_HOME/meshwork/runs.db,
// else ~/.local/share/meshwork/runs.db. `--db PATH` overrides it everywhere.
#pragma once

#include <filesystem>

namespace meshwork::store {

std::filesystem::path default_db_path();

}  // namespace meshwork::store
