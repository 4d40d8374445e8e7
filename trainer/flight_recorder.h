// The flight recorder: this rank's record of what it is doing (core/flight_record.h), kept in
// RUN_DIR/flight-rank<r>.bin mapped MAP_SHARED, so that `meshtrain tail`, the watchdog and tests
// read it while the rank runs, hangs, is stopped or is gone. Recording is plain stores into the
// mapping between two bumps of the generation counter (the seqlock of core/flight_layout.h): no
// allocation, no system call, no lock. The clock is CLOCK_REALTIME through the vDSO.
//
// One writer at a time: the rank's training thread (and autograd's threads while it waits in
// backward). Communicator (trainer/comm.h) marks every collective; the training loop and the model
// mark phases, steps and decoder layers through the recorder of the calling thread
// (thread_flight()). No LibTorch here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "core/error.h"
#include "core/flight_layout.h"
#include "core/flight_record.h"

namespace meshwork::trainer {

class FlightRecorder {
 public:
  // Creates `file` (a whole initialized record written beside it and renamed into place, so a
  // reader never sees a partial one) and maps it. Errors name the file.
  // `host`: the host the rank runs on (its hash is kept in the record); empty: this machine's name.
  static Result<std::unique_ptr<FlightRecorder>> open(const std::filesystem::path& file, int rank, int64_t pid,
                                                      std::string_view host = {});
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // A collective this rank entered: its group slot (flight_group_slot), op, sequence number on
  // the group, input bytes and enter time.
  struct Ticket {
    int32_t group = -1;
    int32_t op = 0;
    int64_t seq = 0;
    int64_t bytes = 0;
    double enter = 0;
  };
  // A blocking collective: entered and waited in at once (current until exit()).
  Ticket enter(int group_slot, FlightOpKind op, int64_t bytes);
  // An asynchronous one: entered now (its seq counts), waited in later.
  Ticket start(int group_slot, FlightOpKind op, int64_t bytes);
  // The rank now blocks on `t` (current until exit()).
  void wait(const Ticket& t);
  // The current collective completed: into the ring, current cleared.
  void exit();

  void phase(FlightPhase p, int layer = -1);
  void step(int64_t step);

  // A consistent copy of the record (for the watchdog in this process).
  Result<FlightState> state() const;
  const FlightLayout& layout() const { return *l_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  FlightRecorder(std::filesystem::path file, FlightLayout* l) : file_(std::move(file)), l_(l) {}
  std::filesystem::path file_;
  FlightLayout* l_;
};

// The recorder of the rank this thread runs (null: none, e.g. calibration or the recorder off).
// Ranks run as threads in some tests, so it is per thread, not per process.
FlightRecorder* thread_flight();
void set_thread_flight(FlightRecorder* recorder);

// Marks a phase on this thread's recorder, if any.
inline void flight_phase(FlightPhase p, int layer = -1) {
  if (FlightRecorder* f = thread_flight()) f->phase(p, layer);
}

}  // namespace meshwork::trainer
