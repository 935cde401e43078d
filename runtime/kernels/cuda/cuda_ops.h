// The CUDA backend of runtime/ops.h: a CudaContext owns the compute stream, the cuBLASLt and
// cuBLAS handles and a scratch buffer; register_cuda_backend routes every device-tensor op to
// the runtime::cuda kernels on that stream (asynchronous; only ops::sum synchronizes).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>

#include "runtime/allocator.h"
#include "runtime/kernels/cuda/attention_gemm.h"
#include "runtime/kernels/cuda/gemm.h"
#include "runtime/kernels/cuda/stream.h"

namespace runtime::cuda {

// Note [One compute stream]
// Every op of the backend runs on the registered context's stream, so stream order alone
// orders them, and the caching allocator may hand a freed block to the next op at once (Note
// [Caching allocator and streams]). Work on other streams (communication) must wait on an
// event recorded on stream(), and vice versa. The dtype rules of the ops are in
// cuda_op_entries.h (Note [CUDA op dtypes]).
class CudaContext {
 public:
  // Creates the stream and the handles on the current device.
  CudaContext();
  // Unregisters the backend when it points at this context (see register_cuda_backend).
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  cudaStream_t stream() const { return stream_.get(); }
  LtGemm& gemm() { return gemm_; }
  CublasHandle& cublas() { return cublas_; }
  // Blocks the host until every op queued so far has finished.
  void synchronize() const { stream_.synchronize(); }

  // Device memory of at least `bytes` (256-byte aligned) for work queued on stream() until the
  // next call: growing frees the old buffer stream-ordered, after the work queued before it.
  // From the caching allocator given to use_allocator (category workspace: counted, and
  // released by its out-of-memory retry), else from cudaMallocAsync's pool.
  void* scratch(size_t bytes);
  // Takes scratch from `allocator` (a CudaAllocator, which must outlive this context) from now
  // on; the buffer held so far goes back where it came from.
  void use_allocator(Allocator* allocator);

  // Synchronous copies between pageable host memory and the device, after the work queued on
  // stream() (Note [Pinned transfers]).
  void upload(void* device_dst, const void* host_src, size_t bytes);
  void download(void* host_dst, const void* device_src, size_t bytes);

 private:
  void release_scratch();
  void allocate_pinned();

  CudaStream stream_;
  LtGemm gemm_;
  CublasHandle cublas_;
  Allocator* allocator_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  std::array<void*, 2> pinned_{};    // the staging chunks, allocated on first use
  std::array<CudaEvent, 2> staged_;  // the last copy in or out of each chunk
};

// Makes ops:: on CUDA tensors run on `context` (process-wide, replacing any earlier
// registration). `context` must stay alive while registered; its destructor unregisters it.
void register_cuda_backend(CudaContext& context);

}  // namespace runtime::cuda
