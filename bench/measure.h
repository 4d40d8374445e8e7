// The clocks and the machine facts the C++ benchmarks measure with, one definition for all.
// Header-only: bench/ has no library of its own, each benchmark is one source file.
#pragma once

#include <time.h>

#include <chrono>
#include <fstream>
#include <vector>

namespace meshwork::bench {

// Seconds on the steady clock: for intervals, never for comparing with timestamps in files.
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds of this process, every thread together (user + system). On a shared, overloaded
// machine wall time measures the other processes as much as ours; CPU time is what the same work
// costs on an idle machine.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU milliseconds of the calling thread: what a phase cost it, apart from waiting for a core.
inline double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The machine's load average over 1, 5 and 15 minutes: a benchmark on a shared machine says how
// busy it was.
inline std::vector<double> load_average() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  in >> a >> b >> c;
  return {a, b, c};
}

}  // namespace meshwork::bench
