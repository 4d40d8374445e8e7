// The supervisor's exit record (core/exit_record.h): its JSON both ways, the errors that name
// the field, and the progress a rank's metrics lines show.
#include <gtest/gtest.h>

#include <signal.h>

#include "core/exit_record.h"
#include "core/metrics.h"

using namespace meshwork;

namespace {

ExitRecord killed_rank() {
  ExitRecord r;
  r.node = 1;
  r.host = "n2";
  r.outcome = ExitOutcome::rank_failed;
  r.exit_code = 3;
  r.time = 1765012345.5;
  r.reason = "rank 3 on node 1: killed by signal KILL (9)";
  RankFailure f;
  f.rank = 3;
  f.node = 1;
  f.signal = SIGKILL;
  f.time = 1765012345.25;
  f.progress = {RankPhase::training, 7};
  r.failure = f;
  return r;
}

// The error of `j` after `edit`, as its message.
std::string error_after(void (*edit)(nlohmann::json&)) {
  nlohmann::json j = to_json(killed_rank());
  edit(j);
  auto r = exit_record_from_json(j);
  return r ? std::string("(no error)") : r.error().message();
}

}  // namespace

TEST(ExitRecord, RoundTripsAKilledRank) {
  const ExitRecord r = killed_rank();
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["failure"]["signal"], SIGKILL);
  EXPECT_FALSE(j["failure"].contains("exit_code"));  // one of the two, never both
  EXPECT_EQ(j["outcome"], "rank_failed");
  auto back = parse_exit_record(j.dump());
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->node, 1);
  EXPECT_EQ(back->host, "n2");
  EXPECT_EQ(back->outcome, ExitOutcome::rank_failed);
  EXPECT_EQ(back->exit_code, 3);
  EXPECT_EQ(back->time, r.time);
  EXPECT_EQ(back->reason, r.reason);
  ASSERT_TRUE(back->failure.has_value());
  EXPECT_EQ(back->failure->rank, 3);
  EXPECT_EQ(back->failure->node, 1);
  EXPECT_EQ(back->failure->signal, SIGKILL);
  EXPECT_EQ(back->failure->time, 1765012345.25);
  EXPECT_EQ(back->failure->progress.phase, RankPhase::training);
  EXPECT_EQ(back->failure->progress.last_step, 7);
  EXPECT_EQ(back->failure->how(), "killed by signal " + std::to_string(SIGKILL) + " (SIGKILL)");
  EXPECT_EQ(back->failure->when(), "after step 7");
}

TEST(ExitRecord, RoundTripsAnExitCodeAndARecordWithoutFailure) {
  ExitRecord r = killed_rank();
  r.failure->signal = 0;
  r.failure->exit_code = 1;
  r.failure->progress = {RankPhase::startup, -1};
  auto back = exit_record_from_json(to_json(r));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->failure->signal, 0);
  EXPECT_EQ(back->failure->exit_code, 1);
  EXPECT_EQ(back->failure->how(), "exited with code 1");
  EXPECT_EQ(back->failure->when(), "during startup (no metrics record yet)");

  ExitRecord ok;
  ok.node = 0;
  ok.outcome = ExitOutcome::ok;
  ok.time = 1765012000;
  const nlohmann::json j = to_json(ok);
  EXPECT_FALSE(j.contains("failure"));
  auto ok_back = exit_record_from_json(j);
  ASSERT_TRUE(ok_back.ok()) << ok_back.error().message();
  EXPECT_EQ(ok_back->outcome, ExitOutcome::ok);
  EXPECT_EQ(ok_back->exit_code, 0);
  EXPECT_FALSE(ok_back->failure.has_value());

  for (ExitOutcome o : {ExitOutcome::peer_failed, ExitOutcome::stopped, ExitOutcome::store_lost,
                        ExitOutcome::start_failed}) {
    ExitRecord e = ok;
    e.outcome = o;
    e.exit_code = 3;
    auto b = exit_record_from_json(to_json(e));
    ASSERT_TRUE(b.ok()) << to_string(o) << ": " << b.error().message();
    EXPECT_EQ(b->outcome, o);
  }
}

TEST(ExitRecord, ErrorsNameTheFieldTheValueAndWhatIsAllowed) {
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["v"] = 2; }),
            "v: 2: only version 1 exit records are supported");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j.erase("node"); }), "node: (missing): a whole number");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["node"] = -1; }),
            "node: -1: a whole number from 0 to 2147483647");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["outcome"] = "crashed"; }),
            "outcome: \"crashed\": one of ok, rank_failed, peer_failed, stopped, store_lost, start_failed");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["time"] = "noon"; }),
            "time: \"noon\": unix seconds (a number >= 0)");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["host"] = 7; }), "host: 7: a string");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["failure"]["signal"] = "KILL"; }),
            "failure.signal: \"KILL\": a whole number from 1 to 127");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["failure"].erase("rank"); }),
            "failure.rank: (missing): a whole number");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["failure"]["exit_code"] = 1; }),
            "failure.exit_code: 1: absent when \"signal\" is given");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["failure"].erase("signal"); }),
            "failure.exit_code: (missing): a whole number");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["failure"]["phase"] = "lunch"; }),
            "failure.phase: \"lunch\": one of startup, training, ended");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["failure"]["last_step"] = -2; }),
            "failure.last_step: -2: a whole number from -1 to 9223372036854775807");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["failure"]["last_step"] = UINT64_MAX; }),
            "failure.last_step: 18446744073709551615: a whole number from -1 to 9223372036854775807");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j["failure"] = 3; }), "failure: 3: a JSON object");
  EXPECT_EQ(error_after([](nlohmann::json& j) { j.erase("failure"); }),
            "failure: (missing): the failed rank, when \"outcome\" is \"rank_failed\"");

  auto not_json = parse_exit_record("rank 3 on node 1: killed");
  ASSERT_FALSE(not_json.ok());
  EXPECT_EQ(not_json.error().field, "exit record");
  EXPECT_EQ(not_json.error().value, "rank 3 on node 1: killed");
  auto array = parse_exit_record("[1,2]");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.error().message(), "exit record: [1,2]: a JSON object");
}

TEST(ExitRecord, RankProgressIsWhatTheLastCompleteMetricsLineShows) {
  EXPECT_EQ(rank_progress("").phase, RankPhase::startup);
  EXPECT_EQ(rank_progress("").last_step, -1);

  StartRecord start;
  start.rank = 3;
  StepRecord step;
  step.rank = 3;
  std::string lines = to_json_line(start) + "\n";
  EXPECT_EQ(rank_progress(lines).phase, RankPhase::training);
  EXPECT_EQ(rank_progress(lines).last_step, -1);

  for (int64_t k = 0; k < 5; ++k) {
    step.step = k;
    lines += to_json_line(step) + "\n";
  }
  EXPECT_EQ(rank_progress(lines).last_step, 4);
  // A tail cut mid-line at the front, and a line still being written at the end, are skipped.
  const size_t last_line = to_json_line(step).size() + 1;  // step 4's
  const std::string tail = lines.substr(lines.size() - last_line - 20);
  step.step = 5;
  const std::string half = to_json_line(step).substr(0, 30);
  const RankProgress p = rank_progress(tail + half);
  EXPECT_EQ(p.phase, RankPhase::training);
  EXPECT_EQ(p.last_step, 4);

  EndRecord end;
  end.rank = 3;
  end.status = "failed";
  const RankProgress ended = rank_progress(lines + to_json_line(end) + "\n");
  EXPECT_EQ(ended.phase, RankPhase::ended);
  EXPECT_EQ(ended.last_step, 4);
  RankFailure f;
  f.progress = ended;
  EXPECT_EQ(f.when(), "after its end record");
  // A failed end record's reason is the rank's own word on why it ended.
  end.reason = "watchdog: all_reduce on dp_cp #3 waited 5 s; rank 1 never entered it";
  f.reason = failed_end_reason(lines + to_json_line(end) + "\n");
  EXPECT_EQ(f.reason, end.reason);
  EXPECT_EQ(f.when(), "after its end record: " + end.reason);
  EXPECT_EQ(failed_end_reason(lines), "");
  ExitRecord rec = killed_rank();
  rec.failure->reason = f.reason;
  auto back = exit_record_from_json(to_json(rec));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->failure->reason, end.reason);
  f.reason.clear();
  f.progress = {RankPhase::training, -1};
  EXPECT_EQ(f.when(), "before its first step");
}
