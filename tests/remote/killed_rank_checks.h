// What the SSH and the Slurm path must both show after rank 3 on node 1 was killed with SIGKILL:
// node 1's supervisor wrote its exit record (exit-node1.json in node 1's run directory) naming the
// rank, its node, the signal and the last step it logged, and the run's failure reason says the
// same in the words the user reads. `node_words` is how the reason names node 1 ("node1",
// "Slurm node n2").
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/exit_record.h"
#include "test_util.h"

namespace meshwork::remote::test {

inline void expect_rank3_killed_on_node1(const std::filesystem::path& node1_run_dir, const std::string& why,
                                         const std::string& node_words, int64_t min_last_step) {
  auto record = parse_exit_record(read_text(node1_run_dir / exit_record_file(1)));
  ASSERT_TRUE(record.ok()) << record.error().message();
  EXPECT_EQ(record->outcome, ExitOutcome::rank_failed);
  ASSERT_TRUE(record->failure.has_value());
  EXPECT_EQ(record->failure->rank, 3);
  EXPECT_EQ(record->failure->node, 1);
  EXPECT_EQ(record->failure->signal, SIGKILL);
  EXPECT_EQ(record->failure->progress.phase, RankPhase::training);
  EXPECT_GE(record->failure->progress.last_step, min_last_step);
  EXPECT_NE(why.find("node 1 (" + node_words + "), rank 3: killed by signal 9 (SIGKILL) after step " +
                     std::to_string(record->failure->progress.last_step)),
            std::string::npos) << why;
  EXPECT_NE(why.find("from the exit record exit-node1.json (rank_failed)"), std::string::npos) << why;
}

}  // namespace meshwork::remote::test
