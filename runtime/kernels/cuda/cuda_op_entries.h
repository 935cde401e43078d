// The CUDA backend's entries, one per ops:: function (cuda_ops.cu, cuda_attention_ops.cu,
// cuda_llama_ops.cu), and what they share: the registered context, the argument checks and
// typed pointers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "runtime/kernels/cuda/cuda_ops.h"
#include "runtime/op_args.h"
#include "runtime/ops.h"
#include "runtime/tensor.h"

namespace runtime::cuda::device_op {

// Note [CUDA op dtypes]
// In one call, activations and weights share one type, f32 or bf16 (the "activation type",
// set by the first such tensor the op lists). Parameter gradients are f32 whatever that type
// is (linear dweight/dbias, layernorm dweight/dbias, RMSNorm dweight, dwte, dwpe: they
// accumulate over micro-batches); so are layernorm mean/rstd, RMSNorm rstd and every
// cross-entropy loss, lse and per-row statistic. Dropout masks are u8, token ids and targets i32. A
// call breaking these rules, or passing a host tensor or one smaller than its shape arguments say,
// fails TRAINER_ASSERT with the operator, every argument's dtype and the first problem.

// The registered context (register_cuda_backend); asserts that there is one.
CudaContext& context();

// ---- argument checks ----

enum class Role { act, f32, i32, u8 };  // act: the call's activation type

struct Arg {
  const char* name;
  const Tensor* tensor;
  Role role;
  int64_t min_numel;  // elements the kernel touches, from the shape arguments
  bool optional;      // may be undefined (the kernel then skips it)
};

inline Arg arg(const char* name, const Tensor& tensor, Role role, int64_t min_numel) {
  return Arg{name, &tensor, role, min_numel, false};
}
inline Arg optional_arg(const char* name, const Tensor& tensor, Role role, int64_t min_numel) {
  return Arg{name, &tensor, role, min_numel, true};
}

constexpr Role kAct = Role::act;
constexpr Role kF32 = Role::f32;
constexpr Role kI32 = Role::i32;
constexpr Role kU8 = Role::u8;

// A call's document starts (Note [Document masking], Note [Document positions]): undefined for
// one document, else i32 with one per row and sample, as the host ops take them.
inline Arg document_arg(const Tensor& document_starts, int64_t rows, int64_t micro_batch) {
  return optional_arg("document_starts", document_starts, kI32, rows * micro_batch);
}

// Checks every argument of ops::`op` (Note [CUDA op dtypes]); returns the activation type.
DType check_args(const char* op, std::initializer_list<Arg> args);

// ---- typed pointers ----

// The tensor's data as T*, or null when it is undefined.
template <class T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw()) : nullptr;
}

// act_ptr(t): tensor t's data as the call's activation type T (float or __nv_bfloat16).
template <class T>
struct ActPtr {
  T* operator()(const Tensor& t) const { return ptr<T>(t); }
};

// Calls f(act_ptr, stream): act_ptr an ActPtr<float> or ActPtr<__nv_bfloat16> for the
// activation type, stream the registered context's.
template <class F>
void with_act(DType act, F&& f) {
  if (act == DType::bf16) {
    f(ActPtr<__nv_bfloat16>{}, context().stream());
  } else {
    f(ActPtr<float>{}, context().stream());
  }
}

// ---- the entries ----

#define TRAINER_CUDA_ENTRY(result, name, Args, on) result name(const ops::Args& args);
#define TRAINER_CUDA_MEMORY_ENTRY(result, name, params) result name params;
TRAINER_OPS(TRAINER_CUDA_ENTRY, TRAINER_CUDA_MEMORY_ENTRY)
#undef TRAINER_CUDA_ENTRY
#undef TRAINER_CUDA_MEMORY_ENTRY

}  // namespace runtime::cuda::device_op
