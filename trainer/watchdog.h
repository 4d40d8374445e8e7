// meshtrain's watchdog: a thread that watches this rank's flight record (trainer/flight_recorder.h)
// and, when the rank has been inside one collective longer than the run's collective_timeout
// (before the backend's own timeout fires, which would name no culprit), finds out why and stops
// the rank with that reason:
//   1. publishes its current op to the rendezvous store (key "meshwork/flight/<rank>": the flight
//      state JSON, core/flight_record.h);
//   2. waits a short grace for the other members of that group to publish theirs (every member
//      that waits in the same collective times out about as long after it);
//   3. names what it found: members at the same sequence number with another op or byte count
//      (a mismatch: a bug in the program), else the members that never entered it (their own
//      wait, when they published one), e.g.
//        "watchdog: all_gather on dp_shard #1234 waited 240 s; rank 7 never entered it"
//   4. hands that reason to its caller, which writes it into the rank's log and end record and
//      exits non-zero, so the supervisor stops the run with it as the root cause.
// A collective that completes before the timeout is no concern of the watchdog's.
// No LibTorch here (the store is trainer/store.h's).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/flight_layout.h"
#include "core/flight_record.h"
#include "trainer/flight_recorder.h"

namespace meshwork::trainer {

struct WatchdogConfig {
  double timeout_s = 240;  // TrainingConfig::collective_timeout
  double grace_s = 10;     // how long to wait for the group's members to publish
  double poll_s = 1;       // how often to look at the record
  int rank = 0;
  std::string store_host;  // the rendezvous store
  int store_port = 0;
  // Per group slot (flight_group_slot): the global ranks of this rank's group, in group order.
  std::array<std::vector<int>, kFlightGroupSlots> members;
};

// The store key a rank publishes its state under.
std::string watchdog_key(int rank);

// The verdict on `mine` (inside a collective) from what the members of its group published
// (rank -> state; members absent from `published` did not publish): the reason, in words.
// `waited_s`: how long this rank has waited.
std::string watchdog_verdict(const FlightState& mine, const std::vector<int>& members,
                             const std::map<int, FlightState>& published, double waited_s);

// True from the moment a watchdog of this process found a collective past its timeout: the
// rank's other failure paths then leave the ending to it (a peer that stopped first makes this
// rank's collective fail too, with an error that names no culprit).
bool watchdog_firing();

class Watchdog {
 public:
  using Fired = std::function<void(const std::string& reason, const FlightState& state)>;
  // Starts the thread. `fired` runs on it (and is expected not to return: it ends the process).
  Watchdog(const FlightRecorder& recorder, WatchdogConfig config, Fired fired);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void run();
  void fire(const FlightState& mine, double waited_s);

  const FlightRecorder& recorder_;
  WatchdogConfig config_;
  Fired fired_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace meshwork::trainer
