// Collectives over one process group, behind one interface so the MPI (host
// buffers) and NCCL (device buffers) implementations are interchangeable.
// Counts are elements. Gathers and scatters split their buffer into `size()`
// equal contiguous chunks in rank order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace parallel {

// A pending point-to-point transfer; wait() blocks until it completed.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place reductions across the group.
  virtual void all_reduce_sum(float* data, int64_t count) = 0;
  virtual void all_reduce_sum(double* data, int64_t count) = 0;
  virtual void all_reduce_max(float* data, int64_t count) = 0;
  // out (size() * count) = concatenation of every rank's in (count).
  virtual void all_gather(float* out, const float* in, int64_t count) = 0;
  // out (count) = sum over ranks of chunk rank() of in (size() * count).
  virtual void reduce_scatter(float* out, const float* in, int64_t count) = 0;
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Point to point; `tag` tells concurrent messages between the same ranks apart.
  // send_async's buffer must stay untouched until the request is waited for.
  virtual std::unique_ptr<Request> send_async(const void* data, int64_t bytes, int peer, int tag) = 0;
  virtual void recv(void* data, int64_t bytes, int peer, int tag) = 0;

  // Bytes this rank has handed to the group since construction: each
  // collective's input buffer, each message sent.
  int64_t payload_bytes() const { return payload_bytes_; }

 protected:
  void add_payload(int64_t bytes) { payload_bytes_ += bytes; }

 private:
  int64_t payload_bytes_ = 0;
};

// The group of one process: every collective is the identity (payloads are
// still counted, so the communication model holds for one process too).
class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(float*, int64_t count) override { add_payload(count * 4); }
  void all_reduce_sum(double*, int64_t count) override { add_payload(count * 8); }
  void all_reduce_max(float*, int64_t count) override { add_payload(count * 4); }
  void all_gather(float* out, const float* in, int64_t count) override;
  void reduce_scatter(float* out, const float* in, int64_t count) override;
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  std::unique_ptr<Request> send_async(const void*, int64_t, int, int) override;
  void recv(void*, int64_t, int, int) override;
};

}  // namespace parallel
