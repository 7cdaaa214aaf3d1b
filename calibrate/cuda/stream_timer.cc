#include "calibrate/cuda/stream_timer.h"

#include "calibrate/cuda/cuda_status.h"
#include "calibrate/cuda/kernels.h"

namespace parallax::calibrate::gpu {

Result<std::unique_ptr<StreamTimer>> StreamTimer::create() {
  std::unique_ptr<StreamTimer> timer(new StreamTimer());
  PX_CUDA_TRY(cudaStreamCreateWithFlags(&timer->stream_, cudaStreamNonBlocking));
  PX_CUDA_TRY(cudaEventCreate(&timer->start_));
  PX_CUDA_TRY(cudaEventCreate(&timer->stop_));
  return timer;
}

StreamTimer::~StreamTimer() {
  // Errors are ignored here: a destructor has no one to report to.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

double StreamTimer::time_once(const Enqueue& enqueue) {
  auto fail = [this](Diagnostic d) {
    if (!error_) error_ = std::move(d);
    return -1.0;
  };
  cudaError_t e = launch_delay(kLaunchShieldNs, stream_);
  if (e != cudaSuccess) return fail(cuda_diagnostic("delay kernel", e));
  if ((e = cudaEventRecord(start_, stream_)) != cudaSuccess) {
    return fail(cuda_diagnostic("cudaEventRecord", e));
  }
  Diagnostics ds = enqueue(stream_);
  if (!ds.empty()) {
    cudaStreamSynchronize(stream_);  // leave nothing in flight behind a failure
    return fail(ds.front());
  }
  if ((e = cudaEventRecord(stop_, stream_)) != cudaSuccess) {
    return fail(cuda_diagnostic("cudaEventRecord", e));
  }
  if ((e = cudaEventSynchronize(stop_)) != cudaSuccess) {
    return fail(cuda_diagnostic("cudaEventSynchronize", e));
  }
  float ms = 0;
  if ((e = cudaEventElapsedTime(&ms, start_, stop_)) != cudaSuccess) {
    return fail(cuda_diagnostic("cudaEventElapsedTime", e));
  }
  return ms / 1000.0;
}

Result<Stats> StreamTimer::measure(const Enqueue& enqueue, const TimingPolicy& policy,
                                   const std::string& what) {
  error_.reset();
  Result<Stats> stats = time_repeated([&] { return time_once(enqueue); }, policy, what);
  if (stats.ok() || !error_) return stats;
  Diagnostics ds = stats.errors();
  ds.push_back(*error_);
  return ds;
}

}  // namespace parallax::calibrate::gpu
