// What the op twins (tests/unit/ops) cannot see of the CUDA backend: a call with a wrong dtype,
// a host tensor or too few elements fails naming the op and the argument; AdamW's bf16 copy is
// exactly the rounding of the device's own updated master weights; destroying the context
// unregisters the backend. Every test skips without a device.
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/kernels/cpu/adamw.h"
#include "runtime/kernels/cuda/cuda_allocator.h"
#include "runtime/ops.h"
#include "runtime/tensor.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

namespace ops = runtime::ops;
using runtime::DType;
using runtime::Tensor;

class GpuOpChecks : public gpu_test::GpuBackendTest {
 protected:
  // A device tensor of `dtype` holding `values` (bf16: rounded to nearest even).
  Tensor device(const std::vector<float>& values, DType dtype) {
    const int64_t n = static_cast<int64_t>(values.size());
    Tensor host =
        Tensor::empty(host_allocator_, {n}, DType::f32, runtime::MemoryCategory::workspace);
    std::copy(values.begin(), values.end(), host.f32());
    if (dtype == DType::bf16) {
      Tensor narrow =
          Tensor::empty(host_allocator_, {n}, dtype, runtime::MemoryCategory::workspace);
      ops::convert(narrow, host);
      host = narrow;
    }
    Tensor t = Tensor::empty(device_allocator_, {n}, dtype, runtime::MemoryCategory::activation);
    ops::upload(t, host);
    return t;
  }
  std::vector<uint16_t> bf16_bits(const Tensor& t) {
    Tensor host =
        Tensor::empty(host_allocator_, t.shape(), DType::bf16, runtime::MemoryCategory::workspace);
    ops::download(host, t);
    return std::vector<uint16_t>(host.data<uint16_t>(), host.data<uint16_t>() + host.numel());
  }

  runtime::CpuAllocator host_allocator_;
  runtime::cuda::CudaAllocator device_allocator_;
};

// The message of the std::logic_error (failed TRAINER_ASSERT) `call` throws, or "".
std::string assert_message(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::logic_error& error) {
    return error.what();
  }
  return "";
}

TEST_F(GpuOpChecks, WrongDtypesAndDevicesFailNamingTheOp) {
  const int64_t n = 16;
  const Tensor x = device(gpu_test::random_vector(n, 91), DType::f32);
  const Tensor x16 = device(gpu_test::random_vector(n, 92), DType::bf16);
  std::string message =
      assert_message([&] { ops::gelu_forward({.out = x16, .input = x, .count = n, .kind = {}}); });
  EXPECT_NE(message.find("ops::gelu_forward"), std::string::npos) << message;
  EXPECT_NE(message.find("out=bf16 input=f32"), std::string::npos) << message;

  // layernorm statistics are f32 even under bf16 activations
  const Tensor stats16 = device(gpu_test::random_vector(2, 93), DType::bf16);
  message = assert_message([&] {
    ops::layernorm_forward({.out = x16,
                            .mean = stats16,
                            .rstd = stats16,
                            .input = x16,
                            .weight = x16,
                            .bias = x16,
                            .rows = 2,
                            .channels = 8,
                            .eps = 1e-5f});
  });
  EXPECT_NE(message.find("mean is bf16, must be f32"), std::string::npos) << message;

  Tensor host = Tensor::empty(host_allocator_, {n}, DType::f32, runtime::MemoryCategory::workspace);
  message = assert_message([&] { ops::add({.out = x, .a = host, .b = x, .count = n}); });
  EXPECT_NE(message.find("a is a host tensor"), std::string::npos) << message;
  message = assert_message([&] { ops::add({.out = x, .a = x, .b = x, .count = 2 * n}); });
  EXPECT_NE(message.find("has 16 elements, the call needs 32"), std::string::npos) << message;
  message = assert_message([&] { ops::copy(x16, x.view(0, {n / 2})); });
  EXPECT_NE(message.find("ops::copy"), std::string::npos) << message;
}

// bf16 mixed precision: AdamW over fp32 master weights writing the bf16 copy in the same pass
// equals AdamW then a convert, on the device's own numbers.
TEST_F(GpuOpChecks, AdamwBf16CopyIsTheRoundedMasterWeight) {
  const int64_t n = 4099;  // not a multiple of any block size
  const Tensor param = device(gpu_test::random_vector(n, 102), DType::f32);
  const Tensor exp_avg = device(std::vector<float>(static_cast<size_t>(n)), DType::f32);
  const Tensor exp_avg_sq = device(std::vector<float>(static_cast<size_t>(n)), DType::f32);
  const Tensor grad = device(gpu_test::random_vector(n, 103), DType::f32);
  const Tensor copy16 = device(std::vector<float>(static_cast<size_t>(n)), DType::bf16);
  runtime::cpu::AdamWParams hyper;
  hyper.lr = 1e-2f;
  hyper.weight_decay = 0.1f;
  ops::adamw_step({.param = param,
                   .exp_avg = exp_avg,
                   .exp_avg_sq = exp_avg_sq,
                   .param_copy = copy16,
                   .grad = grad,
                   .count = n,
                   .hyper = hyper});
  const Tensor rounded = device(std::vector<float>(static_cast<size_t>(n)), DType::bf16);
  ops::convert(rounded, param);
  EXPECT_EQ(bf16_bits(copy16), bf16_bits(rounded));
}

TEST_F(GpuOpChecks, DestroyingTheContextUnregistersTheBackend) {
  const Tensor x = device(gpu_test::random_vector(8, 95), DType::f32);
  context_.reset();
  EXPECT_THROW(ops::zero(x), runtime::LibraryError);
}

}  // namespace
