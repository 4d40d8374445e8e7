// The command-line flags that set run config fields (--model, --steps, --tp, --lr, ...), one
// table shared by `meshtrain` and `meshwork launch`, so both accept exactly the same flags with
// the same words and errors, and neither keeps a copy of the other's list.
//
//   for each flag given:  find_run_config_flag(name)->apply(config, value)
//   and back:             run_config_to_flags(config)  (every field, parseable again to equal)
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/run_config.h"

namespace meshwork {

struct RunConfigFlag {
  std::string name;  // "--seq-len"
  std::string arg;   // "T" (every run config flag takes a value)
  std::string help;
  std::function<Status(RunConfig&, const std::string& value)> apply;
};

const std::vector<RunConfigFlag>& run_config_flags();
const RunConfigFlag* find_run_config_flag(std::string_view name);  // nullptr: not one of them

// Every field as flags ("--steps", "100", ...): the model and data only when they are strings
// (an inline model object has no flag form; the config file carries it). Numbers are written
// with 17 significant digits, so they read back to the same double.
std::vector<std::string> run_config_to_flags(const RunConfig& config);

}  // namespace meshwork
