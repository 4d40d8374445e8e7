// Helpers of the meshtrain integration tests: start the real binary as a child process, read
// its metrics files, and compare a run with the 1-process run of the same model (parity).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "tests/scratch_dirs.h"
#include "trainer/free_port.h"

namespace meshwork::test {

namespace fs = std::filesystem;

inline fs::path temp_dir(const std::string& name) {
  const fs::path root = fs::temp_directory_path() / ("meshtrain-test-" + std::to_string(getpid()));
  return ::meshwork::test::fresh_scratch_dir(root, root / name);  // removed when every test passed
}

inline int next_port() { return free_tcp_port(); }

struct Proc {
  pid_t pid = -1;
};

// Starts meshtrain with `args`, stdout/stderr to files in `dir`.
inline Proc start(const std::vector<std::string>& args, const fs::path& dir) {
  Proc p;
  p.pid = fork();
  if (p.pid == 0) {
    FILE* out = freopen((dir / "stdout.txt").c_str(), "w", stdout);
    FILE* err = freopen((dir / "stderr.txt").c_str(), "w", stderr);
    (void)out;
    (void)err;
    std::vector<std::string> a = {MESHTRAIN_BIN};
    a.insert(a.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(MESHTRAIN_BIN, argv.data());
    _exit(127);
  }
  return p;
}

inline int wait_exit(const Proc& p) {
  int status = 0;
  waitpid(p.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline int run(const std::vector<std::string>& args, const fs::path& dir) { return wait_exit(start(args, dir)); }

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Step records of one rank's metrics file, by step.
// Evaluation records of one rank's metrics file, in order.
inline std::vector<EvalRecord> evals_of(const fs::path& metrics) {
  std::vector<EvalRecord> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto r = parse_metrics_line(line);
    if (r.ok() && std::holds_alternative<EvalRecord>(*r)) out.push_back(std::get<EvalRecord>(*r));
  }
  return out;
}

inline std::map<int64_t, StepRecord> steps_of(const fs::path& metrics) {
  std::map<int64_t, StepRecord> out;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    auto r = parse_metrics_line(line);
    if (r.ok() && std::holds_alternative<StepRecord>(*r)) {
      const auto& s = std::get<StepRecord>(*r);
      out[s.step] = s;
    }
  }
  return out;
}

// `model`: a preset name or a config.json (the pipeline tests need more layers than tiny's 2).
inline std::vector<std::string> base_args(const fs::path& dir, int steps, const std::string& model = "tiny") {
  return {"--model", model, "--steps", std::to_string(steps), "--seq-len", "64",
          "--global-batch", "8", "--micro-batch", "1", "--lr", "1e-3", "--warmup-steps", "2",
          "--run-dir", dir.string(), "--master-port", std::to_string(next_port())};
}

inline std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr int kParitySteps = 10;

// The 1-process run every parity test compares with. ctest runs each test in its own process,
// so the run is cached next to the binary, keyed by the binary's modification time: a rebuilt
// meshtrain reruns it. Written to a temporary name and renamed (atomic), so tests that start
// together may both compute it but never read half a file.
inline const std::map<int64_t, StepRecord>& reference_run(const std::string& model = "tiny",
                                                           int steps = kParitySteps) {
  static std::map<std::string, std::map<int64_t, StepRecord>> refs;
  const std::string key = model + "@" + std::to_string(steps);
  auto known = refs.find(key);
  if (known != refs.end()) return known->second;
  return refs[key] = [&] {
    const auto stamp = fs::last_write_time(MESHTRAIN_BIN).time_since_epoch().count();
    auto args = base_args("", steps, model);
    args.resize(args.size() - 4);  // run dir and port do not change the numbers
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    const fs::path cache = fs::path(MESHTRAIN_BIN).parent_path() /
                           ("parity-reference-" + std::to_string(stamp) + "-" +
                            std::to_string(std::hash<std::string>{}(joined)) + ".jsonl");
    auto cached = steps_of(cache);
    if (cached.size() == static_cast<size_t>(steps)) return cached;
    fs::path d = temp_dir("reference-" + std::to_string(std::hash<std::string>{}(key)));
    EXPECT_EQ(run(base_args(d, steps, model), d), 0) << slurp(d / "stderr.txt");
    const fs::path tmp = cache.string() + "." + std::to_string(getpid());
    std::error_code ec;
    fs::copy_file(d / "metrics-rank0.jsonl", tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, cache, ec);
    return steps_of(d / "metrics-rank0.jsonl");
  }();
}

// `got_out`: the run's step records of rank 0, for more checks by the caller.
inline void expect_parity(const std::string& name, int nproc, const std::vector<std::string>& shape,
                          const std::string& model = "tiny", std::map<int64_t, StepRecord>* got_out = nullptr) {
  const auto& ref = reference_run(model);
  ASSERT_EQ(ref.size(), static_cast<size_t>(kParitySteps));
  fs::path d = temp_dir(name);
  auto args = plus(base_args(d, kParitySteps, model), plus({"--nproc-per-node", std::to_string(nproc)}, shape));
  ASSERT_EQ(run(args, d), 0) << slurp(d / "stderr.txt") << slurp(d / "rank0.log");
  auto got = steps_of(d / "metrics-rank0.jsonl");
  ASSERT_EQ(got.size(), ref.size());
  for (const auto& [step, r] : ref) {
    const double rel = std::abs(got[step].loss - r.loss) / std::abs(r.loss);
    EXPECT_LT(rel, 1e-4) << name << " step " << step << ": " << got[step].loss << " vs " << r.loss;
  }
  // Every rank wrote a record per step, and communication was charged to the right axes.
  for (int r = 0; r < nproc; ++r)
    EXPECT_EQ(steps_of(d / ("metrics-rank" + std::to_string(r) + ".jsonl")).size(),
              static_cast<size_t>(kParitySteps));
  // Axes of size 1 are never charged; every axis > 1 communicates every step (tp: region
  // operators and the parallel cross-entropy, cp: the ring, dp_*: gradients).
  MeshShape mesh;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    if (shape[i].rfind("--", 0) != 0) continue;
    std::string name = shape[i].substr(2);
    for (char& ch : name)
      if (ch == '-') ch = '_';
    if (auto axis = axis_from_name(name)) mesh.set(*axis, std::stoi(shape[i + 1]));
  }
  for (const auto& [step, rec] : got)
    for (Axis a : kAxes) {
      const double c = rec.comm_s[a];
      if (mesh.size(a) == 1) EXPECT_EQ(c, 0.0) << name << " step " << step << " " << axis_name(a);
      else EXPECT_GT(c, 0.0) << name << " step " << step << " " << axis_name(a);
    }
  EXPECT_GT(got.rbegin()->second.mem_peak_bytes, 0);
  if (got_out) *got_out = got;
}

}  // namespace meshwork::test
