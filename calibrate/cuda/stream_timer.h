#pragma once
/// StreamTimer: the device-time measurement of the CUDA backend. Work is enqueued on a dedicated
/// stream between two CUDA events; a short delay kernel ahead of the start event keeps the
/// stream busy while the host enqueues, so launch latency stays out of the measured time.

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "calibrate/measurement.h"
#include "core/result.h"

namespace parallax::calibrate::gpu {

/// Enqueues one repetition of a benchmark on `stream`; returns the diagnostics of a failure.
using Enqueue = std::function<Diagnostics(cudaStream_t stream)>;

class StreamTimer {
 public:
  /// A stream and two events on the current device.
  static Result<std::unique_ptr<StreamTimer>> create();
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  cudaStream_t stream() const { return stream_; }

  /// Seconds of device time one `enqueue` takes, or -1 after any error (then error() says
  /// which). Blocks until the work is done.
  double time_once(const Enqueue& enqueue);
  /// The first error time_once met since the last measure(); empty if none.
  const std::optional<Diagnostic>& error() const { return error_; }

  /// calibrate::time_repeated over time_once(enqueue); a failure carries the device's error too.
  Result<Stats> measure(const Enqueue& enqueue, const TimingPolicy& policy,
                        const std::string& what);

 private:
  StreamTimer() = default;

  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  std::optional<Diagnostic> error_;
};

/// How long the delay kernel holds the stream before the start event: longer than the host
/// needs to enqueue one repetition (a few launches), short next to the benchmark's budget.
inline constexpr uint64_t kLaunchShieldNs = 100'000;

}  // namespace parallax::calibrate::gpu
