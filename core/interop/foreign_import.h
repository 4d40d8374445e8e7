// Importing runs other tools trained (`meshwork runs import`, the Runs view): TensorBoard event files
// (events.out.tfevents.*, Accelerate's and torchtitan's TensorBoard trackers) and Hugging Face
// Trainer's trainer_state.json. Their scalars are grouped by step, named as Meshwork names them
// where they mean the same (core/interop/foreign_metrics.h), and stored as rank 0's steps;
// what they lack (per-axis communication, ...) stays absent, not zero.
#pragma once

#include <filesystem>
#include <string>

#include "core/store/run_store.h"

namespace meshwork::interop {

enum class ForeignFormat { none, tfevents, trainer_state };
ForeignFormat foreign_format(const std::filesystem::path& path);
std::string_view to_string(ForeignFormat f);  // "tensorboard" | "trainer_state"

// Imports `path` into `run` from the offset the store holds for `source` (an event file is
// append-only: a re-import reads only what is new; trainer_state.json is read whole, and its
// points are stored once). A cut last record (a file still being written) is left for the
// next import; a corrupt record stops the file there, every intact record before it stored, and
// is returned in `warning` with its offset.
Result<store::IngestCounts> import_foreign_file(store::RunStore& st, store::RunId run,
                                                const std::filesystem::path& path,
                                                const std::string& source, std::string& warning);

}  // namespace meshwork::interop
