// Shared by the trainer tests: real Gloo collectives between ranks that are threads of this
// process (each its own Communicator, TCPStore client and Gloo connections over loopback TCP).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "trainer/free_port.h"
#include "trainer/comm.h"

namespace meshwork::trainer {

// Runs fn(comm) (or fn(comm, its options)) on world_size threads with the given shape, then a barrier; each rank's failure
// is reported as a test failure naming the rank.
template <class Fn>
void run_ranks(MeshShape shape, Fn fn, ReduceScatterImpl rs = ReduceScatterImpl::alltoall) {
  const int world = static_cast<int>(shape.world_size());
  const int port = free_tcp_port();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        CommOptions o;
        o.rank = r;
        o.world_size = world;
        o.ranks_per_node = world;
        o.shape = shape;
        o.master_port = port;
        o.host_store = r == 0;
        o.timeout = std::chrono::seconds(60);
        o.reduce_scatter = rs;
        auto comm = Communicator::create(o);
        if (!comm.ok()) throw std::runtime_error(comm.error().message());
        // fn(comm), or fn(comm, options) for a test that builds more communicators alike.
        if constexpr (std::is_invocable_v<Fn&, Communicator&, const CommOptions&>) fn(**comm, o);
        else fn(**comm);
        (*comm)->barrier((*comm)->world());
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace meshwork::trainer
