// core/handover.h: a handed-over callable behaves as the callable itself (arguments, results,
// move-only captures, copies into std::function), whichever thread calls or destroys it.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "core/handover.h"

using namespace meshwork;

TEST(Handover, ForwardsArgumentsAndResults) {
  auto add = handed_over([](int a, const std::string& b) { return b + std::to_string(a); });
  EXPECT_EQ(add(4, "x"), "x4");
  EXPECT_EQ(add(2, "y"), "y2");  // callable again, like the lambda
  int calls = 0;
  auto count = handed_over([&calls] { ++calls; });
  count();
  count();
  EXPECT_EQ(calls, 2);
}

TEST(Handover, KeepsMoveOnlyCapturesAndCopiesIntoStdFunction) {
  auto owned = std::make_unique<int>(7);
  auto take = handed_over([p = std::move(owned)]() mutable { return *p * 6; });
  auto moved = std::move(take);
  EXPECT_EQ(moved(), 42);
  std::function<int()> f = handed_over([k = 5] { return k + 1; });
  std::function<int()> g = f;  // copied as Qt's thread pool copies its std::function
  EXPECT_EQ(f(), 6);
  EXPECT_EQ(g(), 6);
}

TEST(Handover, RunsAndDiesOnAnotherThread) {
  // What Qt does with a queued call: built here, called and destroyed there.
  auto shared = std::make_shared<std::string>("built on the posting thread");
  std::atomic<bool> destroyed{false};
  struct Flag {
    std::atomic<bool>* on_destroy = nullptr;
    ~Flag() {
      if (on_destroy) *on_destroy = true;
    }
  };
  auto flag = std::make_shared<Flag>();
  flag->on_destroy = &destroyed;
  auto job = std::make_unique<Handover<std::function<size_t()>>>(
      [shared, flag = std::move(flag)] { return shared->size(); });
  size_t seen = 0;
  std::thread t([&] {
    seen = (*job)();
    job.reset();
  });
  t.join();
  EXPECT_EQ(seen, shared->size());
  EXPECT_TRUE(destroyed);
  EXPECT_EQ(shared.use_count(), 1);
}
