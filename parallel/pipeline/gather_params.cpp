// Each holder sends rank 0 a count, then per tensor a header (index in the
// whole model's named list, offset along the split dimension) and the data;
// rank 0 takes the holders one by one and writes each part into place.
#include "parallel/pipeline/gather_params.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

namespace parallel {
namespace {

constexpr int kCountTag = 1, kHeaderTag = 2, kDataTag = 3;

struct Header {
  int64_t index;         // in full->named
  int64_t shard_offset;  // along the split dimension
};

// Copies a part (shard_dim, offset) of a tensor into its place in the whole tensor.
void place(const model::NamedParam& whole, const float* part, const runtime::Shape& part_shape,
           int shard_dim, int64_t offset) {
  float* out = whole.tensor.f32();
  if (shard_dim < 0) {
    std::copy(part, part + whole.tensor.numel(), out);
  } else if (shard_dim == 0) {
    const int64_t row = runtime::shape_numel(whole.tensor.shape()) / whole.tensor.dim(0);
    std::copy(part, part + runtime::shape_numel(part_shape), out + offset * row);
  } else {
    const int64_t rows = part_shape[0], cols = part_shape[1], whole_cols = whole.tensor.dim(1);
    for (int64_t r = 0; r < rows; ++r)
      std::copy(part + r * cols, part + (r + 1) * cols, out + r * whole_cols + offset);
  }
}

}  // namespace

void gather_to_rank0(ProcessGroups& groups, const model::GptConfig& config,
                     const model::GptParams& local, const model::GptParams* full) {
  TRAINER_ASSERT(local.flat.device() == runtime::DeviceKind::cpu,
                 "gather_to_rank0 takes host parameters (download device ones first)");
  Communicator& world = *groups.world;
  const bool root = world.rank() == 0;
  const bool holder = groups.coordinates.dp == 0 && groups.coordinates.cp == 0;
  const bool tp_leader = groups.coordinates.tp == 0;
  const bool first_stage = groups.coordinates.pp == 0;

  // What this rank contributes: split tensors from every tp rank, replicated ones
  // from tp rank 0, the tied word embeddings from the first stage only.
  std::vector<const model::NamedParam*> owned;
  if (holder) {
    for (const model::NamedParam& p : local.named) {
      if (p.shard_dim < 0 && !tp_leader) continue;
      if (p.roles.tied && !first_stage) continue;
      owned.push_back(&p);
    }
  }
  std::map<std::string, int64_t> index;
  for (const std::string& name : model::whole_model_param_names(config)) {
    index.emplace(name, static_cast<int64_t>(index.size()));
  }

  if (root) {
    for (const model::NamedParam* p : owned) {
      place(full->named[static_cast<size_t>(index.at(p->name))], p->tensor.f32(), p->tensor.shape(),
            p->shard_dim, p->shard_offset);
    }
    for (int source = 1; source < world.size(); ++source) {
      int64_t count = 0;
      world.recv(&count, sizeof count, source, kCountTag);
      for (int64_t i = 0; i < count; ++i) {
        Header header{};
        world.recv(&header, sizeof header, source, kHeaderTag);
        const model::NamedParam& whole = full->named[static_cast<size_t>(header.index)];
        runtime::Shape part_shape = whole.tensor.shape();
        // The sender's part: the whole tensor, or a 1/tp slice along its split dimension.
        if (whole.shard_dim >= 0)
          part_shape[static_cast<size_t>(whole.shard_dim)] /= groups.config.tensor;
        std::vector<float> part(static_cast<size_t>(runtime::shape_numel(part_shape)));
        world.recv(part.data(), static_cast<int64_t>(part.size() * sizeof(float)), source,
                   kDataTag);
        place(whole, part.data(), part_shape, whole.shard_dim, header.shard_offset);
      }
    }
  } else {
    std::vector<std::unique_ptr<Request>> sends;
    std::vector<Header> headers;
    headers.reserve(owned.size());
    int64_t count = static_cast<int64_t>(owned.size());
    sends.push_back(world.send_async(&count, sizeof count, 0, kCountTag));
    for (const model::NamedParam* p : owned) {
      headers.push_back({index.at(p->name), p->shard_offset});
      sends.push_back(world.send_async(&headers.back(), sizeof(Header), 0, kHeaderTag));
      sends.push_back(world.send_async(p->tensor.raw(), p->tensor.nbytes(), 0, kDataTag));
    }
    for (auto& send : sends) send->wait();
  }
  world.barrier();
}

}  // namespace parallel
