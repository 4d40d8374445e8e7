#include "trainer/metrics_sink.h"

#include <fcntl.h>
#include <unistd.h>

namespace meshwork::trainer {

MetricsSink::MetricsSink(const std::filesystem::path& rank_file, const std::string& shared,
                         bool to_stdout)
    : to_stdout_(to_stdout) {
  fds_.push_back(::open(rank_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644));
  if (!shared.empty()) fds_.push_back(::open(shared.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644));
}

MetricsSink::~MetricsSink() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

bool MetricsSink::ok() const {
  for (int fd : fds_)
    if (fd < 0) return false;
  return true;
}

void MetricsSink::write(const std::string& line) {
  const std::string l = line + "\n";
  for (int fd : fds_)
    if (fd >= 0) (void)!::write(fd, l.data(), l.size());
  if (to_stdout_) {
    std::cout << l;
    std::cout.flush();
  }
}

}  // namespace meshwork::trainer
