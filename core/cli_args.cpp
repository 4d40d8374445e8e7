#include "core/cli_args.h"

#include <charconv>
#include <cstdlib>
#include <sstream>

namespace meshwork {

namespace {

const FlagSpec* find(const std::vector<FlagSpec>& flags, std::string_view name) {
  for (const FlagSpec& f : flags)
    if (f.name == name) return &f;
  return nullptr;
}

// The flag's value through `parse`; absent: the fallback, or required.
template <class T, class Parse>
Result<T> read_value(const ParsedArgs& args, std::string_view flag, std::string_view allowed,
                     std::optional<T> fallback, const Parse& parse) {
  if (std::optional<std::string> v = args.value(flag)) return parse(*v);
  if (fallback) return *fallback;
  return Error{std::string(flag), "missing", "required: " + std::string(allowed)};
}

}  // namespace

Result<ParsedArgs> parse_args(const std::vector<std::string>& args, const std::vector<FlagSpec>& flags,
                              std::string_view program) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    if (name == "--") {
      out.positional.insert(out.positional.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (name.size() < 2 || name[0] != '-') {
      out.positional.push_back(name);
      continue;
    }
    std::optional<std::string> value;
    if (auto eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if ((name == "--help" || name == "-h") && !value) {  // listed in `flags` or not
      out.help = true;
      continue;
    }
    const FlagSpec* spec = find(flags, name);
    if (!spec) return Error{name, "", "not an option of " + std::string(program) + " (see --help)"};
    if (spec->arg.empty()) {
      if (value) return Error{name, *value, "takes no value"};
      out.given.emplace_back(name, "");
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) return Error{name, "", "needs a value: " + spec->arg};
      value = args[++i];
    }
    out.given.emplace_back(name, std::move(*value));
  }
  return out;
}

bool ParsedArgs::has(std::string_view flag) const { return value(flag).has_value(); }

std::optional<std::string> ParsedArgs::value(std::string_view flag) const {
  for (auto it = given.rbegin(); it != given.rend(); ++it)
    if (it->first == flag) return it->second;
  return std::nullopt;
}

Result<int64_t> ParsedArgs::integer(std::string_view flag, int64_t min, int64_t max, std::string_view allowed,
                                    std::optional<int64_t> fallback) const {
  return read_value(*this, flag, allowed, fallback,
                    [&](const std::string& v) { return parse_integer(flag, v, min, max, allowed); });
}

Result<double> ParsedArgs::number(std::string_view flag, double min, double max, std::string_view allowed,
                                  std::optional<double> fallback) const {
  return read_value(*this, flag, allowed, fallback,
                    [&](const std::string& v) { return parse_number(flag, v, min, max, allowed); });
}

Result<int64_t> parse_integer(std::string_view flag, const std::string& text, int64_t min, int64_t max,
                              std::string_view allowed) {
  int64_t out = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || out < min)
    return Error{std::string(flag), text, std::string(allowed)};
  if (out > max) return Error{std::string(flag), text, std::string(allowed) + " (at most " + std::to_string(max) + ")"};
  return out;
}

Result<double> parse_number(std::string_view flag, const std::string& text, double min, double max,
                            std::string_view allowed) {
  char* end = nullptr;
  const double out = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(out >= min))
    return Error{std::string(flag), text, std::string(allowed)};
  if (out > max) {
    std::ostringstream most;
    most << max;
    return Error{std::string(flag), text, std::string(allowed) + " (at most " + most.str() + ")"};
  }
  return out;
}

std::string flags_help(const std::vector<FlagSpec>& flags, size_t column) {
  std::string out;
  for (const FlagSpec& f : flags) {
    if (f.help.empty()) continue;
    std::string left = "  " + f.name + (f.arg.empty() ? "" : " " + f.arg);
    if (left.size() < column) left.resize(column, ' ');
    else left += "\n" + std::string(column, ' ');
    out += left + f.help + "\n";
  }
  return out;
}

}  // namespace meshwork
