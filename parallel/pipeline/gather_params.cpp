// Each holder sends rank 0 a count and a header per part it holds (the
// parameter's index in the whole model's named list, its offset along the split
// dimension); then, per parameter gathered, every holder of it sends its part
// and rank 0 takes the holders in rank order, writing each part into place.
#include "parallel/pipeline/gather_params.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

namespace parallel {
namespace {

constexpr int kCountTag = 1, kHeaderTag = 2, kDataTag = 3;

struct Header {
  int64_t index;         // in the whole model's named list
  int64_t shard_offset;  // along the split dimension
};

// Copies a part (shard_dim, offset) of a tensor into its place in `whole`, the tensor's values in
// `whole_shape`.
void place(float* whole, const runtime::Shape& whole_shape, const float* part,
           const runtime::Shape& part_shape, int shard_dim, int64_t offset) {
  if (shard_dim < 0) {
    std::copy(part, part + runtime::shape_numel(whole_shape), whole);
  } else if (shard_dim == 0) {
    const int64_t row = runtime::shape_numel(whole_shape) / whole_shape[0];
    std::copy(part, part + runtime::shape_numel(part_shape), whole + offset * row);
  } else {
    const int64_t rows = part_shape[0], cols = part_shape[1], whole_cols = whole_shape[1];
    for (int64_t r = 0; r < rows; ++r)
      std::copy(part + r * cols, part + (r + 1) * cols, whole + r * whole_cols + offset);
  }
}

}  // namespace

ParamGather::ParamGather(ProcessGroups& groups, const model::GptConfig& config,
                         const model::GptParams& local)
    : groups_(groups), whole_(config), owned_(whole_.named().size(), nullptr) {
  TRAINER_ASSERT(
      local.flat.device() == runtime::DeviceKind::cpu && local.flat.dtype() == runtime::DType::f32,
      "ParamGather takes host f32 parameters (download device ones first)");
  Communicator& world = *groups.world;
  const bool holder = groups.coordinates.dp == 0 && groups.coordinates.cp == 0;
  const bool tp_leader = groups.coordinates.tp == 0;
  const bool first_stage = groups.coordinates.pp == 0;
  std::map<std::string, int64_t> index;
  for (const model::NamedParam& p : whole_.named())
    index.emplace(p.name, static_cast<int64_t>(index.size()));

  // What this rank contributes: split tensors from every tp rank, replicated ones
  // from tp rank 0, the tied word embeddings from the first stage only.
  std::vector<Header> headers;
  if (holder) {
    for (const model::NamedParam& p : local.named) {
      if (p.shard_dim < 0 && !tp_leader) continue;
      if (p.roles.tied && !first_stage) continue;
      const int64_t i = index.at(p.name);
      owned_[static_cast<size_t>(i)] = &p;
      headers.push_back({i, p.shard_offset});
    }
  }
  if (world.rank() != 0) {
    const auto count = static_cast<int64_t>(headers.size());
    world.send_async(&count, sizeof count, 0, kCountTag)->wait();
    if (count > 0)
      world.send_async(headers.data(), count * static_cast<int64_t>(sizeof(Header)), 0, kHeaderTag)
          ->wait();
    return;
  }
  parts_.resize(whole_.named().size());
  for (const Header& header : headers)
    parts_[static_cast<size_t>(header.index)].push_back({0, header.shard_offset});
  for (int source = 1; source < world.size(); ++source) {
    int64_t count = 0;
    world.recv(&count, sizeof count, source, kCountTag);
    std::vector<Header> received(static_cast<size_t>(count));
    if (count > 0)
      world.recv(received.data(), count * static_cast<int64_t>(sizeof(Header)), source, kHeaderTag);
    for (const Header& header : received)
      parts_[static_cast<size_t>(header.index)].push_back({source, header.shard_offset});
  }
}

int64_t ParamGather::numel(int64_t index) const {
  return whole_.named().at(static_cast<size_t>(index)).tensor.numel();
}

void ParamGather::gather(int64_t index, std::span<float> out) {
  Communicator& world = *groups_.world;
  const model::NamedParam* mine = owned_.at(static_cast<size_t>(index));
  if (world.rank() != 0) {
    if (mine != nullptr)
      world.send_async(mine->tensor.raw(), mine->tensor.nbytes(), 0, kDataTag)->wait();
    return;
  }
  const model::NamedParam& whole = whole_.named()[static_cast<size_t>(index)];
  TRAINER_ASSERT(static_cast<int64_t>(out.size()) == whole.tensor.numel(),
                 whole.name << ": gathered into " << out.size() << " values");
  // The sender's part: the whole tensor, or a 1/tp slice along its split dimension.
  runtime::Shape part_shape = whole.global_shape;
  if (whole.shard_dim >= 0)
    part_shape[static_cast<size_t>(whole.shard_dim)] /= groups_.config.tensor;
  const int64_t part_numel = runtime::shape_numel(part_shape);
  std::vector<float> part;  // a received column block, before it is placed
  for (const Part& sender : parts_[static_cast<size_t>(index)]) {
    if (sender.source == 0) {
      place(out.data(), whole.global_shape, mine->tensor.f32(), part_shape, whole.shard_dim,
            sender.shard_offset);
    } else if (whole.shard_dim <= 0) {  // whole rows: received into place
      const int64_t row = whole.shard_dim < 0 ? 0 : part_numel / part_shape[0];
      world.recv(out.data() + sender.shard_offset * row, part_numel * int64_t{sizeof(float)},
                 sender.source, kDataTag);
    } else {
      part.resize(static_cast<size_t>(part_numel));
      world.recv(part.data(), part_numel * int64_t{sizeof(float)}, sender.source, kDataTag);
      place(out.data(), whole.global_shape, part.data(), part_shape, whole.shard_dim,
            sender.shard_offset);
    }
  }
}

void gather_to_rank0(ProcessGroups& groups, const model::GptConfig& config,
                     const model::GptParams& local, const model::GptParams* full) {
  ParamGather gather(groups, config, local);
  for (int64_t i = 0; i < gather.count(); ++i) {
    std::span<float> out;
    if (full != nullptr) {
      const runtime::Tensor& whole = full->named[static_cast<size_t>(i)].tensor;
      out = {whole.f32(), static_cast<size_t>(whole.numel())};
    }
    gather.gather(i, out);
  }
  groups.world->barrier();
}

}  // namespace parallel
