// A key-value store shared by every process of a run: c10d::TCPStore, wrapped so that the
// launcher (supervisor) code needs no LibTorch header. The supervisor of node 0 hosts it; the
// other nodes' supervisors and every rank connect to it. Supervisors use it to tell each other
// that a rank failed ("meshwork/failed") and that a node finished ("meshwork/done/<node>").
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace meshwork::trainer {

class StoreHandle {
 public:
  // Throws std::runtime_error when it cannot host / reach the store within `timeout`.
  StoreHandle(const std::string& host, int port, bool is_server, std::chrono::milliseconds timeout);
  ~StoreHandle();
  StoreHandle(const StoreHandle&) = delete;
  StoreHandle& operator=(const StoreHandle&) = delete;
  void set(const std::string& key, const std::string& value);
  // nullopt when the key is not set (never blocks).
  std::optional<std::string> try_get(const std::string& key);
  int64_t add(const std::string& key, int64_t delta);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshwork::trainer
