// Declaration shim (see ../../README.md).
#pragma once
namespace gloo::transport {
class Device;
class UnboundBuffer;
}  // namespace gloo::transport
