// A free TCP port, as torchrun --standalone picks one: meshtrain on one node without
// --master-port hosts its store there, so two runs on one machine never collide on 29500.
// Also used by the trainer tests, so parallel test runs do not collide on fixed ports.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

// A port the kernel just handed out as free (bind to port 0 on every interface, as the store
// binds); 0 if none could be had. Another process may take it before the store binds: the
// window is the few milliseconds until the supervisor starts.
inline int free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  if (fd >= 0) ::close(fd);
  return port;
}
