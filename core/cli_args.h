// The one command-line flag parser of `meshwork`'s subcommands and `meshtrain`, so every command
// reads `--flag value`, `--flag=value`, switches, positional arguments and `--` alike and refuses
// in the same words (core/error.h's field: value: allowed):
//   --frob: not an option of meshwork runs list (see --help)
//   --db: needs a value: PATH
//   --json: 1: takes no value
// A caller lists its flags (several tables may be concatenated), parses, then reads the values
// (value(), integer(), number()) or walks `given` in command-line order to dispatch each flag to
// the table it came from. `--help` and `-h` are always accepted and set `help`.
//
//   static const std::vector<FlagSpec> kFlags = {{"--db", "PATH", "the run store"}, {"--json", "", ""}};
//   auto a = parse_args(args, kFlags, "meshwork runs list");
//   if (!a) return fail(a.error());
//   auto steps = a->integer("--steps", 1, 1'000'000'000, "a whole number >= 1", /*fallback=*/100);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"

namespace meshwork {

struct FlagSpec {
  std::string name;  // "--db" (or a short "-x")
  std::string arg;   // the value's placeholder, "PATH"; empty: a switch
  std::string help;  // one line for flags_help(); empty: left out of it
};

struct ParsedArgs {
  std::vector<std::pair<std::string, std::string>> given;  // in command-line order; "" for switches
  std::vector<std::string> positional;                     // every other argument, and all after "--"
  bool help = false;                                       // --help or -h was given

  bool has(std::string_view flag) const;
  std::optional<std::string> value(std::string_view flag) const;  // the last one given wins
  // The flag's value as a whole number in [min, max]; absent: `fallback`, or without one
  // Error{flag, "missing", "required: <allowed>"}. A bad value: as parse_integer() below.
  Result<int64_t> integer(std::string_view flag, int64_t min, int64_t max, std::string_view allowed,
                          std::optional<int64_t> fallback = std::nullopt) const;
  // The same for a real number in [min, max].
  Result<double> number(std::string_view flag, double min, double max, std::string_view allowed,
                        std::optional<double> fallback = std::nullopt) const;
};

// Parses `args` (the arguments after the program or subcommand name). A flag is an argument that
// starts with '-' and is longer than "-"; the argument after a value flag is its value whatever it
// looks like (`--lr -1`). Errors: an unknown flag is Error{flag, "", "not an option of <program>
// (see --help)"}; a value flag last is Error{flag, "", "needs a value: <ARG>"}; `--switch=x` is
// Error{switch, x, "takes no value"}.
Result<ParsedArgs> parse_args(const std::vector<std::string>& args, const std::vector<FlagSpec>& flags,
                              std::string_view program);

// One value on its own (for flag tables that apply each value as it comes): a whole number in
// [min, max] written as digits with an optional '-' ("8", not "8.0", "+8" or "8x"), or a real
// number in [min, max] (strtod's forms; nan refused; for "> 0" pass min = denorm_min()).
// Not a number or below min: Error{flag, text, allowed}; above max: allowed + " (at most <max>)".
Result<int64_t> parse_integer(std::string_view flag, const std::string& text, int64_t min, int64_t max,
                              std::string_view allowed);
Result<double> parse_number(std::string_view flag, const std::string& text, double min, double max,
                            std::string_view allowed);

// "  --flag ARG" padded to `column`, then the help; a longer left part gets a line of its own.
std::string flags_help(const std::vector<FlagSpec>& flags, size_t column = 34);

}  // namespace meshwork
