#include "trainer/flight_recorder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace meshwork::trainer {
namespace {

thread_local FlightRecorder* t_flight = nullptr;

double wall_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);  // the vDSO: no system call
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Error file_error(const std::filesystem::path& file, const std::string& what) {
  return Error{file.string(), "", what + ": " + std::strerror(errno)}.as(ErrorKind::io);
}

}  // namespace

FlightRecorder* thread_flight() { return t_flight; }
void set_thread_flight(FlightRecorder* recorder) { t_flight = recorder; }

Result<std::unique_ptr<FlightRecorder>> FlightRecorder::open(const std::filesystem::path& file, int rank,
                                                             int64_t pid, std::string_view host) {
  FlightLayout init;
  init.rank = rank;
  init.pid = pid;
  char name[256] = {};
  if (host.empty() && ::gethostname(name, sizeof name - 1) == 0) host = name;
  init.host_hash = flight_host_hash(host);
  init.phase = static_cast<int32_t>(FlightPhase::startup);
  init.phase_since = init.activity = wall_now();
  const std::filesystem::path tmp = file.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return file_error(tmp, "cannot be created");
  const char* p = reinterpret_cast<const char*>(&init);
  for (size_t done = 0; done < sizeof init;) {
    const ssize_t w = ::write(fd, p + done, sizeof init - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      Error e = file_error(tmp, "cannot be written");
      ::close(fd);
      return e;
    }
    done += static_cast<size_t>(w);
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    Error e = file_error(file, "cannot be renamed into place");
    ::close(fd);
    return e;
  }
  void* map = ::mmap(nullptr, sizeof(FlightLayout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return file_error(file, "cannot be mapped");
  return std::unique_ptr<FlightRecorder>(new FlightRecorder(file, static_cast<FlightLayout*>(map)));
}

FlightRecorder::~FlightRecorder() {
  if (t_flight == this) t_flight = nullptr;
  ::munmap(l_, sizeof(FlightLayout));
}

FlightRecorder::Ticket FlightRecorder::start(int group_slot, FlightOpKind op, int64_t bytes) {
  Ticket t;
  t.group = group_slot;
  t.op = static_cast<int32_t>(op);
  t.bytes = bytes;
  t.enter = wall_now();
  flight_begin_write(*l_);
  t.seq = ++l_->last_seq[group_slot];
  l_->activity = t.enter;
  flight_end_write(*l_);
  return t;
}

FlightRecorder::Ticket FlightRecorder::enter(int group_slot, FlightOpKind op, int64_t bytes) {
  Ticket t;
  t.group = group_slot;
  t.op = static_cast<int32_t>(op);
  t.bytes = bytes;
  t.enter = wall_now();
  flight_begin_write(*l_);
  t.seq = ++l_->last_seq[group_slot];
  l_->current = {t.group, t.op, t.seq, t.bytes, t.enter, 0};
  l_->in_collective = 1;
  l_->activity = t.enter;
  flight_end_write(*l_);
  return t;
}

void FlightRecorder::wait(const Ticket& t) {
  flight_begin_write(*l_);
  l_->current = {t.group, t.op, t.seq, t.bytes, t.enter, 0};
  l_->in_collective = 1;
  flight_end_write(*l_);
}

void FlightRecorder::exit() {
  const double now = wall_now();
  flight_begin_write(*l_);
  if (l_->in_collective) {
    FlightOpSlot& slot = l_->ring[l_->completed % kFlightRing];
    slot = l_->current;
    slot.exit = now;
    ++l_->completed;
    l_->in_collective = 0;
  }
  l_->activity = now;
  flight_end_write(*l_);
}

void FlightRecorder::phase(FlightPhase p, int layer) {
  const int32_t phase = static_cast<int32_t>(p);
  if (l_->phase == phase && l_->layer == layer) return;  // the only writer: no need to lock to read
  const double now = wall_now();
  flight_begin_write(*l_);
  l_->phase = phase;
  l_->layer = layer;
  l_->phase_since = now;
  l_->activity = now;
  flight_end_write(*l_);
}

void FlightRecorder::step(int64_t step) {
  const double now = wall_now();
  flight_begin_write(*l_);
  l_->step = step;
  l_->activity = now;
  flight_end_write(*l_);
}

Result<FlightState> FlightRecorder::state() const {
  FlightLayout copy;
  if (!snapshot_flight(*l_, copy, 100000))
    return Error{file_.string(), "generation", "kept changing: no stable snapshot of the flight record"};
  return flight_state_of(copy);
}

}  // namespace meshwork::trainer
