#include "calibrate/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <utility>

#include "calibrate/cuda/cuda_status.h"

namespace parallax::calibrate::gpu {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Diagnostics DeviceBuffer::allocate(std::size_t bytes, const std::string& what) {
  reset();  // free first, so that a larger buffer can take the old one's place
  const std::size_t want = bytes > 0 ? bytes : 1;
  const cudaError_t error = cudaMalloc(&ptr_, want);
  if (error != cudaSuccess) {
    ptr_ = nullptr;
    char size[32];
    std::snprintf(size, sizeof size, "%.1f MiB", static_cast<double>(want) / (1 << 20));
    return {cuda_diagnostic("cudaMalloc of " + std::string(size) + " for " + what, error)};
  }
  bytes_ = want;
  return {};
}

Diagnostics DeviceBuffer::reserve(std::size_t bytes, const std::string& what, bool* grown) {
  *grown = bytes_ < bytes || ptr_ == nullptr;
  if (!*grown) return {};
  return allocate(bytes, what);
}

void DeviceBuffer::reset() {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

}  // namespace parallax::calibrate::gpu
