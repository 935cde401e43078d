// Twin rows of the memory operators (Note [Op list]): their arguments are bare tensors, so each
// row spells out its steps on both sides. Uploads and downloads can only be observed through
// each other: their rows check the round trip, one starting from each side.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "runtime/ops.h"
#include "tests/unit/ops/twin_row.h"

namespace op_twins {
namespace {

namespace ops = runtime::ops;

int64_t random_count(Case& c) {
  return c.long_size() * c.small_size();
}

// A random tensor of one of the dtypes a device holds: the activation dtype, i32 or u8.
Tensor any_dtype(Case& c, int64_t count) {
  switch (c.pick({0, 1, 2})) {
    case 0:
      return c.act({count}, -30.f, 30.f);
    case 1:
      return c.ids({count}, -1000, 1000);
    default:
      return c.mask({count});
  }
}

Row convert_row() {
  return {"convert", [](TwinDevice& device, uint32_t seed, DType activation) {
            Case c(seed, activation);
            const int64_t count = random_count(c);
            // f32 -> activation dtype -> f32, each side with its own kernels (bf16 on both
            // sides, so the host rounds for itself).
            const Tensor wide = c.f32({count}, -30.f, 30.f), back = c.zeros({count}, DType::f32);
            const Tensor narrow = c.zeros({count}, activation);
            // Ties to even (1 + 2^-8 rounds down, 1 + 3 * 2^-8 up), a signed zero and an
            // overflow to infinity, as far as the count goes.
            const float specials[] = {1.00390625f, 1.01171875f, -0.f, 3.4e38f};
            for (int64_t i = 0; i < std::min<int64_t>(count, 4); ++i) wide.f32()[i] = specials[i];
            Mirror twins(c, device);
            const Tensor wide_twin = twins.device_twin(wide), back_twin = twins.device_twin(back),
                         narrow_twin = twins.device_twin(narrow);
            ops::convert(narrow, wide);
            ops::convert(back, narrow);
            ops::convert(narrow_twin, wide_twin);
            ops::convert(back_twin, narrow_twin);
            twins.expect_match({wide, narrow, back}, kExact);
          }};
}

// A host tensor of `t`'s device dtype holding its values, the form ops::upload takes.
Tensor device_dtype_copy(Case& c, const Tensor& t) {
  const Tensor copy = c.zeros(t.shape(), c.origin(t).device_dtype);
  ops::convert(copy, t);  // f32 -> bf16 of rounded values: exact; same dtype: a copy
  return copy;
}

Row copy_row() {
  return {"copy", [](TwinDevice& device, uint32_t seed, DType activation) {
            Case c(seed, activation);
            const Tensor src = device_dtype_copy(c, any_dtype(c, random_count(c)));
            const Tensor dst = c.zeros(src.shape(), src.dtype());
            Mirror twins(c, device);
            const Tensor src_twin = twins.device_twin(src), dst_twin = twins.device_twin(dst);
            ops::copy(dst, src);
            ops::copy(dst_twin, src_twin);
            twins.expect_match({src, dst}, kExact);
          }};
}

Row upload_row() {
  return {"upload", [](TwinDevice& device, uint32_t seed, DType activation) {
            Case c(seed, activation);
            const int64_t count = random_count(c);
            Tensor source = any_dtype(c, count);
            if (source.dtype() == DType::f32) source = device_dtype_copy(c, source);
            Tensor target = Tensor::empty(device.allocator(), source.shape(), source.dtype(),
                                          runtime::MemoryCategory::activation);
            ops::upload(target, source);
            EXPECT_EQ(bytes(target), bytes(source));
          }};
}

Row download_row() {
  return {"download", [](TwinDevice& device, uint32_t seed, DType activation) {
            Case c(seed, activation);
            const int64_t count = random_count(c);
            const Tensor source = any_dtype(c, count);
            Mirror twins(c, device);
            const Tensor twin = twins.device_twin(source);
            const Tensor from_device = c.zeros(source.shape(), twin.dtype());
            ops::download(from_device, twin);
            EXPECT_EQ(bytes(from_device), bytes(device_dtype_copy(c, source)));
          }};
}

Row zero_row() {
  return {"zero", [](TwinDevice& device, uint32_t seed, DType activation) {
            Case c(seed, activation);
            const Tensor t = any_dtype(c, random_count(c));
            Mirror twins(c, device);
            const Tensor twin = twins.device_twin(t);
            ops::zero(t);
            ops::zero(twin);
            twins.expect_match({t}, kExact);
          }};
}

Row sum_row() {
  return {"sum", [](TwinDevice& device, uint32_t seed, DType activation) {
            Case c(seed, activation);
            const Tensor t = c.act({c.pick({1, 33, 4099, 65537, 300007})});  // past 2^16: chunks
            Mirror twins(c, device);
            const Tensor twin = twins.device_twin(t);
            const double device_sum = ops::sum(twin);
            expect_scalar_match(device_sum, ops::sum(t), device.exact());
            EXPECT_EQ(ops::sum(twin), device_sum) << "two device sums differ";
          }};
}

// synchronize has no output: the row queues a device op, waits, and reads the result back.
Row synchronize_row() {
  return {"synchronize", [](TwinDevice& device, uint32_t seed, DType activation) {
            Case c(seed, activation);
            const int64_t count = random_count(c);
            const Tensor t = c.act({count});
            Mirror twins(c, device);
            const Tensor twin = twins.device_twin(t);
            const float scale = c.uniform(-2.f, 2.f);
            for (const Tensor& x : {t, twin}) {
              ops::scale_inplace({.x = x, .count = count, .scale = scale});
              ops::synchronize(x);
            }
            twins.expect_match({t}, kExact);
          }};
}

}  // namespace

std::vector<Row> memory_rows() {
  return {convert_row(),  synchronize_row(), copy_row(), upload_row(),
          download_row(), zero_row(),        sum_row()};
}

}  // namespace op_twins
