// A group that moves nothing: every collective and message leaves its buffers as they are, for
// replaying one rank's step on the meta device (Note [Meta replay] in runtime/meta_device.h)
// without its peers. Only the memory a step allocates and the payload it hands its groups
// (payload_bytes, counted as the MPI communicator counts it) are real in such a replay.
#pragma once

#include <cstdint>
#include <memory>

#include "parallel/core/communicator.h"
#include "parallel/core/process_groups.h"

namespace parallel {

class ReplayCommunicator final : public Communicator {
 public:
  ReplayCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

 private:
  TRAINER_BUFFER_HOOK_OVERRIDES;
  // Tensors stay where they are (no host staging: a real run stages on its own allocator).
  void do_all_reduce_sum_tensor(const runtime::Tensor& data) override;
  void do_all_reduce_max_tensor(const runtime::Tensor& data) override;
  void do_all_gather_tensor(const runtime::Tensor& out, const runtime::Tensor& in) override;
  void do_reduce_scatter_tensor(const runtime::Tensor& out, const runtime::Tensor& in) override;
  std::unique_ptr<Request> do_send_async_tensor(const runtime::Tensor& data, int, int) override;
  void do_recv_tensor(const runtime::Tensor&, int, int) override {}
  // Non-blocking collectives: no-ops, complete at once.
  std::unique_ptr<Request> do_reduce_scatter_async_tensor(const runtime::Tensor&,
                                                          const runtime::Tensor&) override;
  std::unique_ptr<Request> do_all_gather_async_tensor(const runtime::Tensor&,
                                                      const runtime::Tensor&) override;

  int rank_, size_;
};

// The groups of world rank `world_rank` of a job of `config`'s shape, each a ReplayCommunicator
// of the size and with the rank that ProcessGroups::from_mpi would give it.
ProcessGroups replay_groups(const ParallelConfig& config, int64_t world_rank);

}  // namespace parallel
