// Inference of a whole GPT (GPT-2 or Llama blocks) on one process with a key/value cache: each
// call runs the new tokens through the model's runtime ops and appends their keys and values to
// the cache. Rules: no dropout, one sequence; the cache holds each kv head once (grouped-query
// attention shares it among its query heads, never copied); positions are global.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt_params.h"
#include "model/layer_stash.h"
#include "runtime/allocator.h"

namespace model {

// The keys and values of the positions run so far, per layer, in pack_kv's layout: kv head g's
// key then its value (runtime/op_args.h, PackKv).
struct KvCache {
  std::vector<Tensor> layers;  // per layer (capacity, 1, kv_heads * 2 * head_dim)
  int64_t length = 0;          // positions filled: the next token's position
  int64_t capacity = 0;
};

class Decoder {
 public:
  // `params`: the whole model of `config` (ModelShard::whole), f32, on the allocator's device
  // (the host or a GPU); the decoder keeps references to both and allocates its temporaries and
  // caches from `allocator`.
  Decoder(const GptParams& params, const GptConfig& config, runtime::Allocator& allocator);

  // An empty cache for `capacity` positions (at most the learned positions' table with
  // learned positions; InputError otherwise).
  KvCache new_cache(int64_t capacity) const;

  // Runs `tokens` at positions cache.length.. (each < vocab_size; InputError naming the token
  // otherwise), attending to the cached positions and to each other (causal), and appends their
  // keys and values. Returns the logits (tokens, padded_vocab) f32; columns from vocab_size on
  // are padding, on the allocator's device. An empty cache and every token at once is the full
  // forward without a cache.
  Tensor forward(KvCache& cache, std::span<const int32_t> tokens);

  const GptConfig& config() const { return config_; }

 private:
  // x (n, 1, C) += the attention of layer `layer` over the cache, then its MLP.
  void layer_forward(const Tensor& x, const LayerParams& w, Tensor& cache_layer, int64_t position,
                     int64_t n);
  // out (n, C) = the block's normalization of x (LayerNorm or RMSNorm).
  void normalize(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                 int64_t n);
  Tensor workspace(const runtime::Shape& shape, runtime::DType dtype = runtime::DType::f32) const;

  const GptParams& params_;
  GptConfig config_;
  LayerDims dims_;  // one sample, no dropout: the block's features and per-layer sizes
  runtime::Allocator& allocator_;
  runtime::CpuAllocator host_;  // the token ids before their upload
};

}  // namespace model
