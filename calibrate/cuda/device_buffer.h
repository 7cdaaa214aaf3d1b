#pragma once
/// DeviceBuffer: one cudaMalloc'd allocation, freed when the buffer goes away.

#include <cstddef>
#include <string>

#include "core/result.h"

namespace parallax::calibrate::gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  /// Frees the current allocation and allocates `bytes` (at least 1) on the current device;
  /// `what` names the buffer in the diagnostic ("gemm A"). On failure the buffer is empty.
  Diagnostics allocate(std::size_t bytes, const std::string& what);
  /// Allocates only when the buffer holds fewer than `bytes`; `*grown` says whether it did.
  Diagnostics reserve(std::size_t bytes, const std::string& what, bool* grown);
  /// Frees the allocation (a failure of cudaFree is ignored: there is no one to report it to).
  void reset();

  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace parallax::calibrate::gpu
