// ReplayCommunicator: every hook moves nothing and completes at once, and counts the payload
// the MPI communicator counts for the same call (a collective's input, a message's bytes).
#include "parallel/core/replay_communicator.h"

namespace parallel {

void ReplayCommunicator::do_all_reduce_sum_buffer(void*, int64_t count, runtime::DType dtype) {
  add_payload(count * runtime::dtype_size(dtype));
}
void ReplayCommunicator::do_all_reduce_sum_f64_buffer(double*, int64_t count) {
  add_payload(count * 8);
}
void ReplayCommunicator::do_all_reduce_max_buffer(float*, int64_t count) {
  add_payload(count * 4);
}
void ReplayCommunicator::do_all_gather_buffer(void*, const void*, int64_t count,
                                              runtime::DType dtype) {
  add_payload(count * runtime::dtype_size(dtype));
}
void ReplayCommunicator::do_reduce_scatter_buffer(void*, const void*, int64_t count,
                                                  runtime::DType dtype) {
  add_payload(count * size_ * runtime::dtype_size(dtype));
}
void ReplayCommunicator::do_broadcast(void*, int64_t, int) {}
void ReplayCommunicator::do_barrier() {}
std::unique_ptr<Request> ReplayCommunicator::do_send_async_buffer(const void*, int64_t bytes, int,
                                                                  int) {
  add_payload(bytes);
  return std::make_unique<CompletedRequest>();
}
void ReplayCommunicator::do_recv_buffer(void*, int64_t, int, int) {}

void ReplayCommunicator::do_all_reduce_sum_tensor(const runtime::Tensor& data) {
  add_payload(data.nbytes());
}
void ReplayCommunicator::do_all_reduce_max_tensor(const runtime::Tensor& data) {
  add_payload(data.nbytes());
}
void ReplayCommunicator::do_all_gather_tensor(const runtime::Tensor&, const runtime::Tensor& in) {
  add_payload(in.nbytes());
}
void ReplayCommunicator::do_reduce_scatter_tensor(const runtime::Tensor&,
                                                  const runtime::Tensor& in) {
  add_payload(in.nbytes());
}
std::unique_ptr<Request> ReplayCommunicator::do_send_async_tensor(const runtime::Tensor& data, int,
                                                                  int) {
  add_payload(data.nbytes());
  return std::make_unique<CompletedRequest>();
}
std::unique_ptr<Request> ReplayCommunicator::do_reduce_scatter_async_tensor(
    const runtime::Tensor&, const runtime::Tensor& in) {
  add_payload(in.nbytes());
  return std::make_unique<CompletedRequest>();
}
std::unique_ptr<Request> ReplayCommunicator::do_all_gather_async_tensor(const runtime::Tensor&,
                                                                        const runtime::Tensor& in) {
  add_payload(in.nbytes());
  return std::make_unique<CompletedRequest>();
}

ProcessGroups replay_groups(const ParallelConfig& config, int64_t world_rank) {
  ProcessGroups g;
  g.config = config;
  g.world_rank = world_rank;
  g.coordinates = rank_coordinates(world_rank, config);
  const RankCoordinates& r = g.coordinates;
  auto group = [](int64_t rank, int64_t size) {
    return std::make_unique<ReplayCommunicator>(static_cast<int>(rank), static_cast<int>(size));
  };
  g.world = group(world_rank, config.world_size());
  g.tp = group(r.tp, config.tensor);
  g.cp = group(r.cp, config.context);
  g.dp = group(r.cp + config.context * r.dp, config.context * config.data);
  g.pp = group(r.pp, config.pipeline);
  g.model_parallel = group(r.tp + config.tensor * r.pp, config.tensor * config.pipeline);
  if (config.pipeline > 1 && (r.pp == 0 || r.pp == config.pipeline - 1)) {
    g.embedding = group(r.pp == 0 ? 0 : 1, 2);
  }
  return g;
}

}  // namespace parallel
