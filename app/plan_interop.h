// `meshwork plan --from FILE` and `--export FORMAT [--out FILE]`: the planner's side of the
// ecosystem's configs (core/interop). Reading reports on stderr what the file held that Meshwork
// does not use; exporting picks the best fitting shape the target tool accepts.
#pragma once

#include <optional>
#include <string>

#include "core/interop/ecosystem_config.h"
#include "core/planner.h"

namespace meshwork::cli {

// Reads FILE for `plan --from`; prints the format, the keys not used and any approximation to
// stderr.
Result<interop::ImportedConfig> read_plan_source(const std::string& path);

struct PlanExportOptions {
  interop::ConfigFormat format = interop::ConfigFormat::accelerate;
  std::optional<std::string> out;       // a file; unset: the config on stdout
  std::string model;                    // the run config's model (preset name, path or HF id)
  TrainingConfig training;              // lr, warmup, steps as planned or imported
};

// Writes the first fitting shape of `plan` that the tool accepts (the user's shape when every
// axis was fixed); the launch line of each node and the notes go to stderr (or stdout with --out).
// Returns the exit code.
int export_plan(const PlanQuery& q, const Plan& plan, const PlanExportOptions& options);

}  // namespace meshwork::cli
