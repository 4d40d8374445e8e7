// CPU steal: the time a hypervisor gave this machine's virtual CPUs to someone else.
//
// On a shared VM a burst of steal stops some ranks mid-step while the others wait for them at the
// next collective, so a step measured during it is slower than the hardware is, by far more than
// the stolen share (docs/estimator.md, "Split steps", has the measurements).
// `meshtrain calibrate` measures the steal over each split step and measures again what ran
// under too much of it; bench/shapes.sh does the same with its runs. Bare metal reports 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace meshwork {

// The aggregate "cpu" line of /proc/stat, in clock ticks: the steal column and the sum of the
// first eight (user nice system idle iowait irq softirq steal).
struct CpuTimes {
  uint64_t steal = 0;
  uint64_t total = 0;
};

// From /proc/stat's text; unset when it has no "cpu " line with at least eight numbers (kernels
// before 2.6.11 had no steal column).
std::optional<CpuTimes> parse_proc_stat(std::string_view text);
// This machine's, now; unset where /proc/stat cannot be read (not Linux).
std::optional<CpuTimes> read_cpu_times();
// Steal over total ticks between two readings, in [0, 1]; 0 when no tick passed or either is unset.
double steal_share(const std::optional<CpuTimes>& before, const std::optional<CpuTimes>& after);

// A measurement taken while more than this share of the CPUs was stolen is taken again.
inline constexpr double kStealLimit = 0.02;

}  // namespace meshwork
