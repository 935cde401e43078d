// The tensor methods of every communicator (with host staging), the single-process
// communicator (identities; point to point has no peer and is a bug to call) and the
// host/device split.
#include "parallel/core/communicator.h"

#include <cstring>
#include <utility>

#include "runtime/error.h"
#include "runtime/ops.h"

namespace parallel {

using runtime::Tensor;

// Note [Device tensors over host communicators]
// A device tensor handed to a communicator of host buffers (MPI) travels through host
// memory: it is downloaded into a staging tensor, communicated, and results are uploaded
// back. That is what lets several ranks share one GPU (NCCL wants a device per rank) and
// what `parallel.backend: mpi` does on GPUs. Payloads are counted by the buffer call, so
// the communication model holds either way. With NCCL (SplitCommunicator), device tensors
// go to NCCL as they are and host tensors to MPI.

Tensor Communicator::staging(const Tensor& t) {
  TRAINER_ASSERT(t.device() != runtime::DeviceKind::cpu && !takes_device_buffers(),
                 "a host tensor given to a communicator of device buffers");
  return Tensor::empty(staging_allocator_, t.shape(), t.dtype(), runtime::MemoryCategory::comm);
}

// Runs `call(out, in)` on `out` and `in` themselves when this communicator takes their
// memory, else on host copies: `in` downloaded first, `out` uploaded after.
template <class Call>
void Communicator::staged(const Tensor& out, const Tensor& in, Call&& call) {
  if (direct(in)) return call(out, in);
  const Tensor host_in = staging(in);
  const bool same = out.raw() == in.raw() && out.numel() == in.numel();  // an in-place call
  const Tensor host_out = same ? host_in : staging(out);
  runtime::ops::download(host_in, in);
  call(host_out, host_in);
  runtime::ops::upload(out, host_out);
}

void Communicator::do_all_reduce_sum_tensor(const Tensor& data) {
  staged(data, data,
         [&](const Tensor& t, const Tensor&) { all_reduce_sum(t.raw(), t.numel(), t.dtype()); });
}

void Communicator::do_all_reduce_max_tensor(const Tensor& data) {
  staged(data, data, [&](const Tensor& t, const Tensor&) { all_reduce_max(t.f32(), t.numel()); });
}

void Communicator::do_all_gather_tensor(const Tensor& out, const Tensor& in) {
  TRAINER_ASSERT(out.numel() == in.numel() * size() && out.dtype() == in.dtype(),
                 "all_gather of " << in.numel() << " elements into " << out.numel() << " over "
                                  << size() << " ranks");
  staged(out, in, [&](const Tensor& o, const Tensor& i) {
    all_gather(o.raw(), i.raw(), i.numel(), i.dtype());
  });
}

void Communicator::do_reduce_scatter_tensor(const Tensor& out, const Tensor& in) {
  TRAINER_ASSERT(in.numel() == out.numel() * size() && out.dtype() == in.dtype(),
                 "reduce_scatter of " << in.numel() << " elements into " << out.numel() << " over "
                                      << size() << " ranks");
  staged(out, in, [&](const Tensor& o, const Tensor& i) {
    reduce_scatter(o.raw(), i.raw(), o.numel(), o.dtype());
  });
}

namespace {
// A request whose wait() is a trace slice (Note [Communication trace]).
class TracedRequest final : public Request {
 public:
  TracedRequest(std::unique_ptr<Request> inner, const runtime::trace::SliceInfo& operation)
      : inner_(std::move(inner)), operation_(operation) {}
  void wait() override {
    const runtime::trace::Scope scope({.name = "wait",
                                       .lane = runtime::trace::Lane::comm,
                                       .detail = operation_.name,
                                       .group = operation_.group,
                                       .bytes = operation_.bytes});
    inner_->wait();
  }
  bool done() override { return inner_->done(); }

 private:
  std::unique_ptr<Request> inner_;
  runtime::trace::SliceInfo operation_;
};
}  // namespace

std::unique_ptr<Request> CommTrace::traced(std::unique_ptr<Request> request) const {
  if (index_ < 0) return request;
  return std::make_unique<TracedRequest>(std::move(request), *info_);
}

namespace {
// A collective on staging copies, which it keeps alive; its wait() uploads the result.
class StagedCollective final : public Request {
 public:
  StagedCollective(Tensor out, Tensor host_in, Tensor host_out, std::unique_ptr<Request> inner)
      : out_(std::move(out)),
        host_in_(std::move(host_in)),
        host_out_(std::move(host_out)),
        inner_(std::move(inner)) {}
  void wait() override {
    inner_->wait();
    if (!uploaded_) runtime::ops::upload(out_, host_out_);
    uploaded_ = true;
  }
  bool done() override { return uploaded_ || inner_->done(); }

 private:
  Tensor out_, host_in_, host_out_;
  std::unique_ptr<Request> inner_;
  bool uploaded_ = false;
};

// Where `part` starts inside `whole`, in elements, or -1 when it is not inside.
int64_t offset_within(const Tensor& part, const Tensor& whole) {
  const char* p = static_cast<const char*>(part.raw());
  const char* w = static_cast<const char*>(whole.raw());
  if (p < w || p + part.nbytes() > w + whole.nbytes()) return -1;
  return (p - w) / runtime::dtype_size(part.dtype());
}
}  // namespace

template <class Call>
std::unique_ptr<Request> Communicator::staged_async(const Tensor& out, const Tensor& in,
                                                    Call&& call) {
  if (direct(in)) return call(out, in);
  // The in-place layouts stay in place on the host: `out` inside `in` (a reduce-scatter),
  // `in` inside `out` (an all-gather).
  const int64_t out_offset = offset_within(out, in), in_offset = offset_within(in, out);
  Tensor host_in, host_out;
  if (out_offset >= 0) {
    host_in = staging(in);
    host_out = host_in.view(out_offset, out.shape());
  } else {
    host_out = staging(out);
    host_in = in_offset >= 0 ? host_out.view(in_offset, in.shape()) : staging(in);
  }
  runtime::ops::download(host_in, in);
  auto inner = call(host_out, host_in);
  return std::make_unique<StagedCollective>(out, std::move(host_in), std::move(host_out),
                                            std::move(inner));
}

std::unique_ptr<Request> Communicator::do_reduce_scatter_async_buffer(void* out, const void* in,
                                                                      int64_t count,
                                                                      runtime::DType dtype) {
  reduce_scatter(out, in, count, dtype);
  return std::make_unique<CompletedRequest>();
}

std::unique_ptr<Request> Communicator::do_all_gather_async_buffer(void* out, const void* in,
                                                                  int64_t count,
                                                                  runtime::DType dtype) {
  all_gather(out, in, count, dtype);
  return std::make_unique<CompletedRequest>();
}

std::unique_ptr<Request> Communicator::do_reduce_scatter_async_tensor(const Tensor& out,
                                                                      const Tensor& in) {
  TRAINER_ASSERT(in.numel() == out.numel() * size() && out.dtype() == in.dtype(),
                 "reduce_scatter_async of " << in.numel() << " elements into " << out.numel()
                                            << " over " << size() << " ranks");
  return staged_async(out, in, [&](const Tensor& o, const Tensor& i) {
    return reduce_scatter_async(o.raw(), i.raw(), o.numel(), o.dtype());
  });
}

std::unique_ptr<Request> Communicator::do_all_gather_async_tensor(const Tensor& out,
                                                                  const Tensor& in) {
  TRAINER_ASSERT(out.numel() == in.numel() * size() && out.dtype() == in.dtype(),
                 "all_gather_async of " << in.numel() << " elements into " << out.numel()
                                        << " over " << size() << " ranks");
  return staged_async(out, in, [&](const Tensor& o, const Tensor& i) {
    return all_gather_async(o.raw(), i.raw(), i.numel(), i.dtype());
  });
}

namespace {
// A send from a staging copy, which it keeps alive until the transfer is done.
class StagedSend final : public Request {
 public:
  StagedSend(Tensor host, std::unique_ptr<Request> inner)
      : host_(std::move(host)), inner_(std::move(inner)) {}
  void wait() override { inner_->wait(); }
  bool done() override { return inner_->done(); }

 private:
  Tensor host_;
  std::unique_ptr<Request> inner_;
};
}  // namespace

std::unique_ptr<Request> Communicator::do_send_async_tensor(const Tensor& data, int peer, int tag) {
  if (direct(data)) return send_async(data.raw(), data.nbytes(), peer, tag);
  Tensor host = staging(data);
  runtime::ops::download(host, data);
  auto inner = send_async(host.raw(), host.nbytes(), peer, tag);
  return std::make_unique<StagedSend>(std::move(host), std::move(inner));
}

void Communicator::do_recv_tensor(const Tensor& data, int peer, int tag) {
  if (direct(data)) return recv(data.raw(), data.nbytes(), peer, tag);
  const Tensor host = staging(data);
  recv(host.raw(), host.nbytes(), peer, tag);
  runtime::ops::upload(data, host);
}

// ---- SelfCommunicator ----

void SelfCommunicator::do_all_gather_buffer(void* out, const void* in, int64_t count,
                                            runtime::DType dtype) {
  const int64_t bytes = count * runtime::dtype_size(dtype);
  add_payload(bytes);
  if (out != in) std::memmove(out, in, static_cast<size_t>(bytes));
}

void SelfCommunicator::do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                                runtime::DType dtype) {
  const int64_t bytes = count * runtime::dtype_size(dtype);
  add_payload(bytes);
  if (out != in) std::memmove(out, in, static_cast<size_t>(bytes));
}

std::unique_ptr<Request> SelfCommunicator::do_send_async_buffer(const void*, int64_t, int peer,
                                                                int) {
  TRAINER_ASSERT(false, "send to rank " << peer << " in a group of one");
  return nullptr;
}

void SelfCommunicator::do_recv_buffer(void*, int64_t, int peer, int) {
  TRAINER_ASSERT(false, "receive from rank " << peer << " in a group of one");
}

void SelfCommunicator::do_all_reduce_sum_tensor(const Tensor& data) {
  add_payload(data.nbytes());
}

void SelfCommunicator::do_all_reduce_max_tensor(const Tensor& data) {
  add_payload(data.nbytes());
}

void SelfCommunicator::do_all_gather_tensor(const Tensor& out, const Tensor& in) {
  add_payload(in.nbytes());
  if (out.raw() != in.raw()) runtime::ops::copy(out, in);
}

void SelfCommunicator::do_reduce_scatter_tensor(const Tensor& out, const Tensor& in) {
  add_payload(in.nbytes());
  if (out.raw() != in.raw()) runtime::ops::copy(out, in);
}

std::unique_ptr<Request> SelfCommunicator::do_reduce_scatter_async_tensor(const Tensor& out,
                                                                          const Tensor& in) {
  reduce_scatter(out, in);
  return std::make_unique<CompletedRequest>();
}

std::unique_ptr<Request> SelfCommunicator::do_all_gather_async_tensor(const Tensor& out,
                                                                      const Tensor& in) {
  all_gather(out, in);
  return std::make_unique<CompletedRequest>();
}

// ---- SplitCommunicator ----

SplitCommunicator::SplitCommunicator(std::unique_ptr<Communicator> host,
                                     std::unique_ptr<Communicator> device)
    : host_(std::move(host)), device_(std::move(device)) {
  set_group_name(host_->group_name());
  TRAINER_ASSERT(!host_->takes_device_buffers() && device_->takes_device_buffers() &&
                     host_->rank() == device_->rank() && host_->size() == device_->size(),
                 "SplitCommunicator needs a host and a device communicator of one group");
}

void SplitCommunicator::do_all_reduce_sum_buffer(void* data, int64_t count, runtime::DType dtype) {
  host_->all_reduce_sum(data, count, dtype);
}
void SplitCommunicator::do_all_reduce_sum_f64_buffer(double* data, int64_t count) {
  host_->all_reduce_sum(data, count);
}
void SplitCommunicator::do_all_reduce_max_buffer(float* data, int64_t count) {
  host_->all_reduce_max(data, count);
}
void SplitCommunicator::do_all_gather_buffer(void* out, const void* in, int64_t count,
                                             runtime::DType dtype) {
  host_->all_gather(out, in, count, dtype);
}
void SplitCommunicator::do_reduce_scatter_buffer(void* out, const void* in, int64_t count,
                                                 runtime::DType dtype) {
  host_->reduce_scatter(out, in, count, dtype);
}
void SplitCommunicator::do_broadcast(void* data, int64_t bytes, int root) {
  host_->broadcast(data, bytes, root);
}
void SplitCommunicator::do_barrier() {
  host_->barrier();
}
std::unique_ptr<Request> SplitCommunicator::do_send_async_buffer(const void* data, int64_t bytes,
                                                                 int peer, int tag) {
  return host_->send_async(data, bytes, peer, tag);
}
void SplitCommunicator::do_recv_buffer(void* data, int64_t bytes, int peer, int tag) {
  host_->recv(data, bytes, peer, tag);
}
void SplitCommunicator::do_all_reduce_sum_tensor(const Tensor& data) {
  pick(data).all_reduce_sum(data);
}
void SplitCommunicator::do_all_reduce_max_tensor(const Tensor& data) {
  pick(data).all_reduce_max(data);
}
void SplitCommunicator::do_all_gather_tensor(const Tensor& out, const Tensor& in) {
  pick(in).all_gather(out, in);
}
void SplitCommunicator::do_reduce_scatter_tensor(const Tensor& out, const Tensor& in) {
  pick(in).reduce_scatter(out, in);
}
std::unique_ptr<Request> SplitCommunicator::do_send_async_tensor(const Tensor& data, int peer,
                                                                 int tag) {
  return pick(data).send_async(data, peer, tag);
}
void SplitCommunicator::do_recv_tensor(const Tensor& data, int peer, int tag) {
  pick(data).recv(data, peer, tag);
}
std::unique_ptr<Request> SplitCommunicator::do_reduce_scatter_async_buffer(void* out,
                                                                           const void* in,
                                                                           int64_t count,
                                                                           runtime::DType dtype) {
  return host_->reduce_scatter_async(out, in, count, dtype);
}
std::unique_ptr<Request> SplitCommunicator::do_all_gather_async_buffer(void* out, const void* in,
                                                                       int64_t count,
                                                                       runtime::DType dtype) {
  return host_->all_gather_async(out, in, count, dtype);
}
std::unique_ptr<Request> SplitCommunicator::do_reduce_scatter_async_tensor(const Tensor& out,
                                                                           const Tensor& in) {
  return pick(in).reduce_scatter_async(out, in);
}
std::unique_ptr<Request> SplitCommunicator::do_all_gather_async_tensor(const Tensor& out,
                                                                       const Tensor& in) {
  return pick(in).all_gather_async(out, in);
}
int64_t SplitCommunicator::payload_bytes() const {
  return host_->payload_bytes() + device_->payload_bytes();
}

}  // namespace parallel
