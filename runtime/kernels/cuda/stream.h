// RAII owners of a CUDA stream and a CUDA event (copy deleted, move allowed).
// Streams are created non-blocking: they never synchronize with the legacy default
// stream, so work on them is ordered only by events and explicit synchronize().
#pragma once

#include <cuda_runtime.h>

namespace runtime::cuda {

class CudaEvent;

// A cudaStreamNonBlocking stream on the current device.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;

  cudaStream_t get() const { return stream_; }
  // Blocks the host until every operation queued on this stream has finished.
  void synchronize() const;
  // Later work on this stream waits for `event` (recorded on any stream).
  void wait(const CudaEvent& event) const;

 private:
  cudaStream_t stream_ = nullptr;
};

// An event; `timing` = false (the default) makes record/wait cheaper.
class CudaEvent {
 public:
  explicit CudaEvent(bool timing = false);
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  // Blocks the host until the work captured by the last record() has finished.
  void synchronize() const;
  // Milliseconds between `start` and this event (both created with timing = true).
  float elapsed_ms_since(const CudaEvent& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace runtime::cuda
