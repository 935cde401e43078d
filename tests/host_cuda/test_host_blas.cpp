// The host cuBLASLt / cuBLAS (blas_lt.cpp, blas.cpp) against references written from the
// documented formulas in double: every transpose pair, f32 and bf16, batches, each epilogue,
// and the statuses of what the host refuses. Inputs are multiples of 1/8, so every product and
// sum is exact and non-GELU results must match bit for bit.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/kernels/cpu/convert.h"

namespace {

using runtime::cpu::bf16_to_float;
using runtime::cpu::float_to_bf16;

// f32 or bf16 elements with float access; bf16 stores round to nearest even.
class Buffer {
 public:
  Buffer() = default;
  Buffer(cudaDataType_t type, int64_t size) : type_(type) {
    if (type == CUDA_R_32F) f32_.assign(static_cast<size_t>(size), 0.0f);
    if (type == CUDA_R_16BF) bf16_.assign(static_cast<size_t>(size), 0);
  }
  float get(int64_t i) const {
    return type_ == CUDA_R_32F ? f32_[static_cast<size_t>(i)]
                               : bf16_to_float(bf16_[static_cast<size_t>(i)]);
  }
  void set(int64_t i, float value) {
    if (type_ == CUDA_R_32F) {
      f32_[static_cast<size_t>(i)] = value;
    } else {
      bf16_[static_cast<size_t>(i)] = float_to_bf16(value);
    }
  }
  void* data() { return type_ == CUDA_R_32F ? static_cast<void*>(f32_.data()) : bf16_.data(); }
  int64_t size() const {
    return static_cast<int64_t>(type_ == CUDA_R_32F ? f32_.size() : bf16_.size());
  }
  cudaDataType_t type() const { return type_; }

 private:
  cudaDataType_t type_ = CUDA_R_32F;
  std::vector<float> f32_;
  std::vector<uint16_t> bf16_;
};

// Multiples of 1/8 in [-1, 1]: exact in bf16; products and short sums of them exact in f32.
void fill_eighths(Buffer& buffer, std::mt19937& rng) {
  std::uniform_int_distribution<int> eighths(-8, 8);
  for (int64_t i = 0; i < buffer.size(); ++i) buffer.set(i, eighths(rng) / 8.0f);
}

// What D holds after rounding the exact value to its type.
float rounded(double exact, cudaDataType_t type) {
  const auto value = static_cast<float>(exact);
  return type == CUDA_R_32F ? value : bf16_to_float(float_to_bf16(value));
}

// A stored column-major matrix: element (r, c) of batch b at b * stride + r + c * ld.
struct Stored {
  int64_t rows = 0, cols = 0, ld = 0, stride = 0;
  int64_t index(int64_t batch, int64_t r, int64_t c) const { return batch * stride + r + c * ld; }
};

// ld two more than the rows, three elements between batches: neither is ever implied.
Stored padded(int64_t rows, int64_t cols) {
  return {rows, cols, rows + 2, (rows + 2) * cols + 3};
}

struct Case {
  bool trans_a;
  bool trans_b;
  cudaDataType_t ab_type;
  cudaDataType_t cd_type;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  const auto type = [](cudaDataType_t t) { return t == CUDA_R_32F ? "f32" : "bf16"; };
  return std::string(info.param.trans_a ? "T" : "N") + (info.param.trans_b ? "T" : "N") + "_" +
         type(info.param.ab_type) + "_" + type(info.param.cd_type);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const std::pair<cudaDataType_t, cudaDataType_t> types[] = {
      {CUDA_R_32F, CUDA_R_32F}, {CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}};
  for (const auto& [ab, cd] : types)
    for (const bool trans_a : {false, true})
      for (const bool trans_b : {false, true}) cases.push_back({trans_a, trans_b, ab, cd});
  return cases;
}

// D(m, n) = alpha op(A) op(B) + beta C per batch, with its operands and reference.
struct Gemm {
  static constexpr int64_t m = 5, n = 7, k = 3;
  Case types;
  int64_t batch = 1;
  float alpha = 0.5f, beta = -1.5f;
  Stored a, b, c, d;
  Buffer A, B, C, D;

  Gemm(const Case& test_case, int64_t batch_count, bool in_place)
      : types(test_case), batch(batch_count) {
    a = test_case.trans_a ? padded(k, m) : padded(m, k);
    b = test_case.trans_b ? padded(n, k) : padded(k, n);
    c = padded(m, n);
    d = in_place ? c : Stored{m, n, m + 1, (m + 1) * n + 5};
    std::mt19937 rng(17);
    A = Buffer(types.ab_type, a.stride * batch);
    B = Buffer(types.ab_type, b.stride * batch);
    C = Buffer(types.cd_type, c.stride * batch);
    D = Buffer(types.cd_type, d.stride * batch);
    fill_eighths(A, rng);
    fill_eighths(B, rng);
    fill_eighths(C, rng);
    if (in_place) D = C;
  }
  double op_a(int64_t bt, int64_t i, int64_t l) const {
    return types.trans_a ? A.get(a.index(bt, l, i)) : A.get(a.index(bt, i, l));
  }
  double op_b(int64_t bt, int64_t l, int64_t j) const {
    return types.trans_b ? B.get(b.index(bt, j, l)) : B.get(b.index(bt, l, j));
  }
  // alpha sum_l op(A)(i, l) op(B)(l, j) + beta C(i, j), exact.
  double reference(int64_t bt, int64_t i, int64_t j) const {
    double sum = 0.0;
    for (int64_t l = 0; l < k; ++l) sum += op_a(bt, i, l) * op_b(bt, l, j);
    return alpha * sum + beta * static_cast<double>(C.get(c.index(bt, i, j)));
  }
};

// The epilogue attributes of one cuBLASLt call.
struct LtEpilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t bias_type = -1;  // -1: not set (D's type)
};

struct LtStatus {
  cublasStatus_t heuristic;
  int algorithm_count;
  cublasStatus_t matmul;
};

// Owners of the descriptors of one call.
class LtDescriptors {
 public:
  LtDescriptors(const Gemm& gemm, const LtEpilogue& epilogue,
                cublasComputeType_t compute = CUBLAS_COMPUTE_32F) {
    EXPECT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&operation_, compute, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const int32_t trans_a = gemm.types.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t trans_b = gemm.types.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, trans_a);
    set(CUBLASLT_MATMUL_DESC_TRANSB, trans_b);
    set(CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue.kind);
    if (epilogue.bias != nullptr) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, epilogue.bias);
    if (epilogue.aux != nullptr) {
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, epilogue.aux);
      set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, epilogue.aux_ld);
    }
    if (epilogue.bias_type != -1) set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, epilogue.bias_type);
    layouts_[0] = layout(gemm.types.ab_type, gemm.a, gemm.batch);
    layouts_[1] = layout(gemm.types.ab_type, gemm.b, gemm.batch);
    layouts_[2] = layout(gemm.types.cd_type, gemm.c, gemm.batch);
    layouts_[3] = layout(gemm.types.cd_type, gemm.d, gemm.batch);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference_), CUBLAS_STATUS_SUCCESS);
  }
  ~LtDescriptors() {
    for (cublasLtMatrixLayout_t layout : layouts_) cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulPreferenceDestroy(preference_);
    cublasLtMatmulDescDestroy(operation_);
    cublasLtDestroy(handle_);
  }
  LtDescriptors(const LtDescriptors&) = delete;
  LtDescriptors& operator=(const LtDescriptors&) = delete;

  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(operation_, attribute, &value, sizeof(value)),
              CUBLAS_STATUS_SUCCESS);
  }
  cublasLtMatrixLayout_t layout(int i) const { return layouts_[i]; }

  // The heuristic, then (whatever it said) the product with C = D when in_place.
  LtStatus run(Gemm& gemm, bool in_place) {
    cublasLtMatmulHeuristicResult_t result = {};
    LtStatus status = {};
    status.heuristic = cublasLtMatmulAlgoGetHeuristic(handle_, operation_, layouts_[0], layouts_[1],
                                                      layouts_[2], layouts_[3], preference_, 1,
                                                      &result, &status.algorithm_count);
    if (status.algorithm_count == 1) {
      EXPECT_EQ(result.state, CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(result.workspaceSize, 0u);
    }
    const void* c = in_place ? gemm.D.data() : gemm.C.data();
    status.matmul = cublasLtMatmul(handle_, operation_, &gemm.alpha, gemm.A.data(), layouts_[0],
                                   gemm.B.data(), layouts_[1], &gemm.beta, c, layouts_[2],
                                   gemm.D.data(), layouts_[3], &result.algo, nullptr, 0, nullptr);
    return status;
  }

 private:
  static cublasLtMatrixLayout_t layout(cudaDataType_t type, const Stored& stored, int64_t batch) {
    cublasLtMatrixLayout_t layout = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(stored.rows),
                                         static_cast<uint64_t>(stored.cols), stored.ld),
              CUBLAS_STATUS_SUCCESS);
    const auto count = static_cast<int32_t>(batch);
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                               sizeof(count)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &stored.stride, sizeof(stored.stride)),
              CUBLAS_STATUS_SUCCESS);
    return layout;
  }

  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t operation_ = nullptr;
  cublasLtMatrixLayout_t layouts_[4] = {};
  cublasLtMatmulPreference_t preference_ = nullptr;
};

LtStatus run_lt(Gemm& gemm, const LtEpilogue& epilogue, bool in_place = false) {
  LtDescriptors descriptors(gemm, epilogue);
  return descriptors.run(gemm, in_place);
}

void expect_success(const LtStatus& status) {
  EXPECT_EQ(status.heuristic, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(status.algorithm_count, 1);
  EXPECT_EQ(status.matmul, CUBLAS_STATUS_SUCCESS);
}

// Every element of every batch of D equals the exact value of `expected` rounded to D's type;
// elements outside the m x n matrices (the ld and stride padding) keep their value.
template <typename Expected>
void expect_d(const Gemm& gemm, const Buffer& d_before, Expected expected) {
  std::vector<bool> inside(static_cast<size_t>(gemm.D.size()), false);
  for (int64_t bt = 0; bt < gemm.batch; ++bt) {
    for (int64_t j = 0; j < gemm.n; ++j) {
      for (int64_t i = 0; i < gemm.m; ++i) {
        const int64_t index = gemm.d.index(bt, i, j);
        inside[static_cast<size_t>(index)] = true;
        ASSERT_EQ(gemm.D.get(index), rounded(expected(bt, i, j), gemm.types.cd_type))
            << "batch " << bt << " (" << i << ", " << j << ")";
      }
    }
  }
  for (int64_t index = 0; index < gemm.D.size(); ++index)
    if (!inside[static_cast<size_t>(index)]) {
      ASSERT_EQ(gemm.D.get(index), d_before.get(index)) << "padding " << index;
    }
}

class LtMatmul : public testing::TestWithParam<Case> {};

TEST_P(LtMatmul, DefaultStridedBatchOutOfPlace) {
  Gemm gemm(GetParam(), 2, false);
  const Buffer d_before = gemm.D;
  expect_success(run_lt(gemm, {}));
  expect_d(gemm, d_before,
           [&](int64_t bt, int64_t i, int64_t j) { return gemm.reference(bt, i, j); });
}

TEST_P(LtMatmul, DefaultStridedBatchInPlace) {
  Gemm gemm(GetParam(), 2, true);
  const Buffer d_before = gemm.D;
  expect_success(run_lt(gemm, {}, true));
  expect_d(gemm, d_before,
           [&](int64_t bt, int64_t i, int64_t j) { return gemm.reference(bt, i, j); });
}

TEST_P(LtMatmul, BetaZeroDoesNotReadC) {
  Gemm gemm(GetParam(), 2, false);
  gemm.beta = 0.0f;
  for (int64_t i = 0; i < gemm.C.size(); ++i) gemm.C.set(i, std::nanf(""));
  const Buffer d_before = gemm.D;
  expect_success(run_lt(gemm, {}));
  expect_d(gemm, d_before, [&](int64_t bt, int64_t i, int64_t j) {
    double sum = 0.0;
    for (int64_t l = 0; l < gemm.k; ++l) sum += gemm.op_a(bt, i, l) * gemm.op_b(bt, l, j);
    return gemm.alpha * sum;
  });
}

Buffer eighths_vector(cudaDataType_t type, int64_t size, uint32_t seed) {
  Buffer vector(type, size);
  std::mt19937 rng(seed);
  fill_eighths(vector, rng);
  return vector;
}

cudaDataType_t bias_type_of(int32_t bias_type, cudaDataType_t d_type) {
  return bias_type == -1 ? d_type : static_cast<cudaDataType_t>(bias_type);
}

// GELU (tanh form) in double, from its definition.
double gelu(double x) {
  const double pi = std::acos(-1.0);
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// gelu'(x) by a central difference of gelu in double (error ~1e-10).
double gelu_derivative(double x) {
  const double h = 1e-5;
  return (gelu(x + h) - gelu(x - h)) / (2.0 * h);
}

// f32: a few float roundings of an O(1) value; bf16: one rounding (2^-9 relative) and slack.
// "(i, j)" for failure messages.
std::string cell_name(int64_t i, int64_t j) {
  std::ostringstream name;
  name << "(" << i << ", " << j << ")";
  return name.str();
}

void expect_close(float got, double expected, cudaDataType_t type, const std::string& where) {
  const double tolerance = type == CUDA_R_32F ? 4e-6 * std::max(1.0, std::abs(expected))
                                              : std::ldexp(std::abs(expected), -8) + 1e-6;
  EXPECT_NEAR(got, expected, tolerance) << where;
}

TEST_P(LtMatmul, BiasAddsOneEntryPerRowOfD) {
  for (const int32_t bias_type : {-1, static_cast<int32_t>(CUDA_R_32F)}) {
    Gemm gemm(GetParam(), 1, false);
    Buffer bias = eighths_vector(bias_type_of(bias_type, gemm.types.cd_type), gemm.m, 5);
    const Buffer d_before = gemm.D;
    expect_success(run_lt(gemm, {CUBLASLT_EPILOGUE_BIAS, bias.data(), nullptr, 0, bias_type}));
    expect_d(gemm, d_before, [&](int64_t bt, int64_t i, int64_t j) {
      return gemm.reference(bt, i, j) + bias.get(i);
    });
  }
}

TEST_P(LtMatmul, GeluAuxBiasKeepsThePreActivation) {
  constexpr int64_t kAuxLd = 8;  // > m, a multiple of 8
  constexpr float kUntouched = 99.0f;
  for (const int32_t bias_type : {-1, static_cast<int32_t>(CUDA_R_32F)}) {
    Gemm gemm(GetParam(), 1, false);
    Buffer bias = eighths_vector(bias_type_of(bias_type, gemm.types.cd_type), gemm.m, 5);
    Buffer aux(gemm.types.cd_type, kAuxLd * gemm.n);
    for (int64_t i = 0; i < aux.size(); ++i) aux.set(i, kUntouched);
    expect_success(run_lt(
        gemm, {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias.data(), aux.data(), kAuxLd, bias_type}));
    for (int64_t j = 0; j < gemm.n; ++j) {
      for (int64_t i = 0; i < kAuxLd; ++i) {
        const std::string where = cell_name(i, j);
        if (i >= gemm.m) {
          EXPECT_EQ(aux.get(i + j * kAuxLd), kUntouched) << where;
          continue;
        }
        const double pre_activation = gemm.reference(0, i, j) + bias.get(i);
        EXPECT_EQ(aux.get(i + j * kAuxLd), rounded(pre_activation, gemm.types.cd_type)) << where;
        expect_close(gemm.D.get(gemm.d.index(0, i, j)), gelu(pre_activation), gemm.types.cd_type,
                     where);
      }
    }
  }
}

TEST_P(LtMatmul, DgeluBgradSumsTheGeluGradientOverColumns) {
  constexpr int64_t kAuxLd = 8;
  for (const int32_t bias_type : {-1, static_cast<int32_t>(CUDA_R_32F)}) {
    Gemm gemm(GetParam(), 1, false);
    const cudaDataType_t gradient_type = bias_type_of(bias_type, gemm.types.cd_type);
    Buffer pre_bias(gradient_type, gemm.m);
    for (int64_t i = 0; i < gemm.m; ++i) pre_bias.set(i, 99.0f);  // written (=)
    // Pre-activations with every mantissa bit of D's type in use.
    Buffer aux(gemm.types.cd_type, kAuxLd * gemm.n);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> uniform(-3.0f, 3.0f);
    for (int64_t index = 0; index < aux.size(); ++index) aux.set(index, uniform(rng));
    expect_success(run_lt(
        gemm, {CUBLASLT_EPILOGUE_DGELU_BGRAD, pre_bias.data(), aux.data(), kAuxLd, bias_type}));
    for (int64_t i = 0; i < gemm.m; ++i) {
      double row_sum = 0.0;
      for (int64_t j = 0; j < gemm.n; ++j) {
        const double gradient = gemm.reference(0, i, j) * gelu_derivative(aux.get(i + j * kAuxLd));
        row_sum += gradient;
        expect_close(gemm.D.get(gemm.d.index(0, i, j)), gradient, gemm.types.cd_type,
                     "D(" + std::to_string(i) + ", " + std::to_string(j) + ")");
      }
      expect_close(pre_bias.get(i), row_sum, gradient_type, "bias gradient " + std::to_string(i));
    }
  }
}

TEST_P(LtMatmul, BgradbSumsOpBOverK) {
  for (const int32_t bias_type : {-1, static_cast<int32_t>(CUDA_R_32F)}) {
    Gemm gemm(GetParam(), 1, false);
    gemm.alpha = 1.0f;
    const cudaDataType_t gradient_type = bias_type_of(bias_type, gemm.types.cd_type);
    Buffer bias_gradient(gradient_type, gemm.n);
    for (int64_t j = 0; j < gemm.n; ++j) bias_gradient.set(j, 99.0f);  // written (=)
    const Buffer d_before = gemm.D;
    expect_success(
        run_lt(gemm, {CUBLASLT_EPILOGUE_BGRADB, bias_gradient.data(), nullptr, 0, bias_type}));
    expect_d(gemm, d_before,
             [&](int64_t bt, int64_t i, int64_t j) { return gemm.reference(bt, i, j); });
    for (int64_t j = 0; j < gemm.n; ++j) {
      double sum = 0.0;
      for (int64_t l = 0; l < gemm.k; ++l) sum += gemm.op_b(0, l, j);
      EXPECT_EQ(bias_gradient.get(j), rounded(sum, gradient_type)) << "column " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposesAndTypes, LtMatmul, testing::ValuesIn(all_cases()),
                         case_name);

const Case kF32 = {false, false, CUDA_R_32F, CUDA_R_32F};

// op(A) rows (1, 1e8, -1e8), B ones: the float sum in k order is (1 + 1e8) - 1e8 = 0 (1e8 + 1
// rounds to 1e8); the exact sum, or the reverse order, gives 1.
void set_order_sensitive_operands(Gemm& gemm) {
  const float row[Gemm::k] = {1.0f, 1e8f, -1e8f};
  for (int64_t i = 0; i < gemm.m; ++i)
    for (int64_t l = 0; l < Gemm::k; ++l) gemm.A.set(gemm.a.index(0, i, l), row[l]);
  for (int64_t index = 0; index < gemm.B.size(); ++index) gemm.B.set(index, 1.0f);
  gemm.alpha = 1.0f;
  gemm.beta = 0.0f;
}

TEST(LtMatmulOrder, AccumulatesInFloatInKOrder) {
  Gemm gemm(kF32, 1, false);
  set_order_sensitive_operands(gemm);
  expect_success(run_lt(gemm, {}));
  for (int64_t j = 0; j < gemm.n; ++j)
    for (int64_t i = 0; i < gemm.m; ++i) EXPECT_EQ(gemm.D.get(gemm.d.index(0, i, j)), 0.0f);
}

// Both calls refuse with `expected`; D is not written.
void expect_refused(Gemm& gemm, LtDescriptors& descriptors, cublasStatus_t expected) {
  const Buffer d_before = gemm.D;
  const LtStatus status = descriptors.run(gemm, false);
  EXPECT_EQ(status.heuristic, expected);
  EXPECT_EQ(status.algorithm_count, 0);
  EXPECT_EQ(status.matmul, expected);
  for (int64_t index = 0; index < gemm.D.size(); ++index)
    ASSERT_EQ(gemm.D.get(index), d_before.get(index));
}

TEST(LtMatmulRefuses, EpiloguesOutsideTheSubset) {
  Gemm gemm(kF32, 1, false);
  Buffer bias(CUDA_R_32F, gemm.m);
  for (const cublasLtEpilogue_t kind :
       {CUBLASLT_EPILOGUE_RELU, CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS,
        CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_DGELU}) {
    LtDescriptors descriptors(gemm, {kind, bias.data(), nullptr, 0, -1});
    expect_refused(gemm, descriptors, CUBLAS_STATUS_NOT_SUPPORTED);
  }
}

TEST(LtMatmulRefuses, OtherComputeTypes) {
  Gemm gemm(kF32, 1, false);
  for (const cublasComputeType_t compute :
       {CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_16F}) {
    LtDescriptors descriptors(gemm, {}, compute);
    expect_refused(gemm, descriptors, CUBLAS_STATUS_NOT_SUPPORTED);
  }
}

TEST(LtMatmulRefuses, OtherTypeCombinations) {
  Gemm f32_into_bf16({false, false, CUDA_R_32F, CUDA_R_16BF}, 1, false);
  LtDescriptors descriptors(f32_into_bf16, {});
  expect_refused(f32_into_bf16, descriptors, CUBLAS_STATUS_NOT_SUPPORTED);
  Gemm gemm(kF32, 1, false);
  Buffer bias(CUDA_R_32F, gemm.m);
  LtDescriptors f16_bias(gemm, {CUBLASLT_EPILOGUE_BIAS, bias.data(), nullptr, 0, CUDA_R_16F});
  expect_refused(gemm, f16_bias, CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST(LtMatmulRefuses, EpiloguesOnBatches) {
  Gemm gemm(kF32, 2, false);
  Buffer bias(CUDA_R_32F, gemm.m);
  LtDescriptors descriptors(gemm, {CUBLASLT_EPILOGUE_BIAS, bias.data(), nullptr, 0, -1});
  expect_refused(gemm, descriptors, CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST(LtMatmulRefuses, ScaledBgradbAtLaunch) {
  Gemm gemm(kF32, 1, false);
  gemm.alpha = 2.0f;  // whether BGRADB's sum is scaled is not documented
  Buffer bias_gradient(CUDA_R_32F, gemm.n);
  LtDescriptors descriptors(gemm, {CUBLASLT_EPILOGUE_BGRADB, bias_gradient.data(), nullptr, 0});
  const Buffer d_before = gemm.D;
  const LtStatus status = descriptors.run(gemm, false);
  EXPECT_EQ(status.heuristic, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(status.matmul, CUBLAS_STATUS_NOT_SUPPORTED);
  for (int64_t index = 0; index < gemm.D.size(); ++index)
    ASSERT_EQ(gemm.D.get(index), d_before.get(index));
}

TEST(LtMatmulRefuses, InvalidProblems) {
  Gemm gemm(kF32, 1, false);
  Buffer bias(CUDA_R_32F, gemm.m);
  Buffer aux(CUDA_R_32F, 16 * gemm.n);
  LtDescriptors no_bias(gemm, {CUBLASLT_EPILOGUE_BIAS});
  expect_refused(gemm, no_bias, CUBLAS_STATUS_INVALID_VALUE);
  LtDescriptors aux_ld_12(gemm, {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias.data(), aux.data(), 12});
  expect_refused(gemm, aux_ld_12, CUBLAS_STATUS_INVALID_VALUE);
  LtDescriptors no_aux(gemm, {CUBLASLT_EPILOGUE_DGELU_BGRAD, bias.data(), nullptr, 0});
  expect_refused(gemm, no_aux, CUBLAS_STATUS_INVALID_VALUE);
  Gemm short_ld(kF32, 1, false);
  short_ld.a.ld = short_ld.a.rows - 1;
  LtDescriptors short_ld_descriptors(short_ld, {});
  expect_refused(short_ld, short_ld_descriptors, CUBLAS_STATUS_INVALID_VALUE);
  Gemm mismatched_k(kF32, 1, false);
  mismatched_k.a.cols += 1;  // op(A) (m, k + 1) against op(B) (k, n)
  LtDescriptors mismatched_descriptors(mismatched_k, {});
  expect_refused(mismatched_k, mismatched_descriptors, CUBLAS_STATUS_INVALID_VALUE);
}

TEST(LtDescriptorAttributes, WrongSizesAreInvalidUnhandledOnesUnsupported) {
  cublasLtMatmulDesc_t operation = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  const int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(
      cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof(wide)),
      CUBLAS_STATUS_INVALID_VALUE);
  const void* pointer = nullptr;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(operation, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &pointer,
                                           sizeof(pointer)),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatmulDescDestroy(operation), CUBLAS_STATUS_SUCCESS);

  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  const int64_t plane_offset = 64;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET,
                                             &plane_offset, sizeof(plane_offset)),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(layout), CUBLAS_STATUS_SUCCESS);

  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  const uint32_t search_mode = 0;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_SEARCH_MODE,
                                                 &search_mode, sizeof(search_mode)),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(preference), CUBLAS_STATUS_SUCCESS);
}

TEST(LtHeuristic, NeedsAHandleAndAPositiveCount) {
  Gemm gemm(kF32, 1, false);
  LtDescriptors descriptors(gemm, {});
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t operation = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&operation, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result = {};
  int count = -1;
  const auto heuristic = [&](cublasLtHandle_t h, int requested) {
    return cublasLtMatmulAlgoGetHeuristic(
        h, operation, descriptors.layout(0), descriptors.layout(1), descriptors.layout(2),
        descriptors.layout(3), preference, requested, &result, &count);
  };
  EXPECT_EQ(heuristic(nullptr, 1), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(heuristic(handle, 0), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(heuristic(handle, 4), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(count, 1);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(operation);
  EXPECT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

// cublasGemmStridedBatchedEx on gemm's operands, C in place (gemm built with in_place).
cublasStatus_t run_cublas(Gemm& gemm, cublasComputeType_t compute = CUBLAS_COMPUTE_32F,
                          cublasGemmAlgo_t algorithm = CUBLAS_GEMM_DEFAULT) {
  cublasHandle_t handle = nullptr;
  EXPECT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const cublasStatus_t status = cublasGemmStridedBatchedEx(
      handle, gemm.types.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      gemm.types.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, Gemm::m, Gemm::n, Gemm::k, &gemm.alpha,
      gemm.A.data(), gemm.types.ab_type, static_cast<int>(gemm.a.ld), gemm.a.stride, gemm.B.data(),
      gemm.types.ab_type, static_cast<int>(gemm.b.ld), gemm.b.stride, &gemm.beta, gemm.D.data(),
      gemm.types.cd_type, static_cast<int>(gemm.d.ld), gemm.d.stride, static_cast<int>(gemm.batch),
      compute, algorithm);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  return status;
}

class CublasGemm : public testing::TestWithParam<Case> {};

TEST_P(CublasGemm, StridedBatched) {
  Gemm gemm(GetParam(), 2, true);
  const Buffer d_before = gemm.D;
  EXPECT_EQ(run_cublas(gemm), CUBLAS_STATUS_SUCCESS);
  expect_d(gemm, d_before,
           [&](int64_t bt, int64_t i, int64_t j) { return gemm.reference(bt, i, j); });
}

TEST_P(CublasGemm, BetaZeroDoesNotReadC) {
  Gemm gemm(GetParam(), 2, true);
  gemm.beta = 0.0f;
  for (int64_t i = 0; i < gemm.D.size(); ++i) gemm.D.set(i, std::nanf(""));
  EXPECT_EQ(run_cublas(gemm), CUBLAS_STATUS_SUCCESS);
  for (int64_t bt = 0; bt < gemm.batch; ++bt) {
    for (int64_t j = 0; j < gemm.n; ++j) {
      for (int64_t i = 0; i < gemm.m; ++i) {
        double sum = 0.0;
        for (int64_t l = 0; l < gemm.k; ++l) sum += gemm.op_a(bt, i, l) * gemm.op_b(bt, l, j);
        ASSERT_EQ(gemm.D.get(gemm.d.index(bt, i, j)),
                  rounded(gemm.alpha * sum, gemm.types.cd_type));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTransposesAndTypes, CublasGemm, testing::ValuesIn(all_cases()),
                         case_name);

TEST(CublasGemmOrder, AccumulatesInFloatInKOrder) {
  Gemm gemm(kF32, 1, true);
  set_order_sensitive_operands(gemm);
  EXPECT_EQ(run_cublas(gemm), CUBLAS_STATUS_SUCCESS);
  for (int64_t j = 0; j < gemm.n; ++j)
    for (int64_t i = 0; i < gemm.m; ++i) EXPECT_EQ(gemm.D.get(gemm.d.index(0, i, j)), 0.0f);
}

TEST(CublasGemmRefuses, OutsideTheSubsetAndInvalidArguments) {
  Gemm gemm(kF32, 1, true);
  const Buffer d_before = gemm.D;
  EXPECT_EQ(run_cublas(gemm, CUBLAS_COMPUTE_16F), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(run_cublas(gemm, CUBLAS_COMPUTE_32F_FAST_TF32), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(run_cublas(gemm, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_ALGO1), CUBLAS_STATUS_NOT_SUPPORTED);
  Gemm f32_into_bf16({false, false, CUDA_R_32F, CUDA_R_16BF}, 1, true);
  EXPECT_EQ(run_cublas(f32_into_bf16), CUBLAS_STATUS_NOT_SUPPORTED);
  for (Stored* stored : {&gemm.a, &gemm.b, &gemm.d}) {
    const Stored valid = *stored;
    stored->ld = stored->rows - 1;  // op N: lda < m, ldb < k, ldc < m
    EXPECT_EQ(run_cublas(gemm), CUBLAS_STATUS_INVALID_VALUE);
    *stored = valid;
  }
  for (int64_t index = 0; index < gemm.D.size(); ++index)
    ASSERT_EQ(gemm.D.get(index), d_before.get(index));
  const float one = 1.0f;
  EXPECT_EQ(
      cublasGemmStridedBatchedEx(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, &one, CUDA_R_32F,
                                 1, 0, &one, CUDA_R_32F, 1, 0, &one, gemm.D.data(), CUDA_R_32F, 1,
                                 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST(CublasHandle, WorkspaceMustBe256ByteAligned) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  alignas(256) static char workspace[512];
  EXPECT_EQ(cublasSetStream(handle, nullptr), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetWorkspace(handle, workspace, sizeof(workspace)), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetWorkspace(handle, workspace + 16, 256), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasDestroy(nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST(CublasStatus, NamesAndStrings) {
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_SUCCESS),
               "the operation completed successfully");
  EXPECT_STREQ(cublasGetStatusName(static_cast<cublasStatus_t>(12345)), "CUBLAS_STATUS_UNKNOWN");
}

}  // namespace
