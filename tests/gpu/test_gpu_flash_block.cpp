// Ring attention's block kernels on the device, end to end: the blocks every rank of cp 2 runs
// on chunks of 200 rows (several tiles, a partial one), merged, converted, back-propagated and
// assembled, against one whole-sequence flash call on the host, in f32 and bf16, with dropout,
// causal or with a sliding window, with or without documents; and bit-identical on a second run.
// The op twins compare each operator alone on small shapes. Skips without a device.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu/flash_attention.h"
#include "runtime/kernels/cpu/flash_block.h"
#include "runtime/kernels/cuda/elementwise.h"
#include "runtime/kernels/cuda/flash_attention.h"
#include "runtime/kernels/cuda/flash_block.h"
#include "runtime/kernels/cuda/stream.h"
#include "runtime/philox.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;
using runtime::cpu::FlashAttentionDims;

class GpuFlashBlock : public gpu_test::GpuTest {};

constexpr int64_t kRanks = 2, kChunk = 200, kChunks = 2 * kRanks, kT = kChunks * kChunk;
constexpr int64_t kB = 1, kH = 2, kD = 64, kBH = kB * kH;
constexpr int64_t kQkvRow = kBH * 3 * kD, kCtxRow = kBH * kD;

// A sliding window of kWindow keys (Note [Sliding window] in runtime/op_args.h) spans two chunks:
// some blocks are cut by it, and the last chunk's queries see none of the first chunk's keys.
// 266 puts a window edge on a tile's first row: query 128 of a chunk is the last to see key 63 of
// the chunk before it, alone in the dK/dV kernel's last query step (one of 32) and the first of
// a forward tile whose first key tile is 0 (one of 64).
constexpr int64_t kWindow = 266;

// Documents (Note [Document masking] in runtime/op_args.h), ending at these positions. 262
// starts one at query 263 (a lone key) that holds queries 264 on, so that key 263, the last of a
// key tile (a dK/dV CTA's and its last warp's), is the first key of a query tile (the forward's
// and dQ's, and their first warp's) and of a dK/dV query step. 399 starts one at the third
// chunk's first row, which sees none of the first two chunks' keys; 500 and 501 make two lone
// keys in a row.
constexpr int64_t kDocumentEnds[] = {150, 262, 399, 500, 501, 650};

// The document starts of the whole sequence, (kT, kB): the position after the last end before a
// query, or 0.
std::vector<int32_t> document_starts() {
  std::vector<int32_t> starts(kT * kB);
  int64_t start = 0;
  for (int64_t t = 0; t < kT; ++t) {
    for (int64_t end : kDocumentEnds)
      if (end < t) start = std::max(start, end + 1);
    for (int64_t b = 0; b < kB; ++b) starts[t * kB + b] = static_cast<int32_t>(start);
  }
  return starts;
}

// A ring's masking: its window (0: causal) and document starts (empty: one document).
struct Masking {
  int64_t window = 0;
  std::vector<int32_t> document_starts = {};
  const int32_t* host_starts() const {
    return document_starts.empty() ? nullptr : document_starts.data();
  }
};

// window: 0 (causal) or kWindow.
FlashAttentionDims whole_dims(int64_t window) {
  return FlashAttentionDims{
      .seq_len = kT,
      .micro_batch = kB,
      .heads = kH,
      .head_dim = kD,
      .head_offset = 3,
      .sample_offset = 5,
      .scale = 0.125f,
      .dropout_prob = 0.1f,
      .dropout_key = runtime::make_dropout_key(7, 11, 2, runtime::DropoutOp::attention_probs),
      .window = window};
}

// Query chunk qc against key chunk kc of the whole sequence.
FlashAttentionDims block_dims(int64_t qc, int64_t kc, int64_t window) {
  FlashAttentionDims d = whole_dims(window);
  d.seq_len = kChunk;
  d.kv_len = kChunk;
  d.q_position = qc * kChunk;
  d.kv_position = kc * kChunk;
  d.full_len = kT;
  return d;
}

struct Result {
  std::vector<float> ctx, lse, dqkv;  // the whole sequence's layouts
};

// Element: float or uint16_t (bf16 bits). The device's activations hold qkv and dctx (rounded
// for bf16); ctx, lse and the gradient accumulators are f32.
template <class Element>
Result run_ring(const std::vector<float>& qkv, const std::vector<float>& dctx,
                const Masking& masking) {
  using Act = std::conditional_t<std::is_same_v<Element, float>, float, __nv_bfloat16>;
  const auto act = [](DeviceBuffer<Element>& buffer) {
    return reinterpret_cast<Act*>(buffer.data());
  };
  const auto upload = [](const std::vector<float>& values) {
    if constexpr (std::is_same_v<Element, float>) {
      return DeviceBuffer<float>(values);
    } else {
      return gpu_test::upload_bf16(values);
    }
  };
  runtime::cuda::CudaStream stream;
  const cudaStream_t s = stream.get();
  const runtime::cpu::FlashRows chunk_rows{kChunk, kB, kH, kD};
  DeviceBuffer<Element> qkv_dev = upload(qkv), dctx_dev = upload(dctx);
  DeviceBuffer<Element> dqkv_dev(qkv.size());
  DeviceBuffer<int32_t> starts_dev(masking.document_starts);
  const auto starts_of = [&](int64_t qc) {  // the document starts of query chunk qc, or null
    return masking.document_starts.empty() ? nullptr : starts_dev.data() + qc * kChunk * kB;
  };
  DeviceBuffer<float> ctx_block(kChunk * kCtxRow), lse_block(kBH * kChunk);
  std::vector<DeviceBuffer<Element>> kv;
  std::vector<DeviceBuffer<float>> ctx, lse, dq, dkv;
  for (int64_t k = 0; k < kChunks; ++k) {
    kv.emplace_back(kChunk * kBH * 2 * kD);
    runtime::cuda::pack_kv(act(kv[k]), act(qkv_dev) + k * kChunk * kQkvRow, chunk_rows, s);
    ctx.emplace_back(std::vector<float>(kChunk * kCtxRow, 0.f));
    lse.emplace_back(std::vector<float>(kBH * kChunk, -INFINITY));
    dq.emplace_back(std::vector<float>(kChunk * kCtxRow, 0.f));
    dkv.emplace_back(std::vector<float>(kChunk * kBH * 2 * kD, 0.f));
  }
  // Rank r holds chunks r and 2N-1-r and sees, at step t, the key chunks of rank (r - t) mod N.
  const auto for_each_block = [&](auto visit) {
    for (int64_t r = 0; r < kRanks; ++r)
      for (int64_t t = 0; t < kRanks; ++t) {
        const int64_t kv_rank = (r - t + kRanks) % kRanks;
        for (int64_t qc : {r, kChunks - 1 - r})
          for (int64_t kc : {kv_rank, kChunks - 1 - kv_rank})
            if (kc <= qc) visit(qc, kc);
      }
  };
  for_each_block([&](int64_t qc, int64_t kc) {
    runtime::cuda::flash_block_forward(ctx_block.data(), lse_block.data(),
                                       act(qkv_dev) + qc * kChunk * kQkvRow, act(kv[kc]),
                                       block_dims(qc, kc, masking.window), starts_of(qc), s);
    runtime::cuda::flash_merge(ctx[qc].data(), lse[qc].data(), ctx_block.data(), lse_block.data(),
                               chunk_rows, s);
  });
  Result out{std::vector<float>(kT * kCtxRow), std::vector<float>(kBH * kT), {}};
  std::vector<DeviceBuffer<Element>> ctx_merged;  // the merged output in the activation type
  for (int64_t k = 0; k < kChunks; ++k) {
    ctx_merged.emplace_back(kChunk * kCtxRow);
    if constexpr (std::is_same_v<Element, float>) {
      TRAINER_CUDA_CHECK(cudaMemcpyAsync(ctx_merged[k].data(), ctx[k].data(),
                                         kChunk * kCtxRow * sizeof(float), cudaMemcpyDefault, s));
    } else {
      runtime::cuda::convert(act(ctx_merged[k]), ctx[k].data(), kChunk * kCtxRow, s);
    }
    const std::vector<float> c = ctx[k].download(), l = lse[k].download();
    std::copy(c.begin(), c.end(), out.ctx.begin() + k * kChunk * kCtxRow);
    for (int64_t bh = 0; bh < kBH; ++bh)
      std::copy_n(l.begin() + bh * kChunk, kChunk, out.lse.begin() + bh * kT + k * kChunk);
  }
  for_each_block([&](int64_t qc, int64_t kc) {
    runtime::cuda::flash_block_backward(
        dq[qc].data(), dkv[kc].data(), act(dctx_dev) + qc * kChunk * kCtxRow,
        act(qkv_dev) + qc * kChunk * kQkvRow, act(kv[kc]), act(ctx_merged[qc]), lse[qc].data(),
        block_dims(qc, kc, masking.window), starts_of(qc), nullptr, s);
  });
  for (int64_t k = 0; k < kChunks; ++k)
    runtime::cuda::assemble_qkv_grad(act(dqkv_dev) + k * kChunk * kQkvRow, dq[k].data(),
                                     dkv[k].data(), chunk_rows, s);
  stream.synchronize();
  if constexpr (std::is_same_v<Element, float>) {
    out.dqkv = dqkv_dev.download();
  } else {
    out.dqkv = gpu_test::download_bf16(dqkv_dev);
  }
  return out;
}

// The host's whole-sequence flash on the values the device holds.
Result host_whole(const std::vector<float>& qkv, const std::vector<float>& dctx,
                  const Masking& masking) {
  const FlashAttentionDims d = whole_dims(masking.window);
  Result want{std::vector<float>(kT * kCtxRow), std::vector<float>(kBH * kT),
              std::vector<float>(qkv.size())};
  runtime::cpu::flash_attention_forward(want.ctx.data(), want.lse.data(), qkv.data(), d,
                                        masking.host_starts());
  runtime::cpu::flash_attention_backward(want.dqkv.data(), dctx.data(), qkv.data(), want.ctx.data(),
                                         want.lse.data(), d, masking.host_starts());
  return want;
}

template <class Element>
void expect_ring_matches_host(double tolerance, const Masking& masking) {
  std::vector<float> qkv = gpu_test::random_vector(kT * kQkvRow, 1, 2.f);
  std::vector<float> dctx = gpu_test::random_vector(kT * kCtxRow, 2);
  if constexpr (!std::is_same_v<Element, float>) {
    gpu_test::round_to_bf16_inplace(qkv);
    gpu_test::round_to_bf16_inplace(dctx);
  }
  const Result want = host_whole(qkv, dctx, masking);
  const Result got = run_ring<Element>(qkv, dctx, masking);
  EXPECT_CLOSE(got.ctx, want.ctx, tolerance) << "ctx";
  EXPECT_CLOSE(got.lse, want.lse, 1e-5) << "lse";
  EXPECT_CLOSE(got.dqkv, want.dqkv, tolerance) << "dqkv";
  const Result again = run_ring<Element>(qkv, dctx, masking);
  EXPECT_EQ(again.ctx, got.ctx) << "two runs differ";
  EXPECT_EQ(again.dqkv, got.dqkv) << "two runs differ";
}

// f32: the products' order differs from the host's (the op twins' 1e-5, with the merges' and
// the blocks' additions on top).
TEST_F(GpuFlashBlock, RingOfTwoRanksMatchesTheWholeSequenceF32) {
  expect_ring_matches_host<float>(2e-5, {});
}
TEST_F(GpuFlashBlock, RingWithASlidingWindowMatchesTheWholeSequenceF32) {
  expect_ring_matches_host<float>(2e-5, {.window = kWindow});
}
TEST_F(GpuFlashBlock, RingWithDocumentsMatchesTheWholeSequenceF32) {
  expect_ring_matches_host<float>(2e-5, {.document_starts = document_starts()});
}

// bf16: P and dS rounded before their products, as the op twins (2e-2), and the merged ctx
// rounded once more before the backward's Delta.
TEST_F(GpuFlashBlock, RingOfTwoRanksMatchesTheWholeSequenceBf16) {
  expect_ring_matches_host<uint16_t>(3e-2, {});
}
TEST_F(GpuFlashBlock, RingWithASlidingWindowMatchesTheWholeSequenceBf16) {
  expect_ring_matches_host<uint16_t>(3e-2, {.window = kWindow});
}
TEST_F(GpuFlashBlock, RingWithDocumentsInASlidingWindowMatchesTheWholeSequenceBf16) {
  expect_ring_matches_host<uint16_t>(3e-2,
                                     {.window = kWindow, .document_starts = document_starts()});
}

}  // namespace
