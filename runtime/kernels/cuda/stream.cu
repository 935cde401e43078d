// CudaStream / CudaEvent: create on construction, destroy on destruction (errors
// while destroying are ignored: a destructor must not throw, and at process exit
// the driver may already be gone).
#include <utility>

#include "runtime/kernels/cuda/cuda_check.h"
#include "runtime/kernels/cuda/stream.h"

namespace runtime::cuda {

CudaStream::CudaStream() {
  TRAINER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  std::swap(stream_, other.stream_);
  return *this;
}

void CudaStream::synchronize() const {
  TRAINER_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaStream::wait(const CudaEvent& event) const {
  TRAINER_CUDA_CHECK(cudaStreamWaitEvent(stream_, event.get(), 0));
}

CudaEvent::CudaEvent(bool timing) {
  TRAINER_CUDA_CHECK(
      cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  std::swap(event_, other.event_);
  return *this;
}

void CudaEvent::record(cudaStream_t stream) const {
  TRAINER_CUDA_CHECK(cudaEventRecord(event_, stream));
}

void CudaEvent::synchronize() const {
  TRAINER_CUDA_CHECK(cudaEventSynchronize(event_));
}

float CudaEvent::elapsed_ms_since(const CudaEvent& start) const {
  float milliseconds = 0.0f;
  TRAINER_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start.get(), event_));
  return milliseconds;
}

}  // namespace runtime::cuda
