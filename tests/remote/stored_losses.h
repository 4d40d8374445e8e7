// One rank's loss per step as the store holds it (through `runs export`'s CSV), for the tests
// that compare a re-planned run with the same run uninterrupted.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/store/run_store.h"

namespace meshwork::remote::test {

inline std::map<int64_t, double> stored_losses(const std::filesystem::path& db, store::RunId run, int rank = 0) {
  std::map<int64_t, double> out;
  auto s = store::RunStore::open(db);
  EXPECT_TRUE(s.ok());
  if (!s.ok()) return out;
  std::ostringstream csv;
  EXPECT_TRUE((*s)->export_csv(run, csv).ok());
  std::istringstream in(csv.str());
  const std::string rank_text = std::to_string(rank);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> c;
    std::stringstream ls(line);
    std::string cell;
    while (std::getline(ls, cell, ',')) c.push_back(cell);
    if (c.size() == 7 && c[1] == rank_text && c[5] == "loss") out[std::stoll(c[2])] = std::stod(c[6]);
  }
  return out;
}

}  // namespace meshwork::remote::test
