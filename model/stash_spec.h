// A stash spec: the named tensors one part of the model (a layer, the embedding, the head)
// keeps from forward for backward, with shape, dtype and whether they are kept. The part
// allocates from its spec and the memory model in recompute/ predicts from the same spec.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/memory_timeline.h"
#include "runtime/tensor.h"

namespace model {

using runtime::Tensor;

template <class Stash>
struct StashTensorSpec {
  const char* name;
  Tensor Stash::*member;
  runtime::Shape shape;
  runtime::DType dtype;
  bool kept;                 // held from forward to backward (category activation)
  bool from_caller = false;  // the caller allocates it (and picks its category); the stash holds it

  int64_t bytes() const { return runtime::shape_numel(shape) * runtime::dtype_size(dtype); }
};

template <class Stash>
using StashSpec = std::vector<StashTensorSpec<Stash>>;

// Bytes kept from forward to backward, and bytes not kept (a layer rebuilds those in backward).
template <class Stash>
int64_t stash_kept_bytes(const StashSpec<Stash>& spec) {
  int64_t bytes = 0;
  for (const StashTensorSpec<Stash>& s : spec)
    if (s.kept) bytes += s.bytes();
  return bytes;
}

template <class Stash>
int64_t stash_dropped_bytes(const StashSpec<Stash>& spec) {
  int64_t bytes = 0;
  for (const StashTensorSpec<Stash>& s : spec)
    if (!s.kept) bytes += s.bytes();
  return bytes;
}

// Allocates a stash's tensors from its spec: kept ones (and backward-time rebuilds) in
// category activation, the ones only forward reads in workspace.
template <class Stash>
class StashMaker {
 public:
  StashMaker(StashSpec<Stash> spec, runtime::Allocator& allocator)
      : spec_(std::move(spec)), allocator_(allocator) {}

  // The member's entry; null when the spec leaves it out (a mask without dropout).
  const StashTensorSpec<Stash>* find(Tensor Stash::*member) const {
    for (const StashTensorSpec<Stash>& s : spec_)
      if (s.member == member) return &s;
    return nullptr;
  }
  bool kept(Tensor Stash::*member) const {
    const StashTensorSpec<Stash>* s = find(member);
    return s != nullptr && s->kept;
  }
  // Allocates stash.*member; `rebuild` marks a backward-time rebuild (always activation).
  void make(Stash& stash, Tensor Stash::*member, bool rebuild = false) const {
    const StashTensorSpec<Stash>* s = find(member);
    TRAINER_ASSERT(s != nullptr, "stash member not in spec");
    TRAINER_ASSERT(!s->from_caller, "stash member " << s->name << " is the caller's to allocate");
    const runtime::MemoryCategory category = (rebuild || s->kept)
                                                 ? runtime::MemoryCategory::activation
                                                 : runtime::MemoryCategory::workspace;
    const runtime::memory_timeline::Name timeline_name(s->name);
    stash.*member = Tensor::empty(allocator_, s->shape, s->dtype, category);
  }
  // Allocates every tensor the caller does not give, in spec order.
  void make_all(Stash& stash) const {
    for (const StashTensorSpec<Stash>& s : spec_)
      if (!s.from_caller) make(stash, s.member);
  }
  // Lets go of every tensor not kept for backward (the caller's ones included).
  void release_dropped(Stash& stash) const {
    for (const StashTensorSpec<Stash>& s : spec_)
      if (!s.kept) stash.*s.member = Tensor();
  }
  const StashSpec<Stash>& spec() const { return spec_; }

 private:
  StashSpec<Stash> spec_;
  runtime::Allocator& allocator_;
};

}  // namespace model
