// Integration tests of the real meshtrain binary: several processes, real Gloo over loopback,
// the bundled corpus. Parity of every data-parallel shape with the 1-process run, loss falling,
// a killed rank stopping the run, and exact resume.
#include <gtest/gtest.h>

#include "tests/scratch_dirs.h"

#include <signal.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/exit_record.h"
#include "core/follow_stream.h"
#include "core/metrics.h"
#include "tests/trainer/meshtrain_runs.h"
#include "trainer/free_port.h"

namespace fs = std::filesystem;
using namespace meshwork;
using namespace meshwork::test;

namespace {


TEST(MeshtrainParity, DpReplicate2) { expect_parity("rep2", 2, {"--dp-replicate", "2"}); }
TEST(MeshtrainParity, DpShard2) { expect_parity("shard2", 2, {"--dp-shard", "2"}); }
TEST(MeshtrainParity, DpShard4) { expect_parity("shard4", 4, {"--dp-shard", "4"}); }
TEST(MeshtrainParity, Hsdp2x2) {
  expect_parity("hsdp", 4, {"--dp-replicate", "2", "--dp-shard", "2"});
}
TEST(MeshtrainParity, DpReplicate2ActivationCheckpointing) {
  expect_parity("rep2-ckpt", 2, {"--dp-replicate", "2", "--activation-checkpointing", "full"});
}
TEST(MeshtrainParity, DpShard2ActivationCheckpointing) {
  expect_parity("shard2-ckpt", 2, {"--dp-shard", "2", "--activation-checkpointing", "full"});
}
// Gradients summed over the 4 micro-batches, reduce-scattered once per step; with cp the
// shard group is dp_shard x cp.
TEST(MeshtrainParity, DpShard2GradSyncPerStep) {
  expect_parity("shard2-step", 2, {"--dp-shard", "2", "--fsdp-grad-sync", "step"});
}
TEST(MeshtrainParity, Hsdp2x2GradSyncPerStep) {
  expect_parity("hsdp-step", 4, {"--dp-replicate", "2", "--dp-shard", "2", "--fsdp-grad-sync", "step"});
}

// Tensor and context parallel shapes, alone and with every data-parallel axis (issue 4).
TEST(MeshtrainParity, Tp2) { expect_parity("tp2", 2, {"--tp", "2"}); }
TEST(MeshtrainParity, Tp2NoSequenceParallel) {
  expect_parity("tp2-nosp", 2, {"--tp", "2", "--sequence-parallel", "off"});
}
TEST(MeshtrainParity, Tp4) { expect_parity("tp4", 4, {"--tp", "4"}); }
TEST(MeshtrainParity, Cp2) { expect_parity("cp2", 2, {"--cp", "2"}); }
TEST(MeshtrainParity, Cp2Tp2) { expect_parity("cp2tp2", 4, {"--cp", "2", "--tp", "2"}); }
TEST(MeshtrainParity, DpShard2Tp2) { expect_parity("shard2tp2", 4, {"--dp-shard", "2", "--tp", "2"}); }
TEST(MeshtrainParity, DpShard2Cp2) { expect_parity("shard2cp2", 4, {"--dp-shard", "2", "--cp", "2"}); }
TEST(MeshtrainParity, DpReplicate2Tp2) {
  expect_parity("rep2tp2", 4, {"--dp-replicate", "2", "--tp", "2"});
}
TEST(MeshtrainParity, DpReplicate2DpShard2Tp2) {
  expect_parity("rep2shard2tp2", 8, {"--dp-replicate", "2", "--dp-shard", "2", "--tp", "2"});
}
TEST(MeshtrainParity, DpReplicate2DpShard2Cp2) {
  expect_parity("rep2shard2cp2", 8, {"--dp-replicate", "2", "--dp-shard", "2", "--cp", "2"});
}
TEST(MeshtrainParity, Cp2Tp2ActivationCheckpointing) {
  expect_parity("cp2tp2-ckpt", 4, {"--cp", "2", "--tp", "2", "--activation-checkpointing", "full"});
}

TEST(Meshtrain, LossFallsOnBundledCorpus) {
  fs::path d = temp_dir("falls");
  std::vector<std::string> args = {"--model", "small", "--steps", "15", "--seq-len", "64",
                                   "--global-batch", "8", "--micro-batch", "8", "--lr", "3e-3",
                                   "--warmup-steps", "3", "--run-dir", d.string()};
  ASSERT_EQ(run(args, d), 0) << slurp(d / "stderr.txt");
  auto s = steps_of(d / "metrics-rank0.jsonl");
  ASSERT_EQ(s.size(), 15u);
  double last = 0;
  for (int k = 12; k < 15; ++k) last += s[k].loss / 3;
  // ln(256) = 5.55 at init; byte-level English is far more predictable than uniform.
  EXPECT_GT(s[0].loss, 5.0);
  EXPECT_LT(last, s[0].loss - 1.5) << "first " << s[0].loss << " last5 " << last;
}

// One node without --master-port picks a free port (torchrun --standalone): a run is up on
// 29500 (here: a socket listening there, or whoever already holds it) and another starts anyway.
TEST(Meshtrain, OneNodeWithoutAPortRunsBesideAnotherRun) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(29500);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool ours = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && ::listen(fd, 1) == 0;
  // Either we hold 29500 now or something else does: it is busy for meshtrain either way.
  if (!ours) {
    const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_NE(::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << "29500 should be busy";
    ::close(probe);
  }
  fs::path d = temp_dir("port");
  std::vector<std::string> args = base_args(d, 2);
  args.resize(args.size() - 2);  // no --master-port
  ASSERT_EQ(run(plus(args, {"--nproc-per-node", "2", "--dp-shard", "2"}), d), 0) << slurp(d / "stderr.txt");
  EXPECT_EQ(steps_of(d / "metrics-rank1.jsonl").size(), 2u);
  ::close(fd);
}

TEST(Meshtrain, KilledRankStopsTheRunNamingIt) {
  fs::path d = temp_dir("kill");
  auto args = plus(base_args(d, 100000), {"--nproc-per-node", "4", "--dp-shard", "4"});
  Proc p = start(args, d);
  // Wait until rank 2 is training (it has written a step record).
  const fs::path m2 = d / "metrics-rank2.jsonl";
  for (int i = 0; i < 600 && steps_of(m2).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_FALSE(steps_of(m2).empty()) << slurp(d / "rank2.log");
  pid_t victim = std::stoi(slurp(d / "rank2.pid"));
  const auto t0 = std::chrono::steady_clock::now();
  kill(victim, SIGKILL);
  const int code = wait_exit(p);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(code, 0);
  EXPECT_LT(took, 10.0);
  const std::string err = slurp(d / "stderr.txt");
  EXPECT_NE(err.find("rank 2"), std::string::npos) << err;
  EXPECT_NE(err.find("KILL"), std::string::npos) << err;
  // No rank is left running, and every rank's metrics end with an end record.
  for (int r = 0; r < 4; ++r) {
    pid_t pid = std::stoi(slurp(d / ("rank" + std::to_string(r) + ".pid")));
    EXPECT_NE(kill(pid, 0), 0) << "rank " << r << " still runs";
    EXPECT_NE(slurp(d / ("metrics-rank" + std::to_string(r) + ".jsonl")).find("\"type\":\"end\""),
              std::string::npos);
  }
}

TEST(Meshtrain, ResumeEqualsUninterruptedRun) {
  const int steps = 8;
  fs::path a = temp_dir("uninterrupted");
  auto shape = std::vector<std::string>{"--nproc-per-node", "2", "--dp-shard", "2"};
  ASSERT_EQ(run(plus(base_args(a, steps), shape), a), 0) << slurp(a / "stderr.txt");
  auto full = steps_of(a / "metrics-rank0.jsonl");

  fs::path b = temp_dir("interrupted");
  auto bargs = plus(plus(base_args(b, steps), shape), {"--checkpoint-every", "4"});
  Proc p = start(bargs, b);
  const fs::path done4 = b / "checkpoints" / "step-00000004" / "COMPLETE";
  for (int i = 0; i < 600 && !fs::exists(done4); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  kill(p.pid, SIGTERM);  // stop the run (supervisor stops its ranks)
  wait_exit(p);
  ASSERT_TRUE(fs::exists(done4));
  // If the run got past step 8 before the stop, drop that checkpoint: resume must start at 4.
  fs::remove_all(b / "checkpoints" / "step-00000008");
  fs::path r = temp_dir("resumed");
  auto rargs = plus(plus(base_args(r, steps), shape),
                    {"--resume", "--checkpoint-dir", (b / "checkpoints").string()});
  ASSERT_EQ(run(rargs, r), 0) << slurp(r / "stderr.txt") << slurp(r / "rank0.log");
  auto resumed = steps_of(r / "metrics-rank0.jsonl");
  ASSERT_EQ(resumed.begin()->first, 4);
  ASSERT_EQ(resumed.size(), 4u);
  for (const auto& [step, rec] : resumed) EXPECT_EQ(rec.loss, full[step].loss) << "step " << step;
}

// Two nodes (two supervisors on this machine, as the remote launcher starts them): a run
// completes; then a rank on node 1 is killed and node 0's supervisor stops too, naming it. Each
// supervisor leaves its exit record: ok after the first run; after the kill node 1's names the
// rank, the signal and its last step, and node 0's the same failure, relayed.
TEST(Meshtrain, TwoSupervisorsShareFailures) {
  fs::path d = temp_dir("nodes");
  fs::path n0 = d / "n0", n1 = d / "n1";
  fs::create_directories(n0);
  fs::create_directories(n1);
  auto node_args = [&](int steps, int node, int port) {
    auto a = base_args(d / "run", steps);
    a[a.size() - 1] = std::to_string(port);  // --master-port
    return plus(a, {"--nnodes", "2", "--node-rank", std::to_string(node), "--nproc-per-node", "1",
                    "--dp-shard", "2"});
  };
  int port = next_port();
  Proc a = start(node_args(3, 0, port), n0);
  Proc b = start(node_args(3, 1, port), n1);
  EXPECT_EQ(wait_exit(b), 0) << slurp(n1 / "stderr.txt");
  EXPECT_EQ(wait_exit(a), 0) << slurp(n0 / "stderr.txt");
  EXPECT_EQ(steps_of(d / "run" / "metrics-rank1.jsonl").size(), 3u);
  for (int node : {0, 1}) {
    auto ok = parse_exit_record(slurp(d / "run" / exit_record_file(node)));
    ASSERT_TRUE(ok.ok()) << ok.error().message();
    EXPECT_EQ(ok->outcome, ExitOutcome::ok) << "node " << node;
    EXPECT_EQ(ok->exit_code, 0);
    EXPECT_EQ(ok->node, node);
    EXPECT_FALSE(ok->failure.has_value());
  }

  fs::remove_all(d / "run");
  port = next_port();
  a = start(node_args(100000, 0, port), n0);
  b = start(node_args(100000, 1, port), n1);
  const fs::path m1 = d / "run" / "metrics-rank1.jsonl";
  for (int i = 0; i < 600 && steps_of(m1).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_FALSE(steps_of(m1).empty());
  const auto t0 = std::chrono::steady_clock::now();
  kill(std::stoi(slurp(d / "run" / "rank1.pid")), SIGKILL);
  const int code_a = wait_exit(a);
  const int code_b = wait_exit(b);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(code_a, 0);
  EXPECT_NE(code_b, 0);
  EXPECT_LT(took, 10.0);
  EXPECT_NE(slurp(n0 / "stderr.txt").find("rank 1 on node 1"), std::string::npos) << slurp(n0 / "stderr.txt");
  EXPECT_NE(slurp(n1 / "stderr.txt").find("rank 1 on node 1"), std::string::npos) << slurp(n1 / "stderr.txt");
  auto own = parse_exit_record(slurp(d / "run" / exit_record_file(1)));
  ASSERT_TRUE(own.ok()) << own.error().message();
  EXPECT_EQ(own->outcome, ExitOutcome::rank_failed);
  EXPECT_EQ(own->exit_code, 3);
  ASSERT_TRUE(own->failure.has_value());
  EXPECT_EQ(own->failure->rank, 1);
  EXPECT_EQ(own->failure->node, 1);
  EXPECT_EQ(own->failure->signal, SIGKILL);
  EXPECT_EQ(own->failure->progress.phase, RankPhase::training);
  EXPECT_GE(own->failure->progress.last_step, 0);  // it had logged a step before the kill
  auto relayed = parse_exit_record(slurp(d / "run" / exit_record_file(0)));
  ASSERT_TRUE(relayed.ok()) << relayed.error().message();
  EXPECT_EQ(relayed->outcome, ExitOutcome::peer_failed);
  EXPECT_EQ(relayed->exit_code, 3);
  ASSERT_TRUE(relayed->failure.has_value());
  EXPECT_EQ(relayed->failure->rank, 1);
  EXPECT_EQ(relayed->failure->node, 1);
  EXPECT_EQ(relayed->failure->signal, SIGKILL);
  EXPECT_EQ(relayed->failure->time, own->failure->time);
}

TEST(MeshtrainCli, RefusesBadValuesNamingTheFlag) {
  fs::path d = temp_dir("cli");
  EXPECT_EQ(run({"--steps", "zero"}, d), 2);
  EXPECT_NE(slurp(d / "stderr.txt").find("--steps: zero"), std::string::npos);
  EXPECT_EQ(run({"--precision", "fp8"}, d), 2);
  EXPECT_NE(slurp(d / "stderr.txt").find("--precision"), std::string::npos);
  EXPECT_EQ(run({"--bogus"}, d), 2);
  EXPECT_NE(slurp(d / "stderr.txt").find("--bogus"), std::string::npos);
  // An invalid shape is refused by core's validation before any rank starts.
  EXPECT_EQ(run({"--nproc-per-node", "2", "--dp-shard", "3", "--run-dir", (d / "run").string()}, d), 2);
  EXPECT_FALSE(fs::exists(d / "run" / "rank0.pid"));
  EXPECT_FALSE(slurp(d / "stderr.txt").empty());
  // Model rules too, in core's words: 8 heads cannot be split over tp 3.
  EXPECT_EQ(run({"--nproc-per-node", "3", "--tp", "3", "--run-dir", (d / "run").string()}, d), 2);
  EXPECT_FALSE(fs::exists(d / "run" / "rank0.pid"));
  EXPECT_NE(slurp(d / "stderr.txt").find("meshtrain: tp: 3: "), std::string::npos) << slurp(d / "stderr.txt");
  EXPECT_EQ(run({"--sequence-parallel", "maybe"}, d), 2);
  EXPECT_NE(slurp(d / "stderr.txt").find("--sequence-parallel: maybe"), std::string::npos);
  EXPECT_EQ(run({"--help"}, d), 0);
  const std::string help = slurp(d / "stdout.txt");
  for (const char* flag : {"--model", "--data", "--steps", "--seq-len", "--global-batch", "--micro-batch",
                           "--lr", "--warmup-steps", "--seed", "--dp-replicate", "--dp-shard", "--cp",
                           "--tp", "--sequence-parallel", "--precision", "--activation-checkpointing", "--device", "--metrics",
                           "--run-dir", "--checkpoint-dir", "--checkpoint-every", "--resume",
                           "--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port"})
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
}

}  // namespace

// One tail serves every rank of a Slurm job from the login node: 8,192 files at 1,024 x 8, past
// the usual limit of 1,024 open files. With a limit of 64 descriptors (soft = hard, so it cannot
// be raised) the tail still streams all 300 files' lines, each exactly once, then the node's exit.
TEST(MeshtrainTail, ServesMoreFilesThanItsDescriptorLimit) {
  const fs::path dir = temp_dir("tail-many-files");
  constexpr int kRanks = 300;
  for (int r = 0; r < kRanks; ++r)
    std::ofstream(dir / ("metrics-rank" + std::to_string(r) + ".jsonl")) << "{\"rank\":" << r << "}\n";
  std::ofstream(dir / "node0.exit") << "0 1700000000\n";
  std::ofstream(dir / "request.txt") << follow::encode_request({{{0, 0, kRanks}}, {}});
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit lim{64, 64};
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(126);
    const int in = open((dir / "request.txt").c_str(), O_RDONLY);
    const int out = open((dir / "stream.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0) _exit(126);
    close(in);
    close(out);
    execl(MESHTRAIN_BIN, MESHTRAIN_BIN, "tail", "--dir", dir.c_str(), "--no-liveness", "--poll-ms", "10",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_EQ(wait_exit(Proc{pid}), 0);
  follow::StreamParser parser;
  parser.feed(slurp(dir / "stream.bin"));
  std::map<int64_t, std::string> lines;
  int exits = 0, ends = 0;
  while (true) {
    auto f = parser.next();
    ASSERT_TRUE(f.ok()) << f.error().message();
    if (!*f) break;
    const follow::Frame& fr = **f;
    if (fr.kind == follow::Frame::Kind::file) {
      EXPECT_EQ(fr.b, 0) << "rank " << fr.a;
      EXPECT_TRUE(lines.emplace(fr.a, fr.body).second) << "rank " << fr.a << " sent twice";
    }
    exits += fr.kind == follow::Frame::Kind::exit;
    ends += fr.kind == follow::Frame::Kind::end;
  }
  ASSERT_EQ(static_cast<int>(lines.size()), kRanks);
  for (const auto& [rank, body] : lines) EXPECT_EQ(body, "{\"rank\":" + std::to_string(rank) + "}\n");
  EXPECT_EQ(exits, 1);
  EXPECT_EQ(ends, 1);
}
