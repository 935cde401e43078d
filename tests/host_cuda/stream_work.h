// Host CUDA's streams and events: work that does not finish when it is issued (host NCCL's
// transfers) waits on its stream, and whatever the device would order after it finishes it
// first. Note [Host CUDA streams].
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace host_cuda {

// Note [Host CUDA streams]
// Kernels, copies and fills run when they are issued, after their stream's pending work has
// finished; pending work is only what host NCCL posts (non-blocking MPI operations), finished
// by `finish`. So a stream's operations complete in issue order, as on a device, while the
// host goes on past a posted transfer as it would past a queued one:
//  - a launch, copy, fill or cudaFreeAsync on stream s, and cudaStreamSynchronize(s), finish
//    s's pending work (the legacy default stream, null, finishes its own);
//  - cudaEventRecord(e, s) captures s's pending work; cudaEventSynchronize(e),
//    cudaEventQuery(e) and cudaStreamWaitEvent(any, e) finish what e captured;
//  - cudaDeviceSynchronize and cudaFree finish everything.
// Host NCCL posts its operations at once, after only the pending work of their stream that
// writes what they read or write (settle_overlapping): a transfer queued behind another on a
// device stream does not wait for it on the host, so the host goes on to post what the peer
// waits for. Only that ordering makes the host wait, so a transfer waits for its peer only
// where the device's stream order would have it wait.
// `written` (written_bytes long) is what the work writes when it finishes, if anything.
void defer(cudaStream_t stream, std::function<void()> finish, const void* written = nullptr,
           size_t written_bytes = 0);
void settle(cudaStream_t stream);
// Finishes the stream's pending work up to the last piece that writes into [data, data + bytes):
// what an operation reading or writing those bytes must follow.
void settle_overlapping(cudaStream_t stream, const void* data, size_t bytes);
void settle_all();

}  // namespace host_cuda
