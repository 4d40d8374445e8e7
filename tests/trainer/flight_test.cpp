// The flight recorder seen from outside, with real processes: `meshtrain tail`'s S frames for a
// process that writes a flight record (trainer/flight_recorder.h) and then stops moving, is
// stopped, moves again and dies; and the real meshtrain with two Gloo ranks: a rank stopped by
// SIGSTOP shows where it is and where its peer waits for it; a mismatched collective (the
// test-only MESHTRAIN_TEST_MISMATCH) is named, both sides, by the watchdog in the end records and
// the supervisor's exit record. With expert parallelism the sparse mesh's collectives (the ep
// all-to-alls, the efsdp gathers and scatters) are marked in their own groups.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "core/exit_record.h"
#include "core/flight_record.h"
#include "core/follow_stream.h"
#include "core/hang_diagnosis.h"
#include "core/metrics.h"
#include "tests/trainer/meshtrain_runs.h"
#include "trainer/flight_recorder.h"

using namespace meshwork;
using namespace meshwork::test;

namespace {

volatile std::sig_atomic_t g_move = 0;
void on_usr1(int) { g_move = 1; }

// A rank stand-in: writes its flight record through the real recorder, then moves (a step) only
// when told by SIGUSR1.
// `host`: where the record says it runs (empty: this machine).
[[noreturn]] void recording_child(const fs::path& file, std::string_view host = {}) {
  std::signal(SIGUSR1, on_usr1);
  auto rec = trainer::FlightRecorder::open(file, 0, getpid(), host);
  if (!rec.ok()) _exit(3);
  (*rec)->phase(FlightPhase::forward, 1);
  int64_t step = 0;
  while (true) {
    if (g_move) {
      g_move = 0;
      (*rec)->step(++step);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Reads the tail's stdout until an S frame arrives (the test's deadline is ctest's timeout: the
// frames come in order, so every wait below ends).
struct TailReader {
  int fd = -1;
  follow::StreamParser parser;
  nlohmann::json next_stall() {
    while (true) {
      auto f = parser.next();
      EXPECT_TRUE(f.ok());
      if (!f.ok()) return nullptr;
      if (*f) {
        if ((*f)->kind == follow::Frame::Kind::stall) {
          EXPECT_EQ((*f)->a, 0);
          return nlohmann::json::parse((*f)->body);
        }
        continue;
      }
      char buf[4096];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return nullptr;
      parser.feed(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
};

fs::path flight_path(const fs::path& dir, int rank) { return dir / flight_file(rank); }

// The state of a rank's record once its generation has held still for a while (its process is
// stopped, or it waits in a collective).
FlightState settled_state(const fs::path& file) {
  uint64_t last = 0;
  int same = 0;
  while (true) {
    auto s = read_flight_file(file);
    EXPECT_TRUE(s.ok()) << s.error().message();
    if (!s.ok()) return {};
    same = s->generation == last ? same + 1 : 0;
    last = s->generation;
    if (same >= 10) return *s;  // a second without a change
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Every op entered on every group has completed (none in flight, none waited in).
bool all_completed(const FlightState& s) {
  if (s.current) return false;
  for (const auto& [group, seq] : s.last_seq) {
    bool done = false;
    for (const auto& op : s.recent) done = done || (op.group == group && op.seq == seq);
    if (!done) return false;
  }
  return true;
}

// Stops `victim` (SIGSTOP) until it is stopped between collectives with nothing in flight (its
// record is still while it is stopped); `stopped` is then its record.
bool stop_between_collectives(pid_t victim, const fs::path& record, FlightState& stopped) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    kill(victim, SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto s = read_flight_file(record);
    EXPECT_TRUE(s.ok()) << s.error().message();
    if (s.ok() && all_completed(*s) && s->phase != FlightPhase::ended) {
      stopped = *s;
      return true;
    }
    kill(victim, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(37));
  }
  ADD_FAILURE() << "the rank was never stopped between collectives";
  return false;
}

std::string end_reason(const fs::path& metrics) {
  std::ifstream in(metrics);
  std::string line, reason;
  while (std::getline(in, line)) {
    auto r = parse_metrics_line(line);
    if (r.ok() && std::holds_alternative<EndRecord>(*r)) reason = std::get<EndRecord>(*r).reason;
  }
  return reason;
}

}  // namespace

// `meshtrain tail` over `dir`, sent `request`; its S frames are read through reader.fd.
struct TailProcess {
  pid_t pid = -1;
  int in = -1;
  TailReader reader;
  TailProcess(const fs::path& dir, const std::string& request) {
    int in_pipe[2], out_pipe[2];
    if (pipe(in_pipe) != 0 || pipe(out_pipe) != 0) {
      ADD_FAILURE() << "pipe";
      return;
    }
    pid = fork();
    if (pid == 0) {
      dup2(in_pipe[0], 0);
      dup2(out_pipe[1], 1);
      close(in_pipe[1]);
      close(out_pipe[0]);
      execl(MESHTRAIN_BIN, MESHTRAIN_BIN, "tail", "--dir", dir.c_str(), "--no-liveness", "--poll-ms", "20",
            "--stall-ms", "300", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(in_pipe[0]);
    close(out_pipe[1]);
    in = in_pipe[1];
    reader.fd = out_pipe[0];
    EXPECT_EQ(write(in, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  }
  ~TailProcess() {
    int status = 0;
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, &status, 0);
    }
    close(in);
    close(reader.fd);
  }
};

TEST(MeshtrainTailFlight, ReportsAStallItsProcessStatesAndTheMoveAgain) {
  const fs::path dir = temp_dir("tail-flight");
  const pid_t child = fork();
  if (child == 0) recording_child(flight_path(dir, 0));
  while (!fs::exists(flight_path(dir, 0))) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  // Rank 1 is served too but has no flight record: it must send nothing.
  TailProcess tail(dir, follow::encode_request({{{0, 0, 2}}, {}}));
  TailReader& reader = tail.reader;

  // Not moving: stalled, the process running (asleep), the record as the rank wrote it.
  nlohmann::json s = reader.next_stall();
  EXPECT_EQ(s.at("stalled"), true);
  EXPECT_EQ(s.at("process"), "running");
  auto flight = flight_state_from_json(s.at("flight"));
  ASSERT_TRUE(flight.ok()) << flight.error().message();
  EXPECT_EQ(flight->pid, child);
  EXPECT_EQ(flight->phase, FlightPhase::forward);
  EXPECT_EQ(flight->layer, 1);

  // Stopped: the same stall again, with the new process state; continued: running again.
  kill(child, SIGSTOP);
  s = reader.next_stall();
  EXPECT_EQ(s.at("stalled"), true);
  EXPECT_EQ(s.at("process"), "stopped");
  kill(child, SIGCONT);
  s = reader.next_stall();
  EXPECT_EQ(s.at("stalled"), true);
  EXPECT_EQ(s.at("process"), "running");

  // It moves: one "stalled":false with the new step.
  kill(child, SIGUSR1);
  s = reader.next_stall();
  EXPECT_EQ(s.at("stalled"), false);
  EXPECT_EQ(s.at("flight").at("step"), 1);

  // It dies: stalled again (after --stall-ms), gone.
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  s = reader.next_stall();
  EXPECT_EQ(s.at("stalled"), true);
  EXPECT_EQ(s.at("process"), "gone");
}

// A record written on another host (a tail on a Slurm login node reading a shared run
// directory): the process its pid names here is not the rank's, so the state is "unknown", even
// though a process with that pid runs on this machine.
TEST(MeshtrainTailFlight, ARankOfAnotherHostHasAnUnknownProcess) {
  const fs::path dir = temp_dir("tail-flight-remote");
  const pid_t child = fork();
  if (child == 0) recording_child(flight_path(dir, 0), "gpu-node-17");
  while (!fs::exists(flight_path(dir, 0))) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  TailProcess tail(dir, follow::encode_request({{{0, 0, 1}}, {}}));
  TailReader& reader = tail.reader;
  nlohmann::json s = reader.next_stall();
  EXPECT_EQ(s.at("stalled"), true);
  EXPECT_EQ(s.at("process"), "unknown");
  EXPECT_EQ(s.at("flight").at("pid"), child);
  int status = 0;
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
}

// Rank 1 stopped outside any collective: rank 0 ends up waiting in a collective on a group
// whose sequence number is one past the last rank 1 entered there; rank 1's record shows its
// step and phase. Continued, the run finishes.
TEST(MeshtrainFlight, StoppedRankShowsWhereItIsAndWhereItsPeerWaits) {
  const fs::path d = temp_dir("flight-sigstop");
  // DDP: its only asynchronous collectives are the last micro-batch's gradient reductions, so
  // the rank is often between collectives with none in flight.
  Proc p = start(plus(base_args(d, 400), {"--nproc-per-node", "2", "--dp-replicate", "2"}), d);
  const fs::path m1 = d / "metrics-rank1.jsonl";
  while (steps_of(m1).empty()) {
    ASSERT_EQ(waitpid(p.pid, nullptr, WNOHANG), 0) << slurp(d / "stderr.txt");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t victim = std::stoi(slurp(d / "rank1.pid"));
  FlightState stopped;
  ASSERT_TRUE(stop_between_collectives(victim, flight_path(d, 1), stopped));
  EXPECT_EQ(stopped.pid, victim);
  EXPECT_GE(stopped.step, 1);
  EXPECT_TRUE(stopped.phase == FlightPhase::data || stopped.phase == FlightPhase::forward ||
              stopped.phase == FlightPhase::backward || stopped.phase == FlightPhase::optimizer)
      << to_json(stopped).dump();

  const FlightState waiting = settled_state(flight_path(d, 0));
  ASSERT_TRUE(waiting.current.has_value()) << to_json(waiting).dump();
  const int64_t peer_last = stopped.last_seq_of(waiting.current->group).value_or(0);
  EXPECT_EQ(waiting.current->seq, peer_last + 1)
      << "rank 0: " << to_json(waiting).dump() << "\nrank 1: " << to_json(stopped).dump();
  // Rank 1 has not moved while stopped.
  auto again = read_flight_file(flight_path(d, 1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->generation, stopped.generation);

  kill(victim, SIGCONT);
  EXPECT_EQ(wait_exit(p), 0) << slurp(d / "stderr.txt");
  EXPECT_EQ(steps_of(m1).size(), 400u);
  auto ended = read_flight_file(flight_path(d, 1));
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->phase, FlightPhase::ended);
  EXPECT_FALSE(ended->current.has_value());
}

// Rank 1 calls an all-gather where rank 0 calls an all-reduce (the same group and sequence
// number): both wait; the watchdogs (--collective-timeout 5) name the mismatch, both sides, in
// the end records and the supervisor's exit record, and the run stops.
TEST(MeshtrainFlight, WatchdogNamesAMismatchedCollective) {
  const fs::path d = temp_dir("flight-mismatch");
  setenv("MESHTRAIN_TEST_MISMATCH", "1:2", 1);
  Proc p = start(plus(base_args(d, 10), {"--nproc-per-node", "2", "--dp-shard", "2", "--collective-timeout", "5"}), d);
  unsetenv("MESHTRAIN_TEST_MISMATCH");
  const int code = wait_exit(p);
  EXPECT_NE(code, 0);
  for (int r = 0; r < 2; ++r) {
    const std::string reason = end_reason(d / ("metrics-rank" + std::to_string(r) + ".jsonl"));
    EXPECT_NE(reason.find("watchdog: mismatch at "), std::string::npos) << "rank " << r << ": " << reason;
    EXPECT_NE(reason.find("calls all_reduce"), std::string::npos) << reason;
    EXPECT_NE(reason.find("rank 1 calls all_gather"), std::string::npos) << reason;
  }
  EXPECT_LT(steps_of(d / "metrics-rank0.jsonl").size(), 3u);  // stopped at step 2
  auto rec = parse_exit_record(slurp(d / exit_record_file(0)));
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  ASSERT_TRUE(rec->failure.has_value());
  EXPECT_EQ(rec->failure->exit_code, 4);
  EXPECT_NE(rec->failure->reason.find("watchdog: mismatch at "), std::string::npos) << rec->failure->reason;
  EXPECT_NE(rec->failure->when().find("rank 1 calls all_gather"), std::string::npos) << rec->failure->when();
}

// Rank 1 stopped between collectives and left stopped: rank 0's watchdog (--collective-timeout 3)
// names the collective it waits in and rank 1 as the one that never entered it, in its end
// record and the supervisor's exit record; the run stops.
TEST(MeshtrainFlight, WatchdogNamesTheRankThatNeverEntered) {
  const fs::path d = temp_dir("flight-never-entered");
  Proc p = start(plus(base_args(d, 400), {"--nproc-per-node", "2", "--dp-replicate", "2", "--collective-timeout", "3"}), d);
  const fs::path m0 = d / "metrics-rank0.jsonl", m1 = d / "metrics-rank1.jsonl";
  while (steps_of(m1).empty()) {
    ASSERT_EQ(waitpid(p.pid, nullptr, WNOHANG), 0) << slurp(d / "stderr.txt");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t victim = std::stoi(slurp(d / "rank1.pid"));
  FlightState stopped;
  ASSERT_TRUE(stop_between_collectives(victim, flight_path(d, 1), stopped));
  while (end_reason(m0).empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(victim, SIGCONT);  // let the supervisor's stop reach it
  EXPECT_NE(wait_exit(p), 0) << slurp(d / "stderr.txt");
  const std::string reason = end_reason(m0);
  EXPECT_EQ(reason.rfind("watchdog: ", 0), 0u) << reason;
  EXPECT_NE(reason.find("rank 1 never entered it"), std::string::npos) << reason;
  auto rec = parse_exit_record(slurp(d / exit_record_file(0)));
  ASSERT_TRUE(rec.ok()) << rec.error().message();
  ASSERT_TRUE(rec->failure.has_value());
  EXPECT_EQ(rec->failure->rank, 0);
  EXPECT_EQ(rec->failure->exit_code, 4);
  EXPECT_EQ(rec->failure->reason, reason);
}

namespace {

// A mixture of experts small enough for four CPU ranks (Qwen3-MoE's config.json keys, random
// weights): 2 layers of 4 experts, 2 per token.
fs::path write_tiny_moe(const fs::path& dir) {
  const fs::path p = dir / "tiny-moe.json";
  std::ofstream(p) << R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_act":"silu",
    "hidden_size":64,"intermediate_size":128,"moe_intermediate_size":32,"num_hidden_layers":2,
    "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":256,
    "max_position_embeddings":256,"tie_word_embeddings":true,"rope_theta":10000.0,"rms_norm_eps":1e-5,
    "attention_bias":false,"use_sliding_window":false,"sliding_window":null,"num_experts":4,
    "num_experts_per_tok":2,"norm_topk_prob":true,"decoder_sparse_step":1,"mlp_only_layers":[],
    "output_router_logits":true,"router_aux_loss_coef":0.001})";
  return p;
}

}  // namespace

// dp_shard 4 with ep 2 (ep groups {0, 1} and {2, 3}, efsdp groups {0, 2} and {1, 3}): while the
// run goes, rank 0's record shows all-to-alls on ep with advancing sequence numbers; at the end
// the members of each sparse group entered the same number of collectives on it, and each
// micro-batch made 5 all-to-alls per sparse layer (counts, rows out and back forward; the two
// rows' gradients backward).
TEST(MeshtrainFlight, TheSparseMeshsCollectivesAreMarkedOnEpAndEfsdp) {
  const fs::path d = temp_dir("flight-ep");
  const int steps = 4;
  Proc p = start(plus(base_args(d, steps, write_tiny_moe(d).string()),
                      {"--nproc-per-node", "4", "--dp-shard", "4", "--ep", "2", "--global-batch", "8"}),
                 d);
  const FlightGroup ep = *flight_group_from_name("ep");
  const FlightGroup efsdp = *flight_group_from_name("efsdp");
  std::vector<int64_t> ep_seqs;  // rank 0's ep all-to-alls seen while running, in order
  while (waitpid(p.pid, nullptr, WNOHANG) == 0 && ep_seqs.size() < 3) {
    auto s = read_flight_file(flight_path(d, 0));
    if (s.ok()) {
      std::vector<FlightOp> ops = s->recent;
      if (s->current) ops.push_back(*s->current);
      for (const FlightOp& op : ops) {
        if (op.group != ep) continue;
        EXPECT_EQ(op.op, FlightOpKind::all_to_all);
        if (ep_seqs.empty() || op.seq > ep_seqs.back()) ep_seqs.push_back(op.seq);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(ep_seqs.size(), 3u) << "rank 0's record never showed ep all-to-alls advancing";
  EXPECT_EQ(wait_exit(p), 0) << slurp(d / "stderr.txt");
  std::vector<FlightState> end;
  for (int r = 0; r < 4; ++r) {
    auto s = read_flight_file(flight_path(d, r));
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ(s->phase, FlightPhase::ended);
    end.push_back(*s);
  }
  const int micro_batches = 8 / 4;
  const int64_t expected_ep = int64_t{steps} * micro_batches * 2 * 5;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(end[r].last_seq_of(ep).value_or(0), expected_ep) << "rank " << r << ": " << to_json(end[r]).dump();
    ASSERT_TRUE(end[r].last_seq_of(efsdp).has_value()) << to_json(end[r]).dump();
    EXPECT_GT(*end[r].last_seq_of(efsdp), 0);
  }
  EXPECT_EQ(end[0].last_seq_of(efsdp), end[2].last_seq_of(efsdp));
  EXPECT_EQ(end[1].last_seq_of(efsdp), end[3].last_seq_of(efsdp));
}

// dp_shard 2 with ep 2 (one ep group {0, 1}): rank 1 stopped between collectives, again until its
// peer waits for it on ep. Rank 0 then waits in an all-to-all on ep at rank 1's last ep seq + 1,
// and core's diagnosis of the two records names the wait on ep and rank 1 as the rank that never
// entered it; resumed, the run finishes.
TEST(MeshtrainFlight, AStoppedRankIsNamedFromItsPeersWaitInAnEpAllToAll) {
  const fs::path d = temp_dir("flight-ep-sigstop");
  const std::vector<std::string> shape = {"--nproc-per-node", "2", "--dp-shard", "2", "--ep", "2"};
  Proc p = start(plus(base_args(d, 150, write_tiny_moe(d).string()), shape), d);
  const fs::path m1 = d / "metrics-rank1.jsonl";
  while (steps_of(m1).empty()) {
    ASSERT_EQ(waitpid(p.pid, nullptr, WNOHANG), 0) << slurp(d / "stderr.txt");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const pid_t victim = std::stoi(slurp(d / "rank1.pid"));
  const FlightGroup ep = *flight_group_from_name("ep");
  FlightState stopped, waiting;
  bool on_ep = false;
  for (int attempt = 0; attempt < 40 && !on_ep; ++attempt) {
    if (attempt) kill(victim, SIGCONT);
    ASSERT_TRUE(stop_between_collectives(victim, flight_path(d, 1), stopped));
    waiting = settled_state(flight_path(d, 0));
    on_ep = waiting.current && waiting.current->group == ep;
  }
  ASSERT_TRUE(on_ep) << "rank 0 never waited on ep: " << to_json(waiting).dump();
  EXPECT_EQ(waiting.current->op, FlightOpKind::all_to_all);
  EXPECT_EQ(waiting.current->seq, stopped.last_seq_of(ep).value_or(0) + 1)
      << "rank 0: " << to_json(waiting).dump() << "\nrank 1: " << to_json(stopped).dump();

  DiagnosisInput in;
  in.shape = MeshShape(1, 2, 1, 1);
  in.shape.ep = 2;
  in.ranks_per_node = 2;
  in.hang_after_s = 0.5;  // the records have been still for a second
  in.now = std::max(waiting.activity, stopped.activity) + 1;
  in.started = in.now - 60;
  for (const FlightState* f : {&waiting, &stopped}) {
    RankObservation r;
    r.rank = f->rank;
    r.pid = f->pid;
    r.last_step_time = in.now - 1;
    r.flight = *f;
    r.stalled = true;
    r.process = f == &stopped ? "stopped" : "running";
    in.ranks.push_back(r);
  }
  const Diagnosis dx = diagnose(in);
  EXPECT_EQ(dx.state, HealthState::hang) << dx.summary();
  const std::string s = dx.summary();
  const std::string wait_words = "rank 0 waits in all_to_all on ep #" + std::to_string(waiting.current->seq);
  EXPECT_NE(s.find(wait_words), std::string::npos) << s;
  EXPECT_NE(s.find("rank 1 (node0, pid " + std::to_string(victim) + ") never entered it: stopped"), std::string::npos)
      << s;

  kill(victim, SIGCONT);
  EXPECT_EQ(wait_exit(p), 0) << slurp(d / "stderr.txt");
}
