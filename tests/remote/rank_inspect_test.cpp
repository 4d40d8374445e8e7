// The command `meshwork diagnose --stack` runs on a rank's node (remote/rank_inspect.h), run here
// by a real shell against a real process: a debugger that leaves the process stopped (as one
// ended by its time bound while its attach stop is pending does; a stand-in `gdb` on PATH does it
// on purpose) has the process continued, while a process stopped before the inspection (the
// user's SIGSTOP, the hang being diagnosed) stays stopped.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/shell_quote.h"
#include "remote/rank_inspect.h"

namespace meshwork::remote {
namespace {

namespace fs = std::filesystem;

char state_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

bool wait_state(pid_t pid, char want) {
  for (int i = 0; i < 100; ++i) {
    if (state_of(pid) == want) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return state_of(pid) == want;
}

class RankInspect : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("meshwork-inspect-" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "bin");
    // A debugger that stops its target and exits, as gdb killed by `timeout` mid-attach does.
    std::ofstream gdb(dir_ / "bin" / "gdb");
    gdb << "#!/bin/sh\n"
           "while [ $# -gt 0 ]; do [ \"$1\" = -p ] && kill -STOP \"$2\"; shift; done\n"
           "echo '#0 stand-in frame'\n";
    gdb.close();
    fs::permissions(dir_ / "bin" / "gdb", fs::perms::owner_all);
    std::ofstream(dir_ / "rank3.log") << "step 1\nstep 2\n";
    child_ = fork();
    if (child_ == 0) {
      execl("/bin/sleep", "sleep", "120", static_cast<char*>(nullptr));
      _exit(127);
    }
    ASSERT_GT(child_, 0);
  }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::kill(child_, SIGCONT);
      waitpid(child_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // The inspection as the node's shell runs it, with the stand-in debugger first on PATH.
  std::string inspect() {
    const std::string cmd = "PATH=" + shell_quote((dir_ / "bin").string()) + ":$PATH; " +
                            inspect_command(child_, (dir_ / "rank3.log").string(), 30);
    const std::string out_file = (dir_ / "out").string();
    std::system(("sh -c " + shell_quote(cmd) + " > " + shell_quote(out_file) + " 2>&1").c_str());
    std::ifstream in(out_file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path dir_;
  pid_t child_ = -1;
};

TEST_F(RankInspect, AProcessTheDebuggerLeftStoppedIsContinued) {
  ASSERT_TRUE(wait_state(child_, 'S'));
  const std::string out = inspect();
  EXPECT_NE(out.find("tool: gdb"), std::string::npos) << out;
  EXPECT_NE(out.find("#0 stand-in frame"), std::string::npos) << out;
  EXPECT_NE(out.find("resumed: the debugger left it stopped"), std::string::npos) << out;
  EXPECT_NE(out.find("step 2"), std::string::npos) << out;
  EXPECT_TRUE(wait_state(child_, 'S')) << "state " << state_of(child_) << "\n" << out;
}

TEST_F(RankInspect, AProcessStoppedBeforeTheInspectionStaysStopped) {
  ASSERT_EQ(::kill(child_, SIGSTOP), 0);
  ASSERT_TRUE(wait_state(child_, 'T'));
  const std::string out = inspect();
  EXPECT_NE(out.find("tool: gdb"), std::string::npos) << out;
  EXPECT_EQ(out.find("resumed"), std::string::npos) << out;
  EXPECT_NE(out.find("state: T"), std::string::npos) << out;
  EXPECT_EQ(state_of(child_), 'T');
}

}  // namespace
}  // namespace meshwork::remote
