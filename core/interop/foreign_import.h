// Importing runs other tools trained (`meshwork runs import`, the Runs view): TensorBoard event files
// (events.out.tfevents.*, Accelerate's and torchtitan's TensorBoard trackers) and Hugging Face
// Trainer's trainer_state.json. Their scalars are grouped by step, named as Meshwork names them
// where they mean the same (core/interop/foreign_metrics.h), and stored as rank 0's steps;
// what they lack (per-axis communication, ...) stays absent, not zero.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

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

// The files of a run directory: meshtrain's metrics .jsonl, TensorBoard event files and
// trainer_state.json anywhere below `dir`, sorted, each with its path relative to `dir` (its
// source name in the store, so `meshwork runs import DIR` and the workbench resume each other's
// imports of the same directory).
std::vector<std::pair<std::filesystem::path, std::string>> run_files_below(const std::filesystem::path& dir);

// One pass over a run directory that may still be written: every file of run_files_below() read
// on from the offset the store holds for it. A file that appeared since the last pass (a tracker
// restarted into a new event file, a new checkpoint-N/trainer_state.json) is read from its
// start; meshtrain .jsonl files take complete lines only. Cut or corrupt records are appended to
// `warnings` (the intact records before them are stored); a file that cannot be read is an Error.
Result<store::IngestCounts> import_run_directory(store::RunStore& st, store::RunId run,
                                                 const std::filesystem::path& dir,
                                                 std::vector<std::string>& warnings);

}  // namespace meshwork::interop
