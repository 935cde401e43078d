// The twin harness of runtime/ops.h: every operator of TRAINER_OPS (Note [Op list]) has one row
// that builds random host inputs of random (odd) shapes, runs the op on host tensors and on
// device tensors, and compares every tensor the op was given. One source set, one binary per
// device: the emulated device (exact) and CUDA (per-op tolerances, skipped without a GPU).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/tensor.h"

namespace op_twins {

// The device a twin binary runs on; its backend is registered while it lives.
class TwinDevice {
 public:
  virtual ~TwinDevice() = default;
  virtual runtime::Allocator& allocator() = 0;
  // True when the device runs the host kernels (the emulated device): every result must then
  // equal the host's, rounded to the device tensor's dtype, bit for bit.
  virtual bool exact() const = 0;
};

// Defined once per binary: its device, or null when this machine has none (the twins skip).
std::unique_ptr<TwinDevice> make_twin_device();

// Note [Twin tolerance]
// On a device that is not exact, a float output may differ from the host's (rounded to the
// device dtype) by `f32` or `bf16` (by the case's activation dtype) times the largest |host
// value| of that tensor; 0 means equal. Everywhere the host result is exactly 0 (the causal
// mask, vocabulary padding, dropped elements, ids outside a shard) the device's must be 0 too.
// Scalar results (sums) agree to kScalarRelative. Token ids and masks are always equal.
// A row whose zeros are not structural (a GELU that saturates to 0 on the host, computed by
// another tanh on the device: cuBLASLt's epilogues) clears exact_zeros: its zeros take the same
// tolerance as every other value.
struct Tolerance {
  double f32 = 0;
  double bf16 = 0;
  bool exact_zeros = true;
};
inline constexpr double kScalarRelative = 1e-10;

// One random case: host tensors, each with the dtype it gets on the device. Activation tensors
// take the case's activation dtype there (f32 or bf16; the host holds their values rounded to
// it, so both sides start from identical values); the rest keep theirs. Each tensor's storage
// has kGuardElements more before it and after it, holding a pattern (guard_pattern) that no op
// may change: expect_match checks every storage's guards on both sides, so a kernel that writes
// past either end of any tensor it is given fails its row.
inline constexpr int64_t kGuardElements = 16;  // a multiple of 16 bytes: alignment is kept
class Case {
 public:
  Case(uint32_t seed, runtime::DType activation);

  runtime::DType activation() const { return activation_; }
  // One of `choices`, uniformly.
  int64_t pick(std::initializer_list<int64_t> choices);
  // A dimension: 1, 3, 7, 33 or 129. small_size(): 1, 3 or 7, for one of three dimensions that
  // multiply. long_size(): 1, 33, 129, 1031 or 4099, past a block of 1024 threads, for the one
  // dimension a kernel reduces over or loops along.
  int64_t size() { return pick({1, 3, 7, 33, 129}); }
  int64_t small_size() { return pick({1, 3, 7}); }
  int64_t long_size() { return pick({1, 33, 129, 1031, 4099}); }
  float uniform(float low, float high);
  bool coin() { return pick({0, 1}) == 1; }

  // Values uniform in [low, high).
  runtime::Tensor act(const runtime::Shape& shape, float low = -1.f, float high = 1.f);
  runtime::Tensor f32(const runtime::Shape& shape, float low = -1.f, float high = 1.f);
  // An activation view one element into its storage (not 16-byte aligned on the device).
  runtime::Tensor misaligned_act(const runtime::Shape& shape);
  // i32 ids uniform in [low, high).
  runtime::Tensor ids(const runtime::Shape& shape, int64_t low, int64_t high);
  // u8 dropout mask, each element 0 or 1.
  runtime::Tensor mask(const runtime::Shape& shape);
  // Zeros of `dtype` on both sides (no rounding between them).
  runtime::Tensor zeros(const runtime::Shape& shape, runtime::DType dtype);
  // Sets the entries above the diagonal of each (seq, seq) matrix of `t` to 0; returns t.
  runtime::Tensor causal(const runtime::Tensor& t, int64_t seq);
  // Rounds an activation tensor that host ops filled to what its device twin will hold.
  void settle(const runtime::Tensor& t);

  // What a mirror needs of a tensor this case made: its whole storage (guards included), its
  // element offset in it, and its device dtype.
  struct Origin {
    runtime::Tensor storage;
    int64_t offset = 0;
    runtime::DType device_dtype = runtime::DType::f32;
  };
  const Origin& origin(const runtime::Tensor& t) const;

 private:
  runtime::Tensor make(const runtime::Shape& shape, runtime::DType dtype, int64_t offset,
                       runtime::DType device_dtype);

  std::mt19937 generator_;
  runtime::DType activation_;
  std::map<const void*, Origin> origins_;  // by the tensor's first byte
};

// The device twins of a case's host tensors: one device storage per host storage, so views
// and aliases (in-place ops) keep their relation.
class Mirror {
 public:
  Mirror(const Case& c, TwinDevice& device) : case_(c), device_(device) {}
  // A device tensor holding what `host` holds now (undefined stays undefined).
  runtime::Tensor device_twin(const runtime::Tensor& host);
  // EXPECTs that the device twin of every tensor in `hosts` matches its host tensor (Note [Twin
  // tolerance]); `causal_seq` > 0 compares hosts[causal_index] on and below the diagonal only.
  void expect_match(const std::vector<runtime::Tensor>& hosts, const Tolerance& tolerance,
                    int causal_index = -1, int64_t causal_seq = 0);

 private:
  void expect_tensor_match(const runtime::Tensor& host, int field, double tolerance,
                           int64_t causal_seq, bool exact_zeros);
  // EXPECTs that the guards of every storage the mirror holds, and of its host twin, still
  // hold the pattern.
  void expect_guards_intact();

  const Case& case_;
  TwinDevice& device_;
  struct Storages {
    runtime::Tensor host;
    runtime::Tensor device;
  };
  std::map<const void*, Storages> storages_;  // by the host storage's first byte
};

// The bytes of a host or device tensor (through ops::download for a device tensor).
std::vector<uint8_t> bytes(const runtime::Tensor& t);
// The values of an f32 or bf16 host or device tensor, as floats.
std::vector<float> values(const runtime::Tensor& t);
// EXPECTs device_value == host_value within kScalarRelative (exactly on an exact device).
void expect_scalar_match(double device_value, double host_value, bool exact);
// EXPECTs that two device tensors, twins of one host tensor put through the same op, hold the
// same bytes: device ops are deterministic.
void expect_same_bytes(const runtime::Tensor& first, const runtime::Tensor& second, int field);

// One row per operator: runs one random case of it (seed, activation dtype) on both backends
// and EXPECTs the twins to match.
struct Row {
  std::string op;
  std::function<void(TwinDevice&, uint32_t seed, runtime::DType activation)> run_case;
};
// Every row.
const std::vector<Row>& rows();

}  // namespace op_twins
