// cuBLASLt GEMMs against the CPU twin (runtime/kernels/cpu/gemm.h): every transpose
// combination, f32 (TF32 off: 1e-5 of max |C|) and bf16 inputs rounded identically on
// the host (1e-2); linear forward epilogues, linear backward, the input gradient through a
// GELU (the DGELU_BGRAD epilogue), strided batches.
#include <cstdint>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/kernels/cpu/gelu.h"
#include "runtime/kernels/cpu/gemm.h"
#include "runtime/kernels/cuda/gemm.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

using runtime::DType;
using runtime::cuda::Epilogue;

// A host matrix on the device in f32 or bf16. For bf16 the host values are rounded
// in place first, so the CPU reference computes with exactly what the device sees.
class DeviceMatrix {
 public:
  DeviceMatrix(std::vector<float>& host, DType dtype) : dtype_(dtype) {
    if (dtype == DType::bf16) {
      gpu_test::round_to_bf16_inplace(host);
      bf16_ = gpu_test::upload_bf16(host);
    } else {
      f32_ = gpu_test::DeviceBuffer<float>(host);
    }
  }
  void* data() { return dtype_ == DType::bf16 ? static_cast<void*>(bf16_.data()) : f32_.data(); }
  std::vector<float> download() const {
    return dtype_ == DType::bf16 ? gpu_test::download_bf16(bf16_) : f32_.download();
  }

 private:
  DType dtype_;
  gpu_test::DeviceBuffer<float> f32_;
  gpu_test::DeviceBuffer<uint16_t> bf16_;
};

double tolerance_for(DType ab_type, DType c_type) {
  return (ab_type == DType::f32 && c_type == DType::f32) ? 1e-5 : 1e-2;
}

struct GemmCase {
  DType ab_type;
  DType c_type;
  int64_t M, N, K;
  int64_t padding;  // extra elements per row beyond the minimal leading dim
};

class LtGemmTest : public gpu_test::GpuTest {};

// C = 0.7 op(A) op(B) + 0.3 C in all four transpose combinations.
void check_all_transposes(const GemmCase& test_case) {
  runtime::cuda::LtGemm lt;
  const int64_t M = test_case.M, N = test_case.N, K = test_case.K;
  uint32_t seed = 100;
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      SCOPED_TRACE(testing::Message() << "trans_a=" << trans_a << " trans_b=" << trans_b << " A/B "
                                      << runtime::dtype_name(test_case.ab_type) << " C "
                                      << runtime::dtype_name(test_case.c_type));
      const int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
      const int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
      const int64_t lda = a_cols + test_case.padding, ldb = b_cols + test_case.padding;
      const int64_t ldc = N + test_case.padding;
      std::vector<float> a = gpu_test::random_vector(static_cast<size_t>(a_rows * lda), ++seed);
      std::vector<float> b = gpu_test::random_vector(static_cast<size_t>(b_rows * ldb), ++seed);
      std::vector<float> c = gpu_test::random_vector(static_cast<size_t>(M * ldc), ++seed);
      DeviceMatrix device_a(a, test_case.ab_type);
      DeviceMatrix device_b(b, test_case.ab_type);
      DeviceMatrix device_c(c, test_case.c_type);
      runtime::cpu::sgemm(trans_a, trans_b, M, N, K, 0.7f, a.data(), lda, b.data(), ldb, 0.3f,
                          c.data(), ldc);
      lt.gemm(trans_a, trans_b, M, N, K, 0.7f, device_a.data(), lda, device_b.data(), ldb, 0.3f,
              device_c.data(), ldc, test_case.ab_type, test_case.c_type, nullptr);
      EXPECT_CLOSE(device_c.download(), c, tolerance_for(test_case.ab_type, test_case.c_type));
    }
  }
}

TEST_F(LtGemmTest, F32AllTransposesMatchCpuSgemm) {
  check_all_transposes({DType::f32, DType::f32, 37, 29, 19, 0});
  check_all_transposes({DType::f32, DType::f32, 64, 48, 80, 5});
}

TEST_F(LtGemmTest, Bf16AllTransposesMatchCpuSgemmWithF32Output) {
  check_all_transposes({DType::bf16, DType::f32, 48, 40, 56, 0});
  check_all_transposes({DType::bf16, DType::f32, 64, 32, 72, 8});
}

TEST_F(LtGemmTest, Bf16AllTransposesMatchCpuSgemmWithBf16Output) {
  check_all_transposes({DType::bf16, DType::bf16, 48, 40, 56, 0});
  check_all_transposes({DType::bf16, DType::bf16, 64, 32, 72, 8});
}

TEST_F(LtGemmTest, AlgorithmIsCachedPerProblem) {
  runtime::cuda::LtGemm lt;
  std::vector<float> a = gpu_test::random_vector(32 * 32, 1);
  std::vector<float> c(32 * 32, 0.0f);
  DeviceMatrix device_a(a, DType::f32);
  DeviceMatrix device_c(c, DType::f32);
  lt.gemm(false, false, 32, 32, 32, 1.0f, device_a.data(), 32, device_a.data(), 32, 0.0f,
          device_c.data(), 32, DType::f32, DType::f32, nullptr);
  EXPECT_EQ(lt.cached_algorithm_count(), 1);
  lt.gemm(false, false, 32, 32, 32, 1.0f, device_a.data(), 32, device_a.data(), 32, 0.0f,
          device_c.data(), 32, DType::f32, DType::f32, nullptr);
  EXPECT_EQ(lt.cached_algorithm_count(), 1);
  lt.gemm(false, true, 32, 32, 32, 1.0f, device_a.data(), 32, device_a.data(), 32, 0.0f,
          device_c.data(), 32, DType::f32, DType::f32, nullptr);
  EXPECT_EQ(lt.cached_algorithm_count(), 2);
  std::vector<float> expected(32 * 32, 0.0f);
  runtime::cpu::sgemm(false, true, 32, 32, 32, 1.0f, a.data(), 32, a.data(), 32, 0.0f,
                      expected.data(), 32);
  EXPECT_CLOSE(device_c.download(), expected, 1e-5);
}

void check_linear_forward(DType dtype, Epilogue epilogue) {
  SCOPED_TRACE(testing::Message() << runtime::dtype_name(dtype) << " epilogue "
                                  << static_cast<int>(epilogue));
  const int64_t rows = 24, in_features = 40, out_features = 56;
  std::vector<float> inp = gpu_test::random_vector(rows * in_features, 21, 2.0f);
  std::vector<float> weight = gpu_test::random_vector(out_features * in_features, 22, 0.5f);
  std::vector<float> bias = gpu_test::random_vector(out_features, 23);
  std::vector<float> out(rows * out_features, 0.0f);
  std::vector<float> aux(rows * out_features, 0.0f);
  DeviceMatrix device_inp(inp, dtype), device_weight(weight, dtype), device_bias(bias, dtype);
  DeviceMatrix device_out(out, dtype), device_aux(aux, dtype);

  runtime::cuda::LtGemm lt;
  ASSERT_TRUE(lt.linear_forward(
      device_out.data(), device_inp.data(), device_weight.data(),
      epilogue == Epilogue::none ? nullptr : device_bias.data(), rows, in_features, out_features,
      dtype, epilogue, epilogue == Epilogue::bias_gelu_aux ? device_aux.data() : nullptr, nullptr))
      << "cuBLASLt has no algorithm for this epilogue (the ops fall back to unfused kernels)";

  std::vector<float> pre_activation(rows * out_features, 0.0f);
  runtime::cpu::linear_forward(pre_activation.data(), inp.data(), weight.data(),
                               epilogue == Epilogue::none ? nullptr : bias.data(), rows,
                               in_features, out_features);
  const double tolerance = dtype == DType::f32 ? 1e-5 : 1e-2;
  if (epilogue == Epilogue::bias_gelu_aux) {
    std::vector<float> expected(pre_activation.size(), 0.0f);
    runtime::cpu::gelu_forward(expected.data(), pre_activation.data(),
                               static_cast<int64_t>(expected.size()), runtime::cpu::GeluKind::tanh);
    // cuBLASLt's tanh may be a hardware approximation: 1e-3 in f32.
    EXPECT_CLOSE(device_out.download(), expected, dtype == DType::f32 ? 1e-3 : 1e-2);
    EXPECT_CLOSE(device_aux.download(), pre_activation, tolerance);
  } else {
    EXPECT_CLOSE(device_out.download(), pre_activation, tolerance);
  }
}

TEST_F(LtGemmTest, LinearForwardMatchesCpuForEveryEpilogue) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    for (Epilogue epilogue : {Epilogue::none, Epilogue::bias, Epilogue::bias_gelu_aux}) {
      check_linear_forward(dtype, epilogue);
    }
  }
}

void check_linear_backward(DType dtype, int64_t rows, bool with_dinp, bool with_dbias) {
  SCOPED_TRACE(testing::Message() << runtime::dtype_name(dtype) << " rows " << rows << " dinp "
                                  << with_dinp << " dbias " << with_dbias);
  const int64_t in_features = 48, out_features = 40;
  std::vector<float> dout = gpu_test::random_vector(rows * out_features, 31);
  std::vector<float> inp = gpu_test::random_vector(rows * in_features, 32);
  std::vector<float> weight = gpu_test::random_vector(out_features * in_features, 33);
  std::vector<float> dinp = gpu_test::random_vector(rows * in_features, 34);  // overwritten (=)
  std::vector<float> dweight =
      gpu_test::random_vector(out_features * in_features, 35);           // += target
  std::vector<float> dbias = gpu_test::random_vector(out_features, 36);  // += target
  DeviceMatrix device_dout(dout, dtype), device_inp(inp, dtype), device_weight(weight, dtype);
  DeviceMatrix device_dinp(dinp, dtype);
  DeviceMatrix device_dweight(dweight, DType::f32), device_dbias(dbias, DType::f32);

  runtime::cuda::LtGemm lt;
  lt.linear_backward(
      with_dinp ? device_dinp.data() : nullptr, static_cast<float*>(device_dweight.data()),
      with_dbias ? static_cast<float*>(device_dbias.data()) : nullptr, device_dout.data(),
      device_inp.data(), device_weight.data(), rows, in_features, out_features, dtype, nullptr);
  const std::vector<float> dinp_before = dinp;
  const std::vector<float> dbias_before = dbias;
  runtime::cpu::linear_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                                weight.data(), rows, in_features, out_features);
  // bf16 products are exact in fp32, so the fp32 accumulators stay tight.
  const double accumulate_tolerance = dtype == DType::f32 ? 1e-5 : 1e-4;
  EXPECT_CLOSE(device_dweight.download(), dweight, accumulate_tolerance);
  EXPECT_CLOSE(device_dinp.download(), with_dinp ? dinp : dinp_before,
               dtype == DType::f32 ? 1e-5 : 1e-2);
  EXPECT_CLOSE(device_dbias.download(), with_dbias ? dbias : dbias_before, accumulate_tolerance);
}

TEST_F(LtGemmTest, LinearBackwardMatchesCpuTwin) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    check_linear_backward(dtype, 24, true, true);
    check_linear_backward(dtype, 333, true, true);  // many rows per column-sum thread
    check_linear_backward(dtype, 24, false, false);
  }
}

// dinp = (dout W) * gelu'(pre_activation) and pre_bias += column sums of dinp, in one product,
// against the CPU: sgemm, gelu_backward and bias_gradient (ops::gelu_linear_backward's twin).
void check_input_gradient_through_gelu(DType dtype, int64_t rows) {
  SCOPED_TRACE(testing::Message() << runtime::dtype_name(dtype) << " rows " << rows);
  const int64_t in_features = 56, out_features = 40;  // in_features: the aux ld, a multiple of 8
  std::vector<float> dout = gpu_test::random_vector(rows * out_features, 51);
  std::vector<float> weight = gpu_test::random_vector(out_features * in_features, 52, 0.5f);
  std::vector<float> pre_activation = gpu_test::random_vector(rows * in_features, 53, 3.0f);
  std::vector<float> dinp = gpu_test::random_vector(rows * in_features, 54);  // overwritten (=)
  std::vector<float> pre_bias = gpu_test::random_vector(in_features, 55);     // += target
  DeviceMatrix device_dout(dout, dtype), device_weight(weight, dtype);
  DeviceMatrix device_pre(pre_activation, dtype), device_dinp(dinp, dtype);
  DeviceMatrix device_pre_bias(pre_bias, DType::f32);
  gpu_test::DeviceBuffer<float> scratch(std::vector<float>(in_features, 0.0f));

  runtime::cuda::LtGemm lt;
  ASSERT_TRUE(lt.input_gradient_through_gelu(
      device_dinp.data(), static_cast<float*>(device_pre_bias.data()), device_dout.data(),
      device_weight.data(), device_pre.data(), rows, in_features, out_features, dtype, nullptr,
      scratch.data()))
      << "cuBLASLt has no DGELU_BGRAD algorithm with an f32 bias gradient here (the op falls "
         "back to the unfused kernels)";
  runtime::cpu::sgemm(false, false, rows, in_features, out_features, 1.0f, dout.data(),
                      out_features, weight.data(), in_features, 0.0f, dinp.data(), in_features);
  runtime::cpu::gelu_backward(dinp.data(), dinp.data(), pre_activation.data(), rows * in_features,
                              runtime::cpu::GeluKind::tanh);
  runtime::cpu::bias_gradient(pre_bias.data(), dinp.data(), rows, in_features);
  // cuBLASLt's tanh may be a hardware approximation: 1e-3 in f32 (as for GELU_AUX_BIAS); bf16
  // rounds D (and perhaps what the bias gradient sums): 1e-2.
  const double tolerance = dtype == DType::f32 ? 1e-3 : 1e-2;
  EXPECT_CLOSE(device_dinp.download(), dinp, tolerance);
  EXPECT_CLOSE(device_pre_bias.download(), pre_bias, tolerance);
}

TEST_F(LtGemmTest, InputGradientThroughGeluMatchesCpuTwin) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    check_input_gradient_through_gelu(dtype, 24);
    check_input_gradient_through_gelu(dtype, 333);
  }
}

void check_strided_batched(DType ab_type, DType c_type, bool trans_b) {
  SCOPED_TRACE(testing::Message() << "A/B " << runtime::dtype_name(ab_type) << " C "
                                  << runtime::dtype_name(c_type) << " trans_b " << trans_b);
  const int64_t batch = 6, M = 32, N = 24, K = 16;
  const int64_t lda = K, ldb = trans_b ? K : N, ldc = N;
  const int64_t stride_a = M * lda + 8, stride_b = (trans_b ? N : K) * ldb + 16,
                stride_c = M * ldc + 8;
  std::vector<float> a = gpu_test::random_vector(batch * stride_a, 41);
  std::vector<float> b = gpu_test::random_vector(batch * stride_b, 42);
  std::vector<float> c = gpu_test::random_vector(batch * stride_c, 43);
  DeviceMatrix device_a(a, ab_type), device_b(b, ab_type), device_c(c, c_type);

  runtime::cuda::LtGemm lt;
  lt.strided_batched_gemm(false, trans_b, M, N, K, 0.5f, device_a.data(), lda, stride_a,
                          device_b.data(), ldb, stride_b, 0.0f, device_c.data(), ldc, stride_c,
                          batch, ab_type, c_type, nullptr);
  for (int64_t i = 0; i < batch; ++i) {
    runtime::cpu::sgemm(false, trans_b, M, N, K, 0.5f, a.data() + i * stride_a, lda,
                        b.data() + i * stride_b, ldb, 0.0f, c.data() + i * stride_c, ldc);
  }
  // The gaps between batches keep their initial values on both sides.
  EXPECT_CLOSE(device_c.download(), c, tolerance_for(ab_type, c_type));
}

TEST_F(LtGemmTest, StridedBatchedMatchesCpuLoop) {
  for (bool trans_b : {false, true}) {
    check_strided_batched(DType::f32, DType::f32, trans_b);
    check_strided_batched(DType::bf16, DType::f32, trans_b);
    check_strided_batched(DType::bf16, DType::bf16, trans_b);
  }
}

}  // namespace
