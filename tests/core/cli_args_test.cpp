// core/cli_args.h: both value forms, switches, positional arguments, "--", last-wins, --help, and
// the exact words of every refusal.
#include "core/cli_args.h"

#include <gtest/gtest.h>

#include <limits>

namespace meshwork {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"--db", "PATH", "the run store"}, {"--steps", "N", "optimizer steps"}, {"--lr", "X", ""}, {"--json", "", ""}};

ParsedArgs parse_ok(const std::vector<std::string>& args) {
  auto r = parse_args(args, kFlags, "meshwork test");
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r.ok() ? *r : ParsedArgs{};
}

std::string refusal(const std::vector<std::string>& args) {
  auto r = parse_args(args, kFlags, "meshwork test");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message();
}

TEST(CliArgs, BothValueFormsSwitchesAndPositionalInOrder) {
  const ParsedArgs a = parse_ok({"run-1", "--db", "x.db", "--json", "--steps=5", "-", "--lr", "-1"});
  const std::vector<std::pair<std::string, std::string>> given = {
      {"--db", "x.db"}, {"--json", ""}, {"--steps", "5"}, {"--lr", "-1"}};
  EXPECT_EQ(a.given, given);
  EXPECT_EQ(a.positional, (std::vector<std::string>{"run-1", "-"}));
  EXPECT_TRUE(a.has("--json"));
  EXPECT_FALSE(a.has("--steps-x"));
  EXPECT_EQ(a.value("--db"), "x.db");
  EXPECT_EQ(a.value("--lr"), "-1");  // a value flag takes the next argument whatever it looks like
  EXPECT_EQ(a.value("--json"), "");
  EXPECT_EQ(a.value("--nope"), std::nullopt);
  EXPECT_FALSE(a.help);
}

TEST(CliArgs, EmptyInlineValueIsAValue) {
  const ParsedArgs a = parse_ok({"--db="});
  EXPECT_EQ(a.value("--db"), "");
}

TEST(CliArgs, LastOneWins) {
  const ParsedArgs a = parse_ok({"--steps", "1", "--steps=2", "--steps", "3"});
  EXPECT_EQ(a.given.size(), 3u);
  EXPECT_EQ(a.value("--steps"), "3");
  EXPECT_EQ(*a.integer("--steps", 1, 10, "1 to 10"), 3);
}

TEST(CliArgs, DoubleDashEndsTheFlags) {
  const ParsedArgs a = parse_ok({"--json", "--", "--db", "-h", "x"});
  EXPECT_EQ(a.given.size(), 1u);
  EXPECT_EQ(a.positional, (std::vector<std::string>{"--db", "-h", "x"}));
  EXPECT_FALSE(a.help);
}

TEST(CliArgs, HelpIsAlwaysAccepted) {
  EXPECT_TRUE(parse_ok({"--help"}).help);
  EXPECT_TRUE(parse_ok({"--db", "x", "-h"}).help);
  EXPECT_TRUE(parse_ok({"-h"}).given.empty());
}

TEST(CliArgs, RefusesInItsWords) {
  EXPECT_EQ(refusal({"--frob"}), "--frob: not an option of meshwork test (see --help)");
  EXPECT_EQ(refusal({"-x"}), "-x: not an option of meshwork test (see --help)");
  EXPECT_EQ(refusal({"--frob=1"}), "--frob: not an option of meshwork test (see --help)");
  EXPECT_EQ(refusal({"--json", "--db"}), "--db: needs a value: PATH");
  EXPECT_EQ(refusal({"--json=1"}), "--json: 1: takes no value");
  auto r = parse_args({"--steps"}, kFlags, "meshtrain");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "--steps");
  EXPECT_EQ(r.error().kind, ErrorKind::invalid_input);
}

TEST(CliArgs, IntegerBoundsFallbackAndRequired) {
  const ParsedArgs a = parse_ok({"--steps", "0"});
  EXPECT_EQ(*a.integer("--steps", 0, 5, "0 to 5"), 0);
  auto low = a.integer("--steps", 1, 5, "a whole number >= 1");
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.error().message(), "--steps: 0: a whole number >= 1");
  EXPECT_EQ(*a.integer("--db", 1, 5, "x", 4), 4);  // absent: the fallback
  auto missing = a.integer("--db", 1, 5, "a whole number >= 1");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "--db: missing: required: a whole number >= 1");
  for (const char* bad : {"", "8.0", "8x", "+8", " 8", "99999999999999999999", "0"}) {
    auto r = parse_integer("--tp", bad, 1, 5, "1 to 5");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message(), std::string("--tp") + (*bad ? std::string(": ") + bad : "") + ": 1 to 5");
  }
  auto high = parse_integer("--tp", "6", 1, 5, "a whole number >= 1");
  ASSERT_FALSE(high.ok());
  EXPECT_EQ(high.error().message(), "--tp: 6: a whole number >= 1 (at most 5)");
  EXPECT_EQ(*parse_integer("--tp", "-3", -5, 5, ""), -3);
  EXPECT_EQ(*parse_integer("--seed", "9223372036854775807", 0, std::numeric_limits<int64_t>::max(), ""),
            std::numeric_limits<int64_t>::max());
}

TEST(CliArgs, NumberBoundsFallbackAndRequired) {
  const ParsedArgs a = parse_ok({"--lr=3e-4"});
  EXPECT_DOUBLE_EQ(*a.number("--lr", 0, 1e9, "a number >= 0"), 3e-4);
  EXPECT_DOUBLE_EQ(*a.number("--steps", 0, 1, "x", 0.5), 0.5);
  auto missing = a.number("--steps", 0, 1, "a number in [0, 1]");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "--steps: missing: required: a number in [0, 1]");
  const double above_zero = std::numeric_limits<double>::denorm_min();  // "> 0"
  for (const char* bad : {"0", "-1", "nan", "-inf", "1x", "x", ""}) {
    auto r = parse_number("--lr", bad, above_zero, 1e9, "a number > 0");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message(), std::string("--lr") + (*bad ? std::string(": ") + bad : "") + ": a number > 0");
  }
  for (const char* bad : {"1e10", "inf"}) {
    auto r = parse_number("--lr", bad, above_zero, 1e9, "a number > 0");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().message(), std::string("--lr: ") + bad + ": a number > 0 (at most 1e+09)");
  }
  EXPECT_DOUBLE_EQ(*parse_number("--lr", "1e9", above_zero, 1e9, ""), 1e9);
}

TEST(CliArgs, HelpLinesAlignAndSkipFlagsWithoutHelp) {
  EXPECT_EQ(flags_help(kFlags, 16),
            "  --db PATH     the run store\n"
            "  --steps N     optimizer steps\n");
  EXPECT_EQ(flags_help({{"--a-long-flag", "VALUE", "wraps"}}, 10),
            "  --a-long-flag VALUE\n"
            "          wraps\n");
}

}  // namespace
}  // namespace meshwork
