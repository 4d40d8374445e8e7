// The binary layout of RUN_DIR/flight-rank<r>.bin (core/flight_record.h): one fixed-size POD
// written in place by the rank through a MAP_SHARED mapping (trainer/flight_recorder.h) and read
// by other processes (core/flight_record.cpp). Native byte order and alignment: writer and readers
// run on the same node. A change of the layout bumps kFlightLayoutVersion.
//
// Consistency is a seqlock on `generation`: the writer makes it odd, stores, makes it even again
// (begin_write / end_write); a reader copies the struct between two loads of it and retries when
// they differ or are odd (snapshot_flight).
//
// Version 2 added the sparse mesh's group slots (ep, efsdp) after the world's: only last_seq grew,
// at the end of the record, so a version-1 file (kFlightLayoutV1Size bytes, slots 0..8 only) is
// still read, its expert slots zero (never used).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "core/flight_record.h"
#include "core/mesh.h"

namespace meshwork {

inline constexpr uint64_t kFlightMagic = 0x5448474c4657484dull;  // "MHWFLGHT" read little-endian
inline constexpr uint32_t kFlightLayoutVersion = 2;
// Group slots: the eight GroupKinds by their index, then the world, then the sparse mesh's groups
// by ExpertGroupKind (ep, efsdp).
inline constexpr int kFlightWorldSlot = static_cast<int>(kGroupKinds.size());
inline constexpr int kFlightExpertSlot = kFlightWorldSlot + 1;
inline constexpr int kFlightGroupSlots = kFlightExpertSlot + static_cast<int>(kExpertGroupKinds.size());
inline constexpr int kFlightV1GroupSlots = kFlightWorldSlot + 1;

struct FlightOpSlot {
  int32_t group = -1;  // 0..7: GroupKind, kFlightWorldSlot: world, then ep, efsdp; -1: empty
  int32_t op = 0;      // FlightOpKind
  int64_t seq = 0;
  int64_t bytes = 0;
  double enter = 0;
  double exit = 0;
};

struct FlightLayout {
  uint64_t magic = kFlightMagic;
  uint32_t version = kFlightLayoutVersion;
  int32_t rank = -1;
  uint64_t generation = 0;  // the seqlock; accessed through std::atomic_ref only
  int64_t pid = 0;
  int64_t step = -1;
  int32_t phase = 0;  // FlightPhase
  int32_t layer = -1;
  double phase_since = 0;
  double activity = 0;
  uint32_t in_collective = 0;  // 1: `current` holds the op the rank is inside
  // flight_host_hash() of the host the rank runs on; 0 in records written before it was kept. A
  // reader on another host (a tail on a Slurm login node reading a shared run directory) cannot
  // see the rank's process in its own /proc, and says so instead of guessing.
  uint32_t host_hash = 0;
  uint64_t completed = 0;      // collectives completed so far; ring[(completed - 1) % kFlightRing] is the newest
  FlightOpSlot current;
  FlightOpSlot ring[kFlightRing];
  int64_t last_seq[kFlightGroupSlots] = {};  // 0: the group was never used
};
static_assert(std::is_trivially_copyable_v<FlightLayout>);
static_assert(std::is_standard_layout_v<FlightLayout>);
// A version-1 record: the same fields with last_seq ending after the world's slot.
inline constexpr size_t kFlightLayoutV1Size = offsetof(FlightLayout, last_seq) + kFlightV1GroupSlots * sizeof(int64_t);
static_assert(sizeof(FlightLayout) == offsetof(FlightLayout, last_seq) + kFlightGroupSlots * sizeof(int64_t));

// FNV-1a of a hostname, never 0 (0 means "not recorded").
inline uint32_t flight_host_hash(std::string_view host) {
  uint32_t h = 2166136261u;
  for (unsigned char c : host) {
    h ^= c;
    h *= 16777619u;
  }
  return h ? h : 1;
}

inline int flight_group_slot(const FlightGroup& g) {
  if (g.expert) return kFlightExpertSlot + static_cast<int>(*g.expert);
  return g.world ? kFlightWorldSlot : static_cast<int>(g.kind);
}
// The group of a slot (0 <= slot < kFlightGroupSlots).
inline FlightGroup flight_group_of_slot(int slot) {
  FlightGroup g;
  if (slot >= kFlightExpertSlot)
    g.expert = kExpertGroupKinds[static_cast<size_t>(slot - kFlightExpertSlot)];
  else if (slot == kFlightWorldSlot)
    g.world = true;
  else
    g.kind = kGroupKinds[static_cast<size_t>(slot)];
  return g;
}

// Writer side (one writer at a time). Between begin and end the record is odd: readers retry.
inline void flight_begin_write(FlightLayout& l) {
  std::atomic_ref<uint64_t> gen(l.generation);
  gen.store(gen.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}
inline void flight_end_write(FlightLayout& l) {
  std::atomic_ref<uint64_t> gen(l.generation);
  gen.store(gen.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// Reader side: copies a consistent record into `out`; false when the writer kept moving for
// `tries` attempts.
inline bool snapshot_flight(const FlightLayout& l, FlightLayout& out, int tries = 1000) {
  std::atomic_ref<uint64_t> gen(const_cast<uint64_t&>(l.generation));
  for (int i = 0; i < tries; ++i) {
    const uint64_t g1 = gen.load(std::memory_order_acquire);
    if (g1 & 1) continue;
    std::memcpy(static_cast<void*>(&out), &l, sizeof out);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (gen.load(std::memory_order_relaxed) == g1) {
      out.generation = g1;
      return true;
    }
  }
  return false;
}

// The state of a consistent copy (a snapshot). Bad fields are an Error naming them.
Result<FlightState> flight_state_of(const FlightLayout& l);

}  // namespace meshwork
