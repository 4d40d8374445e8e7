// Handing a callable or a value from one thread to another through a queue ThreadSanitizer cannot
// see into, so that TSan still checks our side of the hand-over.
//
// Why: the workbench and the web server pass work between threads through Qt's event queue and
// thread pool (QMetaObject::invokeMethod, QThreadPool::start). Debian's Qt is not built with TSan,
// and Qt 6 locks with futexes, which TSan does not model; so TSan sees the lambda Qt keeps being
// written on one thread and read on another with nothing in between, and reports a race on every
// queued call. Suppressing those reports would also hide real races in the lambdas' captures.
// Instead the hand-over is declared where it happens, in our code:
//   - the callable Qt stores is our Handover; constructing it (in the posting thread, once it sits
//     where Qt keeps it) releases on its own address;
//   - calling it or destroying it (in the receiving thread) acquires on that address first, and
//     the call releases again when it returns (the destroying thread may be the posting one).
// Everything the posting thread wrote before the post is then ordered before everything the
// receiver does with it, which is exactly what Qt's locked queue guarantees; a capture touched by
// both threads after the post is still reported. Qt's own allocations and frees of its events
// stay Qt's business (scripts/sanitizers/tsan.supp says why they are suppressed there).
//
// Without TSan, Handover is the callable and the annotations compile to nothing.
#pragma once

#include <type_traits>
#include <utility>

#if defined(__SANITIZE_THREAD__)
#define MESHWORK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MESHWORK_TSAN 1
#endif
#endif

#if defined(MESHWORK_TSAN)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace meshwork {

// The posting thread is done with everything at `key`: what it wrote so far happens before what
// a thread does after handover_received(key).
inline void handover_sent([[maybe_unused]] const void* key) {
#if defined(MESHWORK_TSAN)
  __tsan_release(const_cast<void*>(key));
#endif
}

inline void handover_received([[maybe_unused]] const void* key) {
#if defined(MESHWORK_TSAN)
  __tsan_acquire(const_cast<void*>(key));
#endif
}

template <class F>
class Handover {
 public:
  explicit Handover(F f) : f_(std::move(f)) { handover_sent(this); }
  Handover(Handover&& other) : f_(std::move(other.f_)) { handover_sent(this); }
  Handover(const Handover& other) : f_(other.f_) { handover_sent(this); }
  Handover& operator=(const Handover&) = delete;
  Handover& operator=(Handover&&) = delete;
  // Qt may drop a queued call unrun (its context was destroyed); the captures die here then.
  ~Handover() { handover_received(this); }

  // Released again when the call returns: Qt may destroy the callable on the posting thread
  // (whichever thread drops the last reference to it), after the receiver used the captures.
  template <class... Args>
  decltype(auto) operator()(Args&&... args) {
    handover_received(this);
    struct SendBack {
      const void* key;
      ~SendBack() { handover_sent(key); }
    } send_back{this};
    return f_(std::forward<Args>(args)...);
  }

 private:
  F f_;
};

// handed_over([..] { ... }) wherever a lambda is posted to another thread's event loop or pool.
template <class F>
Handover<std::decay_t<F>> handed_over(F&& f) {
  return Handover<std::decay_t<F>>(std::forward<F>(f));
}

}  // namespace meshwork
