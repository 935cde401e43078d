// Host CUDA's streams and events (Note [Host CUDA streams]) and their cuda* functions.
#include "tests/host_cuda/stream_work.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace host_cuda {
namespace {

struct PendingWork {
  std::function<void()> finish;
  const char* written = nullptr;
  size_t written_bytes = 0;
  bool done = false;
  void complete() {
    if (done) return;
    done = true;
    finish();
  }
};
using PendingList = std::vector<std::shared_ptr<PendingWork>>;

void complete_all(const PendingList& list) {
  for (const auto& work : list) work->complete();
}

double now_ms() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch()).count();
}

}  // namespace
}  // namespace host_cuda

struct CUstream_st {
  unsigned flags = 0;
  host_cuda::PendingList pending;
};
struct CUevent_st {
  unsigned flags = 0;
  double recorded_ms = -1;
  host_cuda::PendingList captured;
};

namespace host_cuda {
namespace {

struct Streams {
  std::set<CUstream_st*> live;
  PendingList legacy;  // the null stream's
};

Streams& streams() {
  static Streams s;
  return s;
}

PendingList& pending_of(cudaStream_t stream) {
  return stream == nullptr ? streams().legacy : stream->pending;
}

}  // namespace

void defer(cudaStream_t stream, std::function<void()> finish, const void* written,
           size_t written_bytes) {
  pending_of(stream).push_back(std::make_shared<PendingWork>(
      PendingWork{std::move(finish), static_cast<const char*>(written), written_bytes}));
}

void settle_overlapping(cudaStream_t stream, const void* data, size_t bytes) {
  PendingList& list = pending_of(stream);
  const char* begin = static_cast<const char*>(data);
  size_t last = 0;  // one past the last overlapping piece
  for (size_t i = 0; i < list.size(); ++i) {
    const PendingWork& work = *list[i];
    if (work.written < begin + bytes && begin < work.written + work.written_bytes) last = i + 1;
  }
  for (size_t i = 0; i < last; ++i) list[i]->complete();
  list.erase(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(last));
}

void settle(cudaStream_t stream) {
  const PendingList list = std::move(pending_of(stream));
  pending_of(stream).clear();
  complete_all(list);
}

void settle_all() {
  settle(nullptr);
  for (CUstream_st* stream : streams().live) settle(stream);
}

}  // namespace host_cuda

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = new CUstream_st{flags, {}};
  host_cuda::streams().live.insert(*stream);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  host_cuda::settle(stream);  // the device finishes a destroyed stream's work
  host_cuda::streams().live.erase(stream);
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  host_cuda::settle(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
  host_cuda::complete_all(event->captured);
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  *event = new CUevent_st{flags, -1, {}};
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  event->captured = host_cuda::pending_of(stream);
  event->recorded_ms = host_cuda::now_ms();
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  host_cuda::complete_all(event->captured);
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  host_cuda::complete_all(event->captured);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if ((start->flags & cudaEventDisableTiming) != 0 || (end->flags & cudaEventDisableTiming) != 0)
    return cudaErrorInvalidResourceHandle;
  if (start->recorded_ms < 0 || end->recorded_ms < 0) return cudaErrorInvalidResourceHandle;
  *ms = static_cast<float>(end->recorded_ms - start->recorded_ms);
  return cudaSuccess;
}

}  // extern "C"
