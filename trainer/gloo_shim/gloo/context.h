// Declaration shim (see ../README.md): the Context methods ProcessGroupGloo.hpp's inline code
// names. Declared only; meshtrain never calls them (they live in libtorch_cpu's Gloo).
#pragma once
#include <chrono>
namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};
}  // namespace gloo
