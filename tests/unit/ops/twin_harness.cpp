// Random host cases, their device twins and the comparison of twins (Note [Twin tolerance]).
// The host never touches device memory: twins go through ops::upload and ops::download only.
#include "tests/unit/ops/twin_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "runtime/kernels/cpu/convert.h"
#include "runtime/ops.h"

namespace op_twins {
namespace {

using runtime::DType;
using runtime::Shape;
using runtime::Tensor;
namespace ops = runtime::ops;

runtime::CpuAllocator& host_allocator() {
  static runtime::CpuAllocator allocator;
  return allocator;
}

Tensor host_empty(const Shape& shape, DType dtype) {
  return Tensor::empty(host_allocator(), shape, dtype, runtime::MemoryCategory::workspace);
}

float round_to(DType dtype, float value) {
  if (dtype != DType::bf16) return value;
  return runtime::cpu::bf16_to_float(runtime::cpu::float_to_bf16(value));
}

// A host copy of a device tensor (the tensor itself when it is on the host).
Tensor on_host(const Tensor& t) {
  if (t.device() == runtime::DeviceKind::cpu) return t;
  Tensor host = host_empty(t.shape(), t.dtype());
  ops::download(host, t);
  return host;
}

bool same_value(float expected, float actual) {
  return expected == actual || (std::isnan(expected) && std::isnan(actual));
}

// The guard pattern's bytes for one element of `dtype` (1216 is exact in bf16).
std::vector<uint8_t> guard_pattern(DType dtype) {
  std::vector<uint8_t> bytes(runtime::dtype_size(dtype));
  if (dtype == DType::f32) {
    const float value = 1216.f;
    std::memcpy(bytes.data(), &value, sizeof value);
  } else if (dtype == DType::bf16) {
    const uint16_t value = runtime::cpu::float_to_bf16(1216.f);
    std::memcpy(bytes.data(), &value, sizeof value);
  } else if (dtype == DType::i32) {
    const int32_t value = 0x5EADBEEF;
    std::memcpy(bytes.data(), &value, sizeof value);
  } else {
    std::fill(bytes.begin(), bytes.end(), uint8_t{0xA7});
  }
  return bytes;
}

// The elements of `storage` (host bytes of dtype `dtype`) in its two guards that are not the
// pattern.
int64_t damaged_guard_elements(const std::vector<uint8_t>& storage, DType dtype) {
  const std::vector<uint8_t> pattern = guard_pattern(dtype);
  const size_t size = pattern.size(), elements = storage.size() / size;
  int64_t damaged = 0;
  for (size_t i = 0; i < elements; ++i) {
    const bool guard = i < kGuardElements || i >= elements - kGuardElements;
    if (guard && std::memcmp(storage.data() + i * size, pattern.data(), size) != 0) ++damaged;
  }
  return damaged;
}

}  // namespace

// ---- Case ----

Case::Case(uint32_t seed, DType activation) : generator_(seed), activation_(activation) {}

int64_t Case::pick(std::initializer_list<int64_t> choices) {
  std::uniform_int_distribution<size_t> index(0, choices.size() - 1);
  return choices.begin()[index(generator_)];
}

float Case::uniform(float low, float high) {
  return std::uniform_real_distribution<float>(low, high)(generator_);
}

Tensor Case::make(const Shape& shape, DType dtype, int64_t offset, DType device_dtype) {
  const int64_t numel = runtime::shape_numel(shape) + offset;
  const Tensor storage = host_empty({kGuardElements + numel + kGuardElements}, dtype);
  const std::vector<uint8_t> pattern = guard_pattern(dtype);
  for (int64_t i = 0; i < storage.numel(); ++i)
    std::memcpy(storage.data<uint8_t>() + i * static_cast<int64_t>(pattern.size()), pattern.data(),
                pattern.size());
  const Tensor t = storage.view(kGuardElements + offset, shape);
  origins_[t.raw()] = Origin{storage, kGuardElements + offset, device_dtype};
  return t;
}

Tensor Case::act(const Shape& shape, float low, float high) {
  const Tensor t = make(shape, DType::f32, 0, activation_);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = round_to(activation_, uniform(low, high));
  return t;
}

Tensor Case::f32(const Shape& shape, float low, float high) {
  const Tensor t = make(shape, DType::f32, 0, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = uniform(low, high);
  return t;
}

Tensor Case::misaligned_act(const Shape& shape) {
  const Tensor t = make(shape, DType::f32, 1, activation_);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = round_to(activation_, uniform(-1.f, 1.f));
  return t;
}

Tensor Case::ids(const Shape& shape, int64_t low, int64_t high) {
  const Tensor t = make(shape, DType::i32, 0, DType::i32);
  std::uniform_int_distribution<int32_t> id(static_cast<int32_t>(low),
                                            static_cast<int32_t>(high - 1));
  for (int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = id(generator_);
  return t;
}

Tensor Case::mask(const Shape& shape) {
  const Tensor t = make(shape, DType::u8, 0, DType::u8);
  for (int64_t i = 0; i < t.numel(); ++i) t.u8()[i] = static_cast<uint8_t>(coin());
  return t;
}

Tensor Case::zeros(const Shape& shape, DType dtype) {
  const Tensor t = make(shape, dtype, 0, dtype);
  t.zero_();
  return t;
}

Tensor Case::causal(const Tensor& t, int64_t seq) {
  float* x = t.f32();
  for (int64_t index = 0; index < t.numel(); ++index) {
    if (index % seq > index / seq % seq) x[index] = 0.f;  // column j above row i
  }
  return t;
}

void Case::settle(const Tensor& t) {
  const DType device_dtype = origin(t).device_dtype;
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = round_to(device_dtype, t.f32()[i]);
}

const Case::Origin& Case::origin(const Tensor& t) const {
  const auto found = origins_.find(t.raw());
  TRAINER_ASSERT(found != origins_.end(), "a twin case was given a tensor it did not make");
  return found->second;
}

// ---- Mirror ----

Tensor Mirror::device_twin(const Tensor& host) {
  if (!host.defined()) return Tensor();
  const Case::Origin& origin = case_.origin(host);
  auto [found, added] = storages_.try_emplace(origin.storage.raw());
  if (added) {
    Tensor staging = origin.storage;
    if (origin.device_dtype != staging.dtype()) {  // f32 values already rounded to bf16
      staging = host_empty(staging.shape(), origin.device_dtype);
      ops::convert(staging, origin.storage);
    }
    found->second.host = origin.storage;
    found->second.device = Tensor::empty(device_.allocator(), staging.shape(), staging.dtype(),
                                         runtime::MemoryCategory::activation);
    ops::upload(found->second.device, staging);
  }
  return found->second.device.view(origin.offset, host.shape());
}

void Mirror::expect_match(const std::vector<Tensor>& hosts, const Tolerance& tolerance,
                          int causal_index, int64_t causal_seq) {
  const double relative = device_.exact()                     ? 0.0
                          : case_.activation() == DType::bf16 ? tolerance.bf16
                                                              : tolerance.f32;
  std::set<const void*> compared;  // aliases (in-place ops) once
  for (size_t field = 0; field < hosts.size(); ++field) {
    const Tensor& host = hosts[field];
    if (!host.defined() || !compared.insert(host.raw()).second) continue;
    const bool causal = !device_.exact() && static_cast<int>(field) == causal_index;
    expect_tensor_match(host, static_cast<int>(field), relative, causal ? causal_seq : 0,
                        tolerance.exact_zeros);
  }
  expect_guards_intact();
}

void Mirror::expect_guards_intact() {
  for (const auto& [first_byte, twins] : storages_) {
    const Tensor &host = twins.host, &device = twins.device;
    EXPECT_EQ(damaged_guard_elements(bytes(host), host.dtype()), 0)
        << "the host op wrote past a tensor (" << runtime::dtype_name(host.dtype())
        << " storage of " << host.numel() << " elements, guards of " << kGuardElements << ")";
    EXPECT_EQ(damaged_guard_elements(bytes(device), device.dtype()), 0)
        << "the device op wrote past a tensor (" << runtime::dtype_name(device.dtype())
        << " storage of " << device.numel() << " elements, guards of " << kGuardElements << ")";
  }
}

void Mirror::expect_tensor_match(const Tensor& host, int field, double relative, int64_t causal_seq,
                                 bool exact_zeros) {
  const Tensor device = device_twin(host);
  const std::string where = "argument tensor " + std::to_string(field) + " (" +
                            std::string(runtime::dtype_name(device.dtype())) + " " +
                            runtime::shape_string(host.shape()) + ")";
  if (device.dtype() == DType::i32 || device.dtype() == DType::u8) {
    EXPECT_EQ(bytes(device), bytes(host)) << where;
    return;
  }
  std::vector<float> expected = values(host);
  for (float& value : expected) value = round_to(device.dtype(), value);
  const std::vector<float> actual = values(device);
  float largest = 0.f;
  for (float value : expected)
    if (std::isfinite(value)) largest = std::max(largest, std::fabs(value));
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(expected.size()); ++i) {
    if (causal_seq > 0 && i % causal_seq > i / causal_seq % causal_seq) continue;
    const float e = expected[static_cast<size_t>(i)], a = actual[static_cast<size_t>(i)];
    if (same_value(e, a)) continue;
    const bool within =
        relative > 0 && (e != 0.f || !exact_zeros) && std::fabs(a - e) <= relative * largest;
    if (within) continue;
    if (mismatches++ == 0) first = i;
  }
  EXPECT_EQ(mismatches, 0) << where << ": first at element " << first << ", device "
                           << (first >= 0 ? actual[static_cast<size_t>(first)] : 0.f) << ", host "
                           << (first >= 0 ? expected[static_cast<size_t>(first)] : 0.f)
                           << ", allowed " << relative << " x max |host| " << largest;
}

// ---- reading tensors back ----

std::vector<uint8_t> bytes(const Tensor& t) {
  const Tensor host = on_host(t);
  const uint8_t* data = host.data<uint8_t>();
  return std::vector<uint8_t>(data, data + host.nbytes());
}

std::vector<float> values(const Tensor& t) {
  const Tensor host = on_host(t);
  std::vector<float> out(static_cast<size_t>(host.numel()));
  if (host.dtype() == DType::bf16) {
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = runtime::cpu::bf16_to_float(host.data<uint16_t>()[i]);
  } else {
    TRAINER_ASSERT(host.dtype() == DType::f32, "values() of a " << dtype_name(host.dtype()));
    std::copy(host.f32(), host.f32() + host.numel(), out.begin());
  }
  return out;
}

void expect_scalar_match(double device_value, double host_value, bool exact) {
  if (exact) {
    EXPECT_EQ(device_value, host_value);
  } else {
    EXPECT_NEAR(device_value, host_value, kScalarRelative * std::max(1.0, std::fabs(host_value)));
  }
}

void expect_same_bytes(const Tensor& first, const Tensor& second, int field) {
  EXPECT_TRUE(bytes(first) == bytes(second))
      << "argument tensor " << field << ": two device runs on identical inputs differ";
}

}  // namespace op_twins
