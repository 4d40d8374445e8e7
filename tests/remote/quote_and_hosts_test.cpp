#include <gtest/gtest.h>

#include <filesystem>

#include "remote/host_spec.h"
#include "remote/node.h"
#include "core/shell_quote.h"

namespace meshwork::remote {
namespace {

TEST(ShellQuote, SafeWordsStayPlain) {
  EXPECT_EQ(shell_quote("meshtrain"), "meshtrain");
  EXPECT_EQ(shell_quote("/a/b-c_d.e"), "/a/b-c_d.e");
  EXPECT_EQ(shell_quote("--dp-shard=2"), "--dp-shard=2");
}

TEST(ShellQuote, HostileWordsAreSingleQuoted) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("x; rm -rf /"), "'x; rm -rf /'");
  EXPECT_EQ(shell_quote("$(id)`id`"), "'$(id)`id`'");
  EXPECT_EQ(shell_quote("~/x"), "'~/x'");
}

// The quoting is proven by a real shell: echo each hostile word back through sh -c and compare.
TEST(ShellQuote, RoundTripsThroughARealShell) {
  auto node = make_local_node();
  const std::vector<std::string> words = {
      "plain", "with space", "it's", "double\"quote", "semi;colon", "$(touch /tmp/mw-pwned)",
      "`id`", "back\\slash", "new\nline", "tab\there", "*", "~", "-n", "'", "''", "a'b\"c;d$e"};
  std::string cmd = "for a in " + shell_join(words) + "; do printf '%s\\0' \"$a\"; done";
  auto r = node->exec(cmd, std::chrono::seconds(10), {});
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->exit_code, 0) << r->err;
  std::vector<std::string> got;
  std::string cur;
  for (char c : r->out) {
    if (c == '\0') {
      got.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  EXPECT_EQ(got, words);
  EXPECT_FALSE(std::filesystem::exists("/tmp/mw-pwned"));
}

TEST(HostSpec, ParsesTheForms) {
  auto a = parse_host_spec("node1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "node1");
  EXPECT_EQ(a->port, 0);
  auto b = parse_host_spec("alice@10.0.0.2:2222");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->user, "alice");
  EXPECT_EQ(b->host, "10.0.0.2");
  EXPECT_EQ(b->port, 2222);
  EXPECT_EQ(b->to_string(), "alice@10.0.0.2:2222");
  auto c = parse_host_spec("[fe80::1]:22");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "fe80::1");
  EXPECT_EQ(c->to_string(), "[fe80::1]:22");
  auto d = parse_host_spec("fe80::2");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->host, "fe80::2");
  EXPECT_TRUE(parse_host_spec("local")->is_local());
}

TEST(HostSpec, PrintsToTextThatParsesBackToItself) {
  // Found by the host fuzzer: "[fe80:21]" (a bracketed host, no port) printed as "fe80:21",
  // which reads back as host fe80, port 21.
  for (const char* text : {"[fe80:21]", "fe80::2", "[fe80::1]:22", "bob@gpu01", "gpu01:2200"}) {
    auto spec = parse_host_spec(text);
    ASSERT_TRUE(spec.ok()) << text;
    auto again = parse_host_spec(spec->to_string());
    ASSERT_TRUE(again.ok()) << spec->to_string();
    EXPECT_EQ(*again, *spec) << text << " -> " << spec->to_string();
  }
  EXPECT_EQ(parse_host_spec("[fe80:21]")->to_string(), "[fe80:21]");
  EXPECT_EQ(parse_host_spec("fe80::2")->to_string(), "[fe80::2]");
}

TEST(HostSpec, RefusesBadInputNamingTheField) {
  for (const char* bad : {"", "host:0", "host:99999", "host:x", "@host", "a b", "-oProxyCommand=x",
                          "h\nx", "[::1", "[[x]", "a]b"}) {
    auto r = parse_host_spec(bad, "--hosts");
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().field, "--hosts");
    }
  }
}

TEST(Hostfile, DeepSpeedFormatWithComments) {
  auto r = parse_hostfile(
      "# two nodes\n"
      "worker-1 slots=8   # the first\n"
      "\n"
      "  bob@worker-2:2200\tslots=4\n"
      "worker-3\n",
      "hf");
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].spec.host, "worker-1");
  EXPECT_EQ((*r)[0].slots, 8);
  EXPECT_EQ((*r)[1].spec.user, "bob");
  EXPECT_EQ((*r)[1].spec.port, 2200);
  EXPECT_EQ((*r)[1].slots, 4);
  EXPECT_EQ((*r)[2].slots, 0);
}

TEST(Hostfile, ErrorsNameFileAndLine) {
  auto r = parse_hostfile("a slots=2\nb slots=zero\n", "hf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().field, "hf:2");
  EXPECT_EQ(r.error().value, "slots=zero");
  EXPECT_FALSE(parse_hostfile("# nothing\n", "hf").ok());
  EXPECT_FALSE(parse_hostfile("a gpus=2\n", "hf").ok());
}

TEST(HostList, CommaSeparated) {
  auto r = parse_host_list("n0,root@n1:22");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].spec.port, 22);
  EXPECT_FALSE(parse_host_list("n0,,n1").ok());
}

TEST(LocalNode, ExecCapturesOutErrAndStatus) {
  auto node = make_local_node();
  auto r = node->exec("echo out; echo err >&2; exit 3", std::chrono::seconds(10), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "out\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_EQ(r->exit_code, 3);
  auto s = node->exec("cat", std::chrono::seconds(10), "stdin text");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->out, "stdin text");
  auto t = node->exec("sleep 5", std::chrono::seconds(1), {});
  EXPECT_FALSE(t.ok());
}

}  // namespace
}  // namespace meshwork::remote
