// `meshwork serve` against hostile clients (docs/web.md "Limits"): real sockets on loopback, each
// flood in a client thread of its own while the server runs on this thread's event loop, the
// process's resident memory (VmRSS) read throughout. Every loop is bounded by a byte count and a
// deadline; a legitimate client asks for the runs list meanwhile. (One file of ~600 lines: every
// case shares the raw-socket client and the flood harness at its top.)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <QCoreApplication>
#include <QEventLoop>
#include <QTimer>
#include <QWebSocket>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/web/one_run_store_test.h"
#include "tests/web/web_fixture.h"
#include "web/server.h"

namespace meshwork::web {
namespace {

using Clock = std::chrono::steady_clock;
using testing::RunSpec;
using testing::TempDir;

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kMaxGrowthKiB = 16 * 1024;

int64_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// A blocking client socket whose sends and receives give up after `timeout_ms`.
int connect_to(quint16 port, int timeout_ms = 2000) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Whatever is readable now (no wait); false once the server closed or reset the connection.
bool drain(int fd, std::string& into) {
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
      continue;
    }
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// Reads until the server closes the connection or `timeout_ms` pass; true if it closed.
bool read_until_closed(int fd, std::string& into, int timeout_ms) {
  const auto start = Clock::now();
  while (ms_since(start) < timeout_ms) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    if (!drain(fd, into)) return true;
  }
  return false;
}

// One GET on a fresh connection: the status (0: no answer) and how long it took.
std::pair<int, int64_t> get(quint16 port, const std::string& path, std::string* body = nullptr) {
  const auto start = Clock::now();
  const int fd = connect_to(port, 5000);
  if (fd < 0) return {0, ms_since(start)};
  std::string answer;
  if (send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")) {
    // Until the head and Content-Length bytes of body are in (the connection stays open).
    while (ms_since(start) < 5000) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) > 0 && !drain(fd, answer)) break;
      const size_t end = answer.find("\r\n\r\n");
      const size_t cl = answer.find("Content-Length: ");
      if (end != std::string::npos && cl != std::string::npos && cl < end &&
          answer.size() >= end + 4 + std::stoull(answer.substr(cl + 16)))
        break;
    }
  }
  ::close(fd);
  const int64_t ms = ms_since(start);
  if (answer.rfind("HTTP/1.1 ", 0) != 0) return {0, ms};
  if (body) *body = answer.substr(std::min(answer.size(), answer.find("\r\n\r\n") + 4));
  return {std::stoi(answer.substr(9, 3)), ms};
}

// Runs `client` on a thread of its own while this thread serves; meanwhile a legitimate client
// asks for the runs list every 50 ms. Returns the largest RSS growth seen (KiB) and the
// legitimate requests' statuses and latencies.
struct FloodResult {
  int64_t growth_kib = 0;
  std::vector<std::pair<int, int64_t>> legit;
  int64_t legit_median_ms() const {
    std::vector<int64_t> ms;
    for (const auto& [status, t] : legit) ms.push_back(t);
    if (ms.empty()) return -1;
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  bool legit_all_ok() const {
    return !legit.empty() && std::all_of(legit.begin(), legit.end(), [](const auto& l) { return l.first == 200; });
  }
};

FloodResult flood_while_serving(quint16 port, const std::function<void()>& client, int deadline_ms = 60000) {
  FloodResult r;
  const int64_t before = rss_kib();
  int64_t peak = before;
  std::atomic<bool> done{false};
  std::mutex legit_mutex;
  std::thread flood([&] {
    client();
    done = true;
  });
  std::thread legit([&] {
    for (int i = 0; i < 3 || !done; ++i) {  // at least 3, however soon the flood is refused
      auto l = get(port, "/api/runs");
      {
        std::lock_guard<std::mutex> lock(legit_mutex);
        r.legit.push_back(l);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  QEventLoop loop;
  QTimer tick;
  QObject::connect(&tick, &QTimer::timeout, [&] {
    peak = std::max(peak, rss_kib());
    if (done) loop.quit();
  });
  tick.start(5);
  QTimer::singleShot(deadline_ms, &loop, &QEventLoop::quit);
  loop.exec();
  tick.stop();
  // Keep serving until the legitimate client's last request is answered.
  std::atomic<bool> joined{false};
  std::thread joiner([&] {
    flood.join();
    legit.join();
    joined = true;
  });
  QTimer poll_joined;
  QObject::connect(&poll_joined, &QTimer::timeout, [&] {
    if (joined) loop.quit();
  });
  poll_joined.start(5);
  loop.exec();
  joiner.join();
  r.growth_kib = std::max(peak, rss_kib()) - before;
  std::cout << "[ measured ] RSS growth " << r.growth_kib << " KiB; " << r.legit.size()
            << " legitimate requests, median " << r.legit_median_ms() << " ms\n";
  return r;
}

// Sends `head`, then chunks until `total` bytes or until the server stops taking them; what the
// server answered meanwhile is returned.
std::string stream_request(quint16 port, const std::string& head, const std::string& chunk, int64_t total) {
  const int fd = connect_to(port, 1000);
  if (fd < 0) return {};
  std::string answer;
  bool open = send_all(fd, head);
  for (int64_t sent = 0; open && sent < total; sent += static_cast<int64_t>(chunk.size())) {
    open = send_all(fd, chunk) && drain(fd, answer);
  }
  read_until_closed(fd, answer, 3000);
  ::close(fd);
  return answer;
}

class LimitsTest : public testing::OneRunStoreTest {
 protected:
  LimitsTest() : OneRunStoreTest(3000) {}
  std::unique_ptr<WebServer> serve(const ConnectionLimits& limits = {}) {
    WebServer::Options o;
    o.db = db_;
    o.listen = *parse_listen("127.0.0.1:0");
    o.poll_ms = 50;
    o.limits = limits;
    auto s = WebServer::start(o);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message());
    if (!s.ok()) return nullptr;
    // Warm up: the worker pool's threads and their store connections exist before any baseline.
    const quint16 port = (*s)->port();
    run_on_thread([port] {
      for (int i = 0; i < 6; ++i) get(port, "/api/runs");
    });
    return std::move(*s);
  }
  // Runs `f` on another thread while this one serves.
  void run_on_thread(const std::function<void()>& f) {
    std::atomic<bool> done{false};
    std::thread t([&] {
      f();
      done = true;
    });
    QEventLoop loop;
    QTimer tick;
    QObject::connect(&tick, &QTimer::timeout, [&] {
      if (done) loop.quit();
    });
    tick.start(5);
    loop.exec();
    t.join();
  }
  static void expect_legit_served(const FloodResult& r) {
    std::string seen;
    for (const auto& [status, ms] : r.legit) seen += std::to_string(status) + " in " + std::to_string(ms) + " ms; ";
    EXPECT_TRUE(r.legit_all_ok()) << seen;
    EXPECT_LT(r.legit_median_ms(), 100) << r.legit.size() << " legitimate requests";
  }
};

TEST_F(LimitsTest, AHugeHeaderHeldOpenIsRefusedWith431BeforeItIsBuffered) {
  auto s = serve();
  ASSERT_TRUE(s);
  std::string answer;
  const FloodResult r = flood_while_serving(s->port(), [&] {
    answer = stream_request(s->port(), "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Fill: ",
                            std::string(64 * 1024, 'a'), 64 * kMiB);
  });
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 431") << answer.substr(0, 200);
  EXPECT_LT(r.growth_kib, kMaxGrowthKiB);
  expect_legit_served(r);
}

TEST_F(LimitsTest, ManyHeadersOrALongRequestLineAreRefused) {
  auto s = serve();
  ASSERT_TRUE(s);
  std::string many, line, malformed, folded;
  run_on_thread([&] {
    std::string head = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (int i = 0; i < 80; ++i) head += "X-" + std::to_string(i) + ": 1\r\n";
    many = stream_request(s->port(), head + "\r\n", "", 0);
    line = stream_request(s->port(), "GET /api/runs?x=" + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n", "", 0);
    malformed = stream_request(s->port(), "GET\r\nHost: 127.0.0.1\r\n\r\n", "", 0);
    folded = stream_request(s->port(), "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n  folded\r\n\r\n", "", 0);
  });
  EXPECT_EQ(many.substr(0, 12), "HTTP/1.1 431") << many;
  EXPECT_NE(many.find("headers: more than 64"), std::string::npos) << many;
  EXPECT_EQ(line.substr(0, 12), "HTTP/1.1 414") << line;
  EXPECT_EQ(malformed.substr(0, 12), "HTTP/1.1 400") << malformed;
  EXPECT_EQ(folded.substr(0, 12), "HTTP/1.1 400") << folded;
}

TEST_F(LimitsTest, A128MiBPostBodyIsRefusedWith413BeforeItIsBuffered) {
  auto s = serve();
  ASSERT_TRUE(s);
  std::string answer;
  const FloodResult r = flood_while_serving(s->port(), [&] {
    answer = stream_request(s->port(),
                            "POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " +
                                std::to_string(128 * kMiB) + "\r\n\r\n",
                            std::string(64 * 1024, 'b'), 128 * kMiB);
  });
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer.substr(0, 200);
  EXPECT_LT(r.growth_kib, kMaxGrowthKiB);
  expect_legit_served(r);
}

TEST_F(LimitsTest, A64MiBChunkedBodyIsRefusedWith413BeforeItIsBuffered) {
  auto s = serve();
  ASSERT_TRUE(s);
  std::string answer;
  const FloodResult r = flood_while_serving(s->port(), [&] {
    answer = stream_request(s->port(), "POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                            "10000\r\n" + std::string(0x10000, 'c') + "\r\n", 64 * kMiB);
  });
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 413") << answer.substr(0, 200);
  EXPECT_LT(r.growth_kib, kMaxGrowthKiB);
  expect_legit_served(r);
  // A GET takes no body either, however small.
  std::string small;
  run_on_thread([&] {
    small = stream_request(s->port(), "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello", "", 0);
  });
  EXPECT_EQ(small.substr(0, 12), "HTTP/1.1 413") << small;
}

TEST_F(LimitsTest, PipelinedRequestsNeverReadAreAnsweredOneAtATime) {
  auto s = serve();
  ASSERT_TRUE(s);
  const std::string path = "/api/runs/" + std::to_string(run_) + "/frame?pixels=4096";
  std::string one;
  run_on_thread([&] { EXPECT_EQ(get(s->port(), path, &one).first, 200); });
  // 600 answers of this size would hold far more than the bound if all were made at once.
  ASSERT_GT(static_cast<int64_t>(one.size()) * 600, 2 * kMaxGrowthKiB * 1024) << one.size();
  int fd = -1;
  const FloodResult r = flood_while_serving(s->port(), [&] {
    fd = connect_to(s->port());
    std::string requests;
    for (int i = 0; i < 600; ++i) requests += "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    send_all(fd, requests);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // reads nothing meanwhile
  });
  EXPECT_LT(r.growth_kib, kMaxGrowthKiB);
  expect_legit_served(r);
  // Once the client reads, the requests waiting unread are answered, one after another.
  int count = 0;
  run_on_thread([&] {
    const auto start = Clock::now();
    std::string answers;
    while (count < 20 && ms_since(start) < 30000) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0 && !drain(fd, answers)) break;
      for (size_t at = 0; (at = answers.find("HTTP/1.1 200", at)) != std::string::npos; at += 12) ++count;
      answers.erase(0, answers.size() > 12 ? answers.size() - 11 : 0);  // a status line may straddle reads
    }
  });
  ::close(fd);
  EXPECT_GE(count, 20);
}

TEST_F(LimitsTest, IdleAndPartialConnectionsAreClosedWithinTheirTimeouts) {
  ConnectionLimits limits;
  limits.header_timeout_ms = 300;
  limits.idle_timeout_ms = 600;
  limits.max_connections_per_client = 64;  // none of these is closed to make room
  auto s = serve(limits);
  ASSERT_TRUE(s);
  std::vector<int64_t> silent_ms, partial_ms;
  int64_t idle_ms = -1;
  std::vector<std::string> partial_answers;
  run_on_thread([&] {
    std::vector<int> silent, partial;
    for (int i = 0; i < 20; ++i) silent.push_back(connect_to(s->port()));
    for (int i = 0; i < 20; ++i) {
      partial.push_back(connect_to(s->port()));
      send_all(partial.back(), "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    }
    const int idle = connect_to(s->port());
    send_all(idle, "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    const auto start = Clock::now();
    std::string ignored;
    for (int fd : silent) {
      if (read_until_closed(fd, ignored, 5000)) silent_ms.push_back(ms_since(start));
      ::close(fd);
    }
    for (int fd : partial) {
      std::string answer;
      if (read_until_closed(fd, answer, 5000)) partial_ms.push_back(ms_since(start));
      partial_answers.push_back(answer);
      ::close(fd);
    }
    std::string answer;
    if (read_until_closed(idle, answer, 5000)) idle_ms = ms_since(start);
    EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 200");
    ::close(idle);
  });
  // Within the timeout plus the time the client takes to notice (generous: a loaded machine).
  EXPECT_EQ(silent_ms.size(), 20u);
  EXPECT_EQ(partial_ms.size(), 20u);
  for (int64_t ms : silent_ms) EXPECT_LT(ms, 300 + 1500);
  for (int64_t ms : partial_ms) EXPECT_LT(ms, 300 + 1500);
  for (const auto& a : partial_answers) EXPECT_EQ(a.substr(0, 12), "HTTP/1.1 408") << a;
  EXPECT_GE(idle_ms, 0);
  EXPECT_LT(idle_ms, 600 + 1500);
  EXPECT_EQ(s->open_connections(), 0);
}

TEST_F(LimitsTest, IdleSocketsOfOneClientCannotShutOutOthers) {
  auto s = serve();  // the defaults: 64 connections per client address, 10 s for a head
  ASSERT_TRUE(s);
  std::vector<int> idle;
  run_on_thread([&] {
    for (int i = 0; i < 80; ++i) idle.push_back(connect_to(s->port()));
  });
  // Held open (and saying nothing) while others ask.
  FloodResult r = flood_while_serving(s->port(), [&] { std::this_thread::sleep_for(std::chrono::milliseconds(500)); });
  // The server closed all but at most 64 of them (the longest idle first).
  int closed = 0;
  for (int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    char c;
    if (::poll(&p, 1, 0) > 0 && ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0) ++closed;
  }
  EXPECT_GE(closed, 80 - 64);
  EXPECT_LE(s->open_connections(), 65);
  expect_legit_served(r);
  std::pair<int, int64_t> after;
  run_on_thread([&] { after = get(s->port(), "/api/runs"); });
  EXPECT_EQ(after.first, 200);
  EXPECT_LT(after.second, 100);
  for (int fd : idle) ::close(fd);
}

TEST_F(LimitsTest, AtTheServersConnectionCapTheLongestIdleGivesWay) {
  ConnectionLimits limits;
  limits.max_connections = 8;  // as under a low descriptor limit
  limits.max_connections_per_client = 64;
  auto s = serve(limits);
  ASSERT_TRUE(s);
  std::vector<int> idle;
  run_on_thread([&] {
    for (int i = 0; i < 80; ++i) idle.push_back(connect_to(s->port()));
  });
  EXPECT_LE(s->open_connections(), 8);
  FloodResult r = flood_while_serving(s->port(), [&] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  EXPECT_LE(s->open_connections(), 8);
  expect_legit_served(r);
  for (int fd : idle) ::close(fd);
}

// A WebSocket to /api/live by hand, so the test can send what no browser would.
int open_live_socket(quint16 port, std::string& answer) {
  const int fd = connect_to(port);
  if (fd < 0) return -1;
  send_all(fd, "GET /api/live HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                   "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n");
  const auto start = Clock::now();
  while (answer.find("\r\n\r\n") == std::string::npos && ms_since(start) < 5000) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0 && !drain(fd, answer)) break;
  }
  return fd;
}

// The close code in the server's frames (after the 101 head), or 0 if none came.
int close_code(const std::string& stream) {
  size_t at = stream.find("\r\n\r\n");
  if (at == std::string::npos) return 0;
  at += 4;
  while (at + 2 <= stream.size()) {
    const auto op = static_cast<unsigned char>(stream[at]) & 0x0f;
    size_t len = static_cast<unsigned char>(stream[at + 1]) & 0x7f;
    size_t header = 2;
    if (len == 126) {
      if (at + 4 > stream.size()) return 0;
      len = (static_cast<unsigned char>(stream[at + 2]) << 8) | static_cast<unsigned char>(stream[at + 3]);
      header = 4;
    }
    if (op == 0x8 && len >= 2 && at + header + 2 <= stream.size())
      return (static_cast<unsigned char>(stream[at + header]) << 8) | static_cast<unsigned char>(stream[at + header + 1]);
    at += header + len;
  }
  return 0;
}

// A client frame: masked (with a zero key, so the payload goes as is).
std::string frame(unsigned char first, const std::string& payload) {
  std::string f(1, static_cast<char>(first));
  if (payload.size() < 126) {
    f += static_cast<char>(0x80 | payload.size());
  } else {
    f += static_cast<char>(0x80 | 127);
    for (int i = 7; i >= 0; --i) f += static_cast<char>((payload.size() >> (8 * i)) & 0xff);
  }
  f += std::string(4, '\0');
  return f + payload;
}

TEST_F(LimitsTest, AFragmentedWebSocketMessageIsNotAssembled) {
  auto s = serve();
  ASSERT_TRUE(s);
  std::string answer;
  const FloodResult r = flood_while_serving(s->port(), [&] {
    const int fd = open_live_socket(s->port(), answer);
    const std::string payload(64 * 1024, 'd');
    bool open = fd >= 0 && answer.rfind("HTTP/1.1 101", 0) == 0 && send_all(fd, frame(0x02, payload));
    for (int64_t sent = payload.size(); open && sent < 96 * kMiB; sent += static_cast<int64_t>(payload.size()))
      open = send_all(fd, frame(0x00, payload)) && drain(fd, answer);
    read_until_closed(fd, answer, 3000);
    ::close(fd);
  });
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 101") << answer.substr(0, 200);
  const int code = close_code(answer);
  EXPECT_TRUE(code == 1008 || code == 1009) << code;
  EXPECT_LT(r.growth_kib, kMaxGrowthKiB);
  expect_legit_served(r);
}

TEST_F(LimitsTest, AHugeFrameSentWithTheHandshakeIsNotWaitedFor) {
  auto s = serve();
  ASSERT_TRUE(s);
  std::string answer;
  bool closed = false;
  const FloodResult r = flood_while_serving(s->port(), [&] {
    const int fd = connect_to(s->port(), 1000);
    // The frame follows the upgrade request at once, before the 101: Qt reads it with its
    // defaults and waits for all 96 MiB of it.
    std::string head = "GET /api/live HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(s->port()) +
                       "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n\r\n";
    head += static_cast<char>(0x82);
    head += static_cast<char>(0x80 | 127);
    for (int i = 7; i >= 0; --i) head += static_cast<char>(((96 * kMiB) >> (8 * i)) & 0xff);
    head += std::string(4, '\0');
    bool open = fd >= 0 && send_all(fd, head);
    const std::string payload(64 * 1024, 'e');
    for (int i = 0; open && i < 16; ++i) open = send_all(fd, payload) && drain(fd, answer);
    closed = read_until_closed(fd, answer, 5000);
    ::close(fd);
  });
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 101") << answer.substr(0, 200);
  EXPECT_TRUE(closed);
  EXPECT_LT(r.growth_kib, kMaxGrowthKiB);
  expect_legit_served(r);
}

TEST_F(LimitsTest, APingFloodIsClosedNotAnswered) {
  auto s = serve();
  ASSERT_TRUE(s);
  std::string answer;
  bool closed = false;
  const FloodResult r = flood_while_serving(s->port(), [&] {
    const int fd = open_live_socket(s->port(), answer);
    std::string batch;
    for (int i = 0; i < 10000; ++i) batch += frame(0x89, std::string(125, 'p'));  // the largest ping
    bool open = fd >= 0 && answer.rfind("HTTP/1.1 101", 0) == 0;
    for (int i = 0; open && i < 40; ++i) open = send_all(fd, batch);  // 400,000 pings, never a read
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    closed = read_until_closed(fd, answer, 5000);
    ::close(fd);
  });
  EXPECT_TRUE(closed);
  EXPECT_EQ(close_code(answer), 1008);
  EXPECT_LT(r.growth_kib, kMaxGrowthKiB);
  expect_legit_served(r);
}

TEST_F(LimitsTest, OneClientGetsAFewLivePagesAndTheRestAPolicyClose) {
  ConnectionLimits limits;
  limits.max_live_per_client = 3;
  auto s = serve(limits);
  ASSERT_TRUE(s);
  std::vector<std::unique_ptr<QWebSocket>> sockets;
  std::vector<int> messages(5, 0);
  for (int i = 0; i < 5; ++i) {
    sockets.push_back(std::make_unique<QWebSocket>());
    QObject::connect(sockets.back().get(), &QWebSocket::textMessageReceived, [&messages, i] { ++messages[i]; });
    sockets.back()->open(QUrl(QStringLiteral("ws://127.0.0.1:%1/api/live").arg(s->port())));
    QEventLoop loop;
    QTimer tick;
    QObject::connect(&tick, &QTimer::timeout, [&] {
      if (messages[i] > 0 || sockets.back()->state() == QAbstractSocket::UnconnectedState) loop.quit();
    });
    tick.start(10);
    QTimer::singleShot(10000, &loop, &QEventLoop::quit);
    loop.exec();
  }
  for (int i = 0; i < 3; ++i) EXPECT_GT(messages[i], 0) << i;
  for (int i = 3; i < 5; ++i) {
    EXPECT_EQ(messages[i], 0) << i;
    EXPECT_EQ(sockets[i]->closeCode(), QWebSocketProtocol::CloseCodePolicyViolated) << i;
  }
  EXPECT_EQ(s->live_clients(), 3);
}

}  // namespace
}  // namespace meshwork::web

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
