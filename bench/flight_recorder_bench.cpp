// The flight recorder's own cost per mark, measured in a loop: a blocking collective's enter +
// exit, an asynchronous one's start + wait + exit, and a phase change (what a decoder layer marks
// in forward and in backward). bench/flight_bench.py multiplies these by a step's marks.
// Prints one JSON object.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "trainer/flight_recorder.h"

using namespace meshwork;
using Clock = std::chrono::steady_clock;

template <class F>
double ns_per(int n, F&& f) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) f(i);
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
}

int main(int argc, char** argv) {
  const std::filesystem::path file = argc > 1 ? argv[1] : "/tmp/flight-recorder-bench.bin";
  auto rec = trainer::FlightRecorder::open(file, 0, getpid());
  if (!rec.ok()) {
    std::fprintf(stderr, "%s\n", rec.error().message().c_str());
    return 1;
  }
  trainer::FlightRecorder& r = **rec;
  constexpr int kN = 2'000'000;
  double best_sync = 1e9, best_async = 1e9, best_phase = 1e9;
  for (int round = 0; round < 5; ++round) {
    best_sync = std::min(best_sync, ns_per(kN, [&](int i) {
      r.enter(i & 7, FlightOpKind::all_gather, 4096);
      r.exit();
    }));
    best_async = std::min(best_async, ns_per(kN, [&](int i) {
      auto t = r.start(i & 7, FlightOpKind::all_reduce, 4096);
      r.wait(t);
      r.exit();
    }));
    best_phase = std::min(best_phase, ns_per(kN, [&](int i) {
      r.phase(i & 1 ? FlightPhase::forward : FlightPhase::backward, i & 15);
    }));
  }
  std::filesystem::remove(file);
  std::printf("{\"collective_ns\":%.1f,\"async_collective_ns\":%.1f,\"phase_ns\":%.1f}\n", best_sync, best_async,
              best_phase);
  return 0;
}
