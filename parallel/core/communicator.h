// Collectives over one process group, behind one interface so the MPI (host
// buffers) and NCCL (device buffers) implementations are interchangeable.
// Counts are elements. Gathers and scatters split their buffer into `size()`
// equal contiguous chunks in rank order.
//
// Two levels: buffer methods take raw memory of the kind takes_device_buffers()
// says; tensor methods take a runtime::Tensor on any device, so the model and the
// schedules never ask where their tensors live (Note [Device tensors over host
// communicators]). Callers use the public methods, which are not virtual and may
// overload one name; an implementation overrides the private do_* hooks, one
// distinct name per method and level (`_buffer`, `_tensor`). The non-blocking collectives
// (`_async`) follow Note [Non-blocking collectives]. Each public method is traced (Note
// [Communication trace] in comm_trace.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "parallel/core/comm_trace.h"
#include "runtime/allocator.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace parallel {

// Note [Non-blocking collectives]
// reduce_scatter_async and all_gather_async start a collective and return a Request; its
// buffers belong to the collective until wait() returns. done() only progresses and tests it:
// what a caller does (allocates, starts next) must never depend on done()'s answer, or the
// collectives' order and the memory a step uses would depend on timing. Every rank starts the
// collectives of one group, blocking and non-blocking, in the same order (MPI's rule; NCCL's
// too across communicators). The result is that of the blocking call of the same
// implementation only where the implementation says so: callers that must match bit for bit
// use one of the two everywhere. MPI: MPI_Ireduce_scatter_block / MPI_Iallgather, progressed
// by MPI calls (done() is MPI_Test). NCCL: queued on the communicator's stream after the
// compute stream's work so far; wait() makes the compute stream wait for it (Note [NCCL
// non-blocking collectives]). An implementation without its own runs the blocking call and
// returns a completed request.

// A pending transfer or collective; wait() blocks until it completed (for stream-ordered
// device work: orders the work after it), done() says whether it has without blocking (false
// when it cannot tell).
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool done() { return false; }
};

// A request that is complete when made.
class CompletedRequest final : public Request {
 public:
  void wait() override {}
  bool done() override { return true; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether the buffer methods take device memory (NCCL) instead of host memory.
  virtual bool takes_device_buffers() const { return false; }

  // ---- buffer methods ----
  // In-place sums; `dtype` f32 or bf16 (a bf16 sum adds in f32, rounding per step as
  // the implementation's reduction does).
  void all_reduce_sum(void* data, int64_t count, runtime::DType dtype) {
    const CommTrace trace("all_reduce", group_name_, count * runtime::dtype_size(dtype));
    do_all_reduce_sum_buffer(data, count, dtype);
  }
  void all_reduce_sum(double* data, int64_t count) {
    const CommTrace trace("all_reduce", group_name_, count * 8);
    do_all_reduce_sum_f64_buffer(data, count);
  }
  void all_reduce_max(float* data, int64_t count) {
    const CommTrace trace("all_reduce_max", group_name_, count * 4);
    do_all_reduce_max_buffer(data, count);
  }
  // out (size() * count) = concatenation of every rank's in (count); any dtype. In place when
  // `in` is this rank's chunk of `out` (in == out + rank() * count).
  void all_gather(void* out, const void* in, int64_t count, runtime::DType dtype) {
    const CommTrace trace("all_gather", group_name_, count * runtime::dtype_size(dtype));
    do_all_gather_buffer(out, in, count, dtype);
  }
  // out (count) = sum over ranks of chunk rank() of in (size() * count); f32 or bf16. In place
  // when `out` is this rank's chunk of `in` (out == in + rank() * count; the other chunks of
  // `in` are then left undefined).
  void reduce_scatter(void* out, const void* in, int64_t count, runtime::DType dtype) {
    const CommTrace trace("reduce_scatter", group_name_,
                          size() * count * runtime::dtype_size(dtype));
    do_reduce_scatter_buffer(out, in, count, dtype);
  }
  void broadcast(void* data, int64_t bytes, int root) {
    const CommTrace trace("broadcast", group_name_, bytes);
    do_broadcast(data, bytes, root);
  }
  void barrier() {
    const CommTrace trace("barrier", group_name_, 0);
    do_barrier();
  }
  // Point to point; `tag` tells concurrent messages between the same ranks apart.
  // send_async's buffer must stay untouched until the request is waited for.
  std::unique_ptr<Request> send_async(const void* data, int64_t bytes, int peer, int tag) {
    const CommTrace trace("send", group_name_, bytes);
    return trace.traced(do_send_async_buffer(data, bytes, peer, tag));
  }
  void recv(void* data, int64_t bytes, int peer, int tag) {
    const CommTrace trace("recv", group_name_, bytes);
    do_recv_buffer(data, bytes, peer, tag);
  }
  // Non-blocking reduce_scatter and all_gather (Note [Non-blocking collectives]); the same
  // layouts and in-place conventions.
  std::unique_ptr<Request> reduce_scatter_async(void* out, const void* in, int64_t count,
                                                runtime::DType dtype) {
    const CommTrace trace("reduce_scatter_async", group_name_,
                          size() * count * runtime::dtype_size(dtype));
    return trace.traced(do_reduce_scatter_async_buffer(out, in, count, dtype));
  }
  std::unique_ptr<Request> all_gather_async(void* out, const void* in, int64_t count,
                                            runtime::DType dtype) {
    const CommTrace trace("all_gather_async", group_name_, count * runtime::dtype_size(dtype));
    return trace.traced(do_all_gather_async_buffer(out, in, count, dtype));
  }

  // f32 shorthands of the buffer methods.
  void all_reduce_sum(float* data, int64_t count) {
    all_reduce_sum(data, count, runtime::DType::f32);
  }
  void all_gather(float* out, const float* in, int64_t count) {
    all_gather(out, in, count, runtime::DType::f32);
  }
  void reduce_scatter(float* out, const float* in, int64_t count) {
    reduce_scatter(out, in, count, runtime::DType::f32);
  }

  // ---- tensor methods (whole tensors, any device) ----
  void all_reduce_sum(const runtime::Tensor& data) {
    const CommTrace trace("all_reduce", group_name_, data.nbytes());
    do_all_reduce_sum_tensor(data);
  }
  void all_reduce_max(const runtime::Tensor& data) {  // f32
    const CommTrace trace("all_reduce_max", group_name_, data.nbytes());
    do_all_reduce_max_tensor(data);
  }
  // out holds size() times in's elements.
  void all_gather(const runtime::Tensor& out, const runtime::Tensor& in) {
    const CommTrace trace("all_gather", group_name_, in.nbytes());
    do_all_gather_tensor(out, in);
  }
  // in holds size() times out's elements.
  void reduce_scatter(const runtime::Tensor& out, const runtime::Tensor& in) {
    const CommTrace trace("reduce_scatter", group_name_, in.nbytes());
    do_reduce_scatter_tensor(out, in);
  }
  // The tensor must stay untouched until the request is waited for.
  std::unique_ptr<Request> send_async(const runtime::Tensor& data, int peer, int tag) {
    const CommTrace trace("send", group_name_, data.nbytes());
    return trace.traced(do_send_async_tensor(data, peer, tag));
  }
  void recv(const runtime::Tensor& data, int peer, int tag) {
    const CommTrace trace("recv", group_name_, data.nbytes());
    do_recv_tensor(data, peer, tag);
  }
  // Non-blocking reduce_scatter and all_gather of tensors (Note [Non-blocking collectives]).
  std::unique_ptr<Request> reduce_scatter_async(const runtime::Tensor& out,
                                                const runtime::Tensor& in) {
    const CommTrace trace("reduce_scatter_async", group_name_, in.nbytes());
    return trace.traced(do_reduce_scatter_async_tensor(out, in));
  }
  std::unique_ptr<Request> all_gather_async(const runtime::Tensor& out, const runtime::Tensor& in) {
    const CommTrace trace("all_gather_async", group_name_, in.nbytes());
    return trace.traced(do_all_gather_async_tensor(out, in));
  }

  // Bytes this rank has handed to the group since construction: each
  // collective's input buffer, each message sent.
  virtual int64_t payload_bytes() const { return payload_bytes_; }

  // The group's name in traces ("tp", "pp", "dp", ...; Note [Communication trace]); a string
  // that outlives the communicator (a literal).
  const char* group_name() const { return group_name_; }
  void set_group_name(const char* name) { group_name_ = name; }

 protected:
  void add_payload(int64_t bytes) { payload_bytes_ += bytes; }
  // Whether a tensor on this device goes to the buffer methods as it is.
  bool direct(const runtime::Tensor& t) const {
    return (t.device() == runtime::DeviceKind::cpu) != takes_device_buffers();
  }
  // A host tensor shaped like `t` for staging (Note [Device tensors over host communicators]).
  runtime::Tensor staging(const runtime::Tensor& t);
  template <class Call>
  void staged(const runtime::Tensor& out, const runtime::Tensor& in, Call&& call);
  // As staged, for a call that returns a Request: the upload of `out` happens in its wait().
  template <class Call>
  std::unique_ptr<Request> staged_async(const runtime::Tensor& out, const runtime::Tensor& in,
                                        Call&& call);

 private:
  // Buffer hooks: every implementation provides them.
  virtual void do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) = 0;
  virtual void do_all_reduce_sum_f64_buffer(double* data, int64_t count) = 0;
  virtual void do_all_reduce_max_buffer(float* data, int64_t count) = 0;
  virtual void do_all_gather_buffer(void* out, const void* in, int64_t count,
                                    runtime::DType dtype) = 0;
  virtual void do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                        runtime::DType dtype) = 0;
  virtual void do_broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void do_barrier() = 0;
  virtual std::unique_ptr<Request> do_send_async_buffer(const void* data, int64_t bytes, int peer,
                                                        int tag) = 0;
  virtual void do_recv_buffer(void* data, int64_t bytes, int peer, int tag) = 0;
  // Non-blocking buffer hooks: by default the blocking call and a completed request.
  virtual std::unique_ptr<Request> do_reduce_scatter_async_buffer(void* out, const void* in,
                                                                  int64_t count,
                                                                  runtime::DType dtype);
  virtual std::unique_ptr<Request> do_all_gather_async_buffer(void* out, const void* in,
                                                              int64_t count, runtime::DType dtype);
  // Tensor hooks: by default the buffer methods, on the tensors themselves or on host
  // staging copies (Note [Device tensors over host communicators]).
  virtual void do_all_reduce_sum_tensor(const runtime::Tensor& data);
  virtual void do_all_reduce_max_tensor(const runtime::Tensor& data);
  virtual void do_all_gather_tensor(const runtime::Tensor& out, const runtime::Tensor& in);
  virtual void do_reduce_scatter_tensor(const runtime::Tensor& out, const runtime::Tensor& in);
  virtual std::unique_ptr<Request> do_send_async_tensor(const runtime::Tensor& data, int peer,
                                                        int tag);
  virtual void do_recv_tensor(const runtime::Tensor& data, int peer, int tag);
  virtual std::unique_ptr<Request> do_reduce_scatter_async_tensor(const runtime::Tensor& out,
                                                                  const runtime::Tensor& in);
  virtual std::unique_ptr<Request> do_all_gather_async_tensor(const runtime::Tensor& out,
                                                              const runtime::Tensor& in);

  int64_t payload_bytes_ = 0;
  const char* group_name_ = "group";
  runtime::CpuAllocator staging_allocator_;  // category comm
};

// The buffer hooks' override declarations, for the private section of an implementation that
// defines them all out of line.
#define TRAINER_BUFFER_HOOK_OVERRIDES                                                           \
  void do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) override;      \
  void do_all_reduce_sum_f64_buffer(double* data, int64_t count) override;                      \
  void do_all_reduce_max_buffer(float* data, int64_t count) override;                           \
  void do_all_gather_buffer(void* out, const void* in, int64_t count, runtime::DType dtype)     \
      override;                                                                                 \
  void do_reduce_scatter_buffer(void* out, const void* in, int64_t count, runtime::DType dtype) \
      override;                                                                                 \
  void do_broadcast(void* data, int64_t bytes, int root) override;                              \
  void do_barrier() override;                                                                   \
  std::unique_ptr<Request> do_send_async_buffer(const void* data, int64_t bytes, int peer,      \
                                                int tag) override;                              \
  void do_recv_buffer(void* data, int64_t bytes, int peer, int tag) override

// The group of one process: every collective is the identity (payloads are
// still counted, so the communication model holds for one process too).
class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

 private:
  void do_all_reduce_sum_buffer(void*, int64_t count, runtime::DType dtype) override {
    add_payload(count * runtime::dtype_size(dtype));
  }
  void do_all_reduce_sum_f64_buffer(double*, int64_t count) override { add_payload(count * 8); }
  void do_all_reduce_max_buffer(float*, int64_t count) override { add_payload(count * 4); }
  void do_all_gather_buffer(void* out, const void* in, int64_t count,
                            runtime::DType dtype) override;
  void do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                runtime::DType dtype) override;
  void do_broadcast(void*, int64_t, int) override {}
  void do_barrier() override {}
  std::unique_ptr<Request> do_send_async_buffer(const void*, int64_t, int, int) override;
  void do_recv_buffer(void*, int64_t, int, int) override;
  // Identities on any device, no staging.
  void do_all_reduce_sum_tensor(const runtime::Tensor& data) override;
  void do_all_reduce_max_tensor(const runtime::Tensor& data) override;
  void do_all_gather_tensor(const runtime::Tensor& out, const runtime::Tensor& in) override;
  void do_reduce_scatter_tensor(const runtime::Tensor& out, const runtime::Tensor& in) override;
  // The blocking identities, complete at once.
  std::unique_ptr<Request> do_reduce_scatter_async_tensor(const runtime::Tensor& out,
                                                          const runtime::Tensor& in) override;
  std::unique_ptr<Request> do_all_gather_async_tensor(const runtime::Tensor& out,
                                                      const runtime::Tensor& in) override;
};

// One group's host-buffer communicator (MPI) and device-buffer one (NCCL) together: the
// buffer methods go to `host`, tensor methods on device tensors to `device`, on host
// tensors to `host`. Payloads are the sum of both.
class SplitCommunicator final : public Communicator {
 public:
  SplitCommunicator(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> device);
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int64_t payload_bytes() const override;

 private:
  TRAINER_BUFFER_HOOK_OVERRIDES;
  void do_all_reduce_sum_tensor(const runtime::Tensor& data) override;
  void do_all_reduce_max_tensor(const runtime::Tensor& data) override;
  void do_all_gather_tensor(const runtime::Tensor& out, const runtime::Tensor& in) override;
  void do_reduce_scatter_tensor(const runtime::Tensor& out, const runtime::Tensor& in) override;
  std::unique_ptr<Request> do_send_async_tensor(const runtime::Tensor& data, int peer,
                                                int tag) override;
  void do_recv_tensor(const runtime::Tensor& data, int peer, int tag) override;
  std::unique_ptr<Request> do_reduce_scatter_async_buffer(void* out, const void* in, int64_t count,
                                                          runtime::DType dtype) override;
  std::unique_ptr<Request> do_all_gather_async_buffer(void* out, const void* in, int64_t count,
                                                      runtime::DType dtype) override;
  std::unique_ptr<Request> do_reduce_scatter_async_tensor(const runtime::Tensor& out,
                                                          const runtime::Tensor& in) override;
  std::unique_ptr<Request> do_all_gather_async_tensor(const runtime::Tensor& out,
                                                      const runtime::Tensor& in) override;

  Communicator& pick(const runtime::Tensor& t) const {
    return t.device() == runtime::DeviceKind::cpu ? *host_ : *device_;
  }
  std::unique_ptr<Communicator> host_, device_;
};

}  // namespace parallel
