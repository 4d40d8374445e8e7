#include "trainer/watchdog.h"

#include <chrono>
#include <cmath>
#include <sstream>

#include "trainer/store.h"

namespace meshwork::trainer {
namespace {

std::atomic<bool> g_firing{false};

bool point_to_point(FlightOpKind op) {
  return op == FlightOpKind::send || op == FlightOpKind::recv || op == FlightOpKind::send_recv;
}

std::string op_words(const FlightOp& op) {
  return std::string(to_string(op.op)) + " on " + op.group.name() + " #" + std::to_string(op.seq);
}

std::string ranks_words(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

std::string seconds_words(double s) {
  std::ostringstream o;
  o << static_cast<int64_t>(std::llround(s)) << " s";
  return o.str();
}

}  // namespace

std::string watchdog_key(int rank) { return "meshwork/flight/" + std::to_string(rank); }

bool watchdog_firing() { return g_firing.load(); }

std::string watchdog_verdict(const FlightState& mine, const std::vector<int>& members,
                             const std::map<int, FlightState>& published, double waited_s) {
  const FlightOp& c = *mine.current;
  // Who stands where: the same op at the same seq, another op or size there (a mismatch), not
  // there yet, or past it.
  std::vector<std::pair<int, FlightOp>> mismatched;
  std::vector<int> missing;
  std::vector<std::string> notes;
  for (int m : members) {
    if (m == mine.rank) continue;
    auto it = published.find(m);
    if (it == published.end()) {
      missing.push_back(m);
      continue;
    }
    const FlightState& s = it->second;
    if (s.current && s.current->group == c.group && s.current->seq == c.seq) {
      const bool same = point_to_point(c.op) ? point_to_point(s.current->op)
                                             : s.current->op == c.op && s.current->bytes == c.bytes;
      if (!same) mismatched.emplace_back(m, *s.current);
      continue;
    }
    const int64_t last = s.last_seq_of(c.group).value_or(0);
    if (last < c.seq) {
      missing.push_back(m);
      if (s.current)
        notes.push_back("rank " + std::to_string(m) + " waits in " + op_words(*s.current));
    } else {
      notes.push_back("rank " + std::to_string(m) + " is past it (entered #" + std::to_string(last) + ")");
    }
  }
  std::string out;
  if (!mismatched.empty()) {
    out = "watchdog: mismatch at " + c.group.name() + " #" + std::to_string(c.seq) + ": rank " +
          std::to_string(mine.rank) + " calls " + std::string(to_string(c.op)) + " (" + std::to_string(c.bytes) +
          " bytes)";
    for (const auto& [m, op] : mismatched)
      out += ", rank " + std::to_string(m) + " calls " + std::string(to_string(op.op)) + " (" +
             std::to_string(op.bytes) + " bytes)";
    out += "; waited " + seconds_words(waited_s);
  } else {
    out = "watchdog: " + op_words(c) + " waited " + seconds_words(waited_s) + "; ";
    out += missing.empty() ? "every member of the group entered it"
                           : ranks_words(missing) + " never entered it";
  }
  for (const auto& n : notes) out += "; " + n;
  return out;
}

Watchdog::Watchdog(const FlightRecorder& recorder, WatchdogConfig config, Fired fired)
    : recorder_(recorder), config_(std::move(config)), fired_(std::move(fired)) {
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::run() {
  using Clock = std::chrono::steady_clock;
  // The collective being watched (group slot and seq) and since when this thread has seen it.
  int watched_group = -1;
  int64_t watched_seq = 0;
  Clock::time_point since = Clock::now();
  const auto poll = std::chrono::duration<double>(config_.poll_s);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, poll, [this] { return stop_; })) {
    auto mine = recorder_.state();  // a seqlocked copy, once per poll
    const int group = mine && mine->current ? flight_group_slot(mine->current->group) : -1;
    const int64_t seq = group >= 0 ? mine->current->seq : 0;
    if (group < 0) {
      watched_group = -1;
      continue;
    }
    if (group != watched_group || seq != watched_seq) {
      watched_group = group;
      watched_seq = seq;
      since = Clock::now();
      continue;
    }
    const double waited = std::chrono::duration<double>(Clock::now() - since).count() + config_.poll_s;
    if (waited < config_.timeout_s) continue;
    lock.unlock();
    fire(*mine, waited);
    return;
  }
}

void Watchdog::fire(const FlightState& mine, double waited_s) {
  g_firing = true;
  const int slot = flight_group_slot(mine.current->group);
  const std::vector<int>& members = config_.members[static_cast<size_t>(slot)];
  std::map<int, FlightState> published;
  try {
    StoreHandle store(config_.store_host, config_.store_port, false,
                      std::chrono::milliseconds(static_cast<int64_t>(config_.grace_s * 1000) + 1000));
    store.set(watchdog_key(config_.rank), to_json(mine).dump());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(config_.grace_s);
    while (true) {
      for (int m : members) {
        if (m == config_.rank || published.count(m)) continue;
        if (auto v = store.try_get(watchdog_key(m))) {
          try {
            if (auto s = flight_state_from_json(nlohmann::json::parse(*v))) published.emplace(m, *s);
          } catch (const std::exception&) {
            // Not JSON: treated as not published.
          }
        }
      }
      if (published.size() + 1 >= members.size() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const std::exception&) {
    // The store is gone: the verdict from this rank's record alone (every member "never entered").
  }
  fired_(watchdog_verdict(mine, members, published, waited_s), mine);
}

}  // namespace meshwork::trainer
