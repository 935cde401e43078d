// Host definitions of the cuBLASLt calls the CUDA backend makes: descriptors that hold the
// attributes set, a heuristic that offers one algorithm for each problem the host runs, and
// cublasLtMatmul (Note [Host cuBLASLt semantics]). Anything else: CUBLAS_STATUS_NOT_SUPPORTED.
#include <cublasLt.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "tests/host_cuda/gemm_core.h"

// The opaque library handle; the host library keeps no state in it.
struct cublasLtContext {
  uint32_t magic = 0;
};

namespace host_cuda {
namespace {

// Note [Host cuBLASLt semantics]
// As documented in cublasLt.h (cublasLtEpilogue_t, cublasLtMatmulDescAttributes_t): D(m, n) =
// epilogue(alpha op(A) op(B) + beta C), column-major, in f32 (CUBLAS_COMPUTE_32F, f32 scale
// type, host scalars); C is not read when beta is 0. For element (i, j), value = that sum:
// - BIAS: D = value + bias[i]; the bias has one entry per row of D, broadcast over columns.
// - GELU_AUX_BIAS: pre = value + bias[i]; aux(i, j) = pre (the GELU input); D = gelu(pre),
//   the tanh form. aux has D's type and leading dim AUX_LD (>= m, a multiple of 8).
// - DGELU_BGRAD: D = value * gelu'(aux(i, j)); bias[i] = sum over j of those D values: the
//   bias gradient of the layer whose GELU input aux is (one entry per row of D). Summed in
//   float, j ascending, before D is rounded to its type.
// - BGRADB: D as DEFAULT; bias[j] = sum over l of op(B)(l, j): one entry per column of D,
//   reduced over k, in float, l ascending. The documentation does not say whether alpha
//   scales that sum, so alpha != 1 is refused (NOT_SUPPORTED).
// The bias (or bias gradient) has D's type unless BIAS_DATA_TYPE says CUDA_R_32F. Epilogues
// other than DEFAULT run for batch count 1 only (no bias / aux batch strides).

constexpr uint32_t kContextMagic = 0x4c744843u;
constexpr int64_t kAuxLdMultiple = 8;  // EPILOGUE_AUX_LD of the GELU epilogues

struct LayoutState {
  int32_t type = -1;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
  int32_t batch_count = 1;
  int64_t batch_stride = 0;
};

struct MatmulState {
  int32_t compute_type = 0;
  int32_t scale_type = 0;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t trans_a = CUBLAS_OP_N;
  int32_t trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  const void* aux = nullptr;
  int64_t aux_ld = 0;
  int32_t bias_type = -1;  // -1: D's type
};

// Read, never acted on: the host needs no workspace and no alignment.
struct PreferenceState {
  uint64_t max_workspace_bytes = 0;
  uint32_t min_alignment_bytes[4] = {256, 256, 256, 256};  // A, B, C, D
};

// The states live in the header's fixed-size opaque structs.
template <typename State, typename Opaque>
State read_state(const Opaque* opaque) {
  static_assert(std::is_trivially_copyable_v<State> && sizeof(State) <= sizeof(opaque->data));
  State state;
  std::memcpy(&state, opaque->data, sizeof(State));
  return state;
}

template <typename State, typename Opaque>
void write_state(Opaque* opaque, const State& state) {
  static_assert(std::is_trivially_copyable_v<State> && sizeof(State) <= sizeof(opaque->data));
  std::memcpy(opaque->data, &state, sizeof(State));
}

template <typename State, typename Opaque>
cublasStatus_t create_descriptor(Opaque** descriptor, const State& state) {
  if (descriptor == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *descriptor = new Opaque{};
  write_state(*descriptor, state);
  return CUBLAS_STATUS_SUCCESS;
}

// An attribute value of exactly the documented size.
template <typename T>
cublasStatus_t copy_attribute(T* field, const void* buf, size_t size) {
  if (buf == nullptr || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t set_attribute(MatmulState* state, cublasLtMatmulDescAttributes_t attribute,
                             const void* buf, size_t size) {
  switch (attribute) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
      return copy_attribute(&state->compute_type, buf, size);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return copy_attribute(&state->scale_type, buf, size);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
      return copy_attribute(&state->pointer_mode, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return copy_attribute(&state->trans_a, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return copy_attribute(&state->trans_b, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
      return copy_attribute(&state->epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return copy_attribute(&state->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
      return copy_attribute(&state->aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
      return copy_attribute(&state->aux_ld, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return copy_attribute(&state->bias_type, buf, size);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t set_attribute(LayoutState* state, cublasLtMatrixLayoutAttribute_t attribute,
                             const void* buf, size_t size) {
  switch (attribute) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
      return copy_attribute(&state->type, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
      return copy_attribute(&state->order, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
      return copy_attribute(&state->rows, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_COLS:
      return copy_attribute(&state->cols, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_LD:
      return copy_attribute(&state->ld, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
      return copy_attribute(&state->batch_count, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
      return copy_attribute(&state->batch_stride, buf, size);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

cublasStatus_t set_attribute(PreferenceState* state, cublasLtMatmulPreferenceAttributes_t attribute,
                             const void* buf, size_t size) {
  switch (attribute) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return copy_attribute(&state->max_workspace_bytes, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
      return copy_attribute(&state->min_alignment_bytes[0], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
      return copy_attribute(&state->min_alignment_bytes[1], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
      return copy_attribute(&state->min_alignment_bytes[2], buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return copy_attribute(&state->min_alignment_bytes[3], buf, size);
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}

template <typename State, typename Opaque, typename Attribute>
cublasStatus_t set_descriptor_attribute(Opaque* descriptor, Attribute attribute, const void* buf,
                                        size_t size) {
  if (descriptor == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  State state = read_state<State>(descriptor);
  const cublasStatus_t status = set_attribute(&state, attribute, buf, size);
  if (status == CUBLAS_STATUS_SUCCESS) write_state(descriptor, state);
  return status;
}

// A validated epilogue: the bias is read (BIAS, GELU_AUX_BIAS) or written (BGRADB,
// DGELU_BGRAD); aux is written (GELU_AUX_BIAS) or read (DGELU_BGRAD).
struct Epilogue {
  uint32_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  Element bias_type = Element::f32;
  void* bias = nullptr;
  void* aux = nullptr;
  int64_t aux_ld = 0;
};

// A validated problem; the data pointers are filled in by cublasLtMatmul.
struct Matmul {
  GemmShape shape;
  Operand a, b;
  int64_t stride_a = 0, stride_b = 0;
  Element d_type = Element::f32;  // also C's
  int64_t ldc = 0, stride_c = 0;
  int64_t ldd = 0, stride_d = 0;
  int64_t batch_count = 1;
  Epilogue epilogue;
};

struct Layouts {
  LayoutState a, b, c, d;
};

bool valid_operation(int32_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
}

cublasStatus_t check_operation(const MatmulState& op) {
  if (op.compute_type != CUBLAS_COMPUTE_32F || op.scale_type != CUDA_R_32F ||
      op.pointer_mode != CUBLASLT_POINTER_MODE_HOST)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!valid_operation(op.trans_a) || !valid_operation(op.trans_b))
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

// The cuBLASLt type combinations of CUBLAS_COMPUTE_32F the host runs: A/B f32 with C/D f32,
// A/B bf16 with C/D bf16 or f32.
cublasStatus_t check_types(const Layouts& layouts) {
  const auto ab = element_of(layouts.a.type);
  const auto cd = element_of(layouts.d.type);
  if (!ab || !cd || layouts.b.type != layouts.a.type || layouts.c.type != layouts.d.type)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (*ab == Element::f32 && *cd != Element::f32) return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

// Each layout column-major, int32-sized, ld at least its rows, one batch count; no negative
// batch strides.
cublasStatus_t check_layouts(const Layouts& layouts) {
  for (const LayoutState* layout : {&layouts.a, &layouts.b, &layouts.c, &layouts.d}) {
    if (layout->order != CUBLASLT_ORDER_COL || layout->rows > INT_MAX || layout->cols > INT_MAX ||
        layout->batch_stride < 0)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    if (layout->ld < 1 || layout->ld < static_cast<int64_t>(layout->rows) ||
        layout->batch_count < 1 || layout->batch_count != layouts.d.batch_count)
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

// m, n from D; k from op(A); op(A) (m, k), op(B) (k, n) and C (m, n) must agree.
cublasStatus_t describe_layouts(const MatmulState& op, const Layouts& layouts, Matmul* problem) {
  cublasStatus_t status = check_types(layouts);
  if (status == CUBLAS_STATUS_SUCCESS) status = check_layouts(layouts);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const LayoutState& a = layouts.a;
  const LayoutState& b = layouts.b;
  const bool trans_a = op.trans_a != CUBLAS_OP_N;
  const bool trans_b = op.trans_b != CUBLAS_OP_N;
  const auto m = static_cast<int64_t>(layouts.d.rows);
  const auto n = static_cast<int64_t>(layouts.d.cols);
  const auto k = static_cast<int64_t>(trans_a ? a.rows : a.cols);
  if (static_cast<int64_t>(trans_a ? a.cols : a.rows) != m ||
      static_cast<int64_t>(trans_b ? b.cols : b.rows) != k ||
      static_cast<int64_t>(trans_b ? b.rows : b.cols) != n || layouts.c.rows != layouts.d.rows ||
      layouts.c.cols != layouts.d.cols)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0 || k == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
  problem->shape = {m, n, k};
  problem->a = {nullptr, *element_of(a.type), a.ld, trans_a};
  problem->b = {nullptr, *element_of(b.type), b.ld, trans_b};
  problem->stride_a = a.batch_stride;
  problem->stride_b = b.batch_stride;
  problem->d_type = *element_of(layouts.d.type);
  problem->ldc = layouts.c.ld;
  problem->stride_c = layouts.c.batch_stride;
  problem->ldd = layouts.d.ld;
  problem->stride_d = layouts.d.batch_stride;
  problem->batch_count = layouts.d.batch_count;
  return CUBLAS_STATUS_SUCCESS;
}

bool uses_aux(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

cublasStatus_t describe_epilogue(const MatmulState& op, Matmul* problem) {
  Epilogue& epilogue = problem->epilogue;
  epilogue.kind = op.epilogue;
  if (op.epilogue == CUBLASLT_EPILOGUE_DEFAULT) return CUBLAS_STATUS_SUCCESS;
  if (op.epilogue != CUBLASLT_EPILOGUE_BIAS && op.epilogue != CUBLASLT_EPILOGUE_BGRADB &&
      !uses_aux(op.epilogue))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const auto bias_type = op.bias_type == -1 ? problem->d_type : element_of(op.bias_type);
  if (problem->batch_count != 1 || !bias_type ||
      (*bias_type != problem->d_type && *bias_type != Element::f32))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (op.bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  epilogue.bias_type = *bias_type;
  epilogue.bias = const_cast<void*>(op.bias);  // written by the gradient epilogues
  if (!uses_aux(op.epilogue)) return CUBLAS_STATUS_SUCCESS;
  if (op.aux == nullptr || op.aux_ld < problem->shape.m || op.aux_ld % kAuxLdMultiple != 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  epilogue.aux = const_cast<void*>(op.aux);  // written by GELU_AUX_BIAS
  epilogue.aux_ld = op.aux_ld;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t describe(cublasLtMatmulDesc_t operation, const cublasLtMatrixLayout_t descs[4],
                        Matmul* problem) {
  for (int i = 0; i < 4; ++i)
    if (descs[i] == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const MatmulState op = read_state<MatmulState>(operation);
  const Layouts layouts = {read_state<LayoutState>(descs[0]), read_state<LayoutState>(descs[1]),
                           read_state<LayoutState>(descs[2]), read_state<LayoutState>(descs[3])};
  cublasStatus_t status = check_operation(op);
  if (status == CUBLAS_STATUS_SUCCESS) status = describe_layouts(op, layouts, problem);
  if (status == CUBLAS_STATUS_SUCCESS) status = describe_epilogue(op, problem);
  return status;
}

// GELU, tanh form, and its derivative:
// gelu(x) = x/2 (1 + t), t = tanh(sqrt(2/pi) (x + 0.044715 x^3));
// gelu'(x) = (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

float gelu(float x) {
  const float t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * x * (1.0f + t);
}

float gelu_derivative(float x) {
  const float t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5f * (1.0f + t) +
         0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
}

// D's value of element (i, j) before rounding, from value = alpha * product + beta * C.
float finish_element(const Epilogue& epilogue, Element d_type, int64_t i, int64_t j, float value,
                     std::vector<float>* row_sums) {
  switch (epilogue.kind) {
    case CUBLASLT_EPILOGUE_BIAS:
      return value + load(epilogue.bias, epilogue.bias_type, i);
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: {
      const float pre_activation = value + load(epilogue.bias, epilogue.bias_type, i);
      store(epilogue.aux, d_type, i + j * epilogue.aux_ld, pre_activation);
      return gelu(pre_activation);
    }
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: {
      const float gradient =
          value * gelu_derivative(load(epilogue.aux, d_type, i + j * epilogue.aux_ld));
      (*row_sums)[static_cast<size_t>(i)] += gradient;
      return gradient;
    }
    default:
      return value;
  }
}

// The bias gradients: DGELU_BGRAD's row sums of D, BGRADB's column sums of op(B).
void write_bias_gradient(const Matmul& problem, const Operand& b,
                         const std::vector<float>& row_sums) {
  const Epilogue& epilogue = problem.epilogue;
  if (epilogue.kind == CUBLASLT_EPILOGUE_DGELU_BGRAD) {
    for (int64_t i = 0; i < problem.shape.m; ++i)
      store(epilogue.bias, epilogue.bias_type, i, row_sums[static_cast<size_t>(i)]);
  } else if (epilogue.kind == CUBLASLT_EPILOGUE_BGRADB) {
    for (int64_t j = 0; j < problem.shape.n; ++j) {
      float sum = 0.0f;
      for (int64_t l = 0; l < problem.shape.k; ++l) sum += b.at(l, j);
      store(epilogue.bias, epilogue.bias_type, j, sum);
    }
  }
}

void run(const Matmul& problem, float alpha, float beta, const void* c, void* d) {
  const int64_t m = problem.shape.m;
  for (int64_t batch = 0; batch < problem.batch_count; ++batch) {
    Operand a = problem.a;
    Operand b = problem.b;
    a.data = advance(a.data, a.type, batch * problem.stride_a);
    b.data = advance(b.data, b.type, batch * problem.stride_b);
    const void* c_batch =
        c == nullptr ? nullptr : advance(c, problem.d_type, batch * problem.stride_c);
    void* d_batch = advance(d, problem.d_type, batch * problem.stride_d);
    const std::vector<float> product = multiply(problem.shape, a, b);
    std::vector<float> row_sums(static_cast<size_t>(m), 0.0f);
    for (int64_t j = 0; j < problem.shape.n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        float value = alpha * product[static_cast<size_t>(i + j * m)];
        if (beta != 0.0f) value += beta * load(c_batch, problem.d_type, i + j * problem.ldc);
        value = finish_element(problem.epilogue, problem.d_type, i, j, value, &row_sums);
        store(d_batch, problem.d_type, i + j * problem.ldd, value);
      }
    }
    write_bias_gradient(problem, b, row_sums);
  }
}

bool valid_handle(cublasLtHandle_t handle) {
  return handle != nullptr && handle->magic == kContextMagic;
}

}  // namespace
}  // namespace host_cuda

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new cublasLtContext{host_cuda::kContextMagic};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!host_cuda::valid_handle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  lightHandle->magic = 0;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType) {
  host_cuda::MatmulState state;
  state.compute_type = computeType;
  state.scale_type = scaleType;
  return host_cuda::create_descriptor(matmulDesc, state);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  delete matmulDesc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void* buf, size_t sizeInBytes) {
  return host_cuda::set_descriptor_attribute<host_cuda::MatmulState>(matmulDesc, attr, buf,
                                                                     sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld) {
  host_cuda::LayoutState state;
  state.type = type;
  state.rows = rows;
  state.cols = cols;
  state.ld = ld;
  return host_cuda::create_descriptor(matLayout, state);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  delete matLayout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             const void* buf, size_t sizeInBytes) {
  return host_cuda::set_descriptor_attribute<host_cuda::LayoutState>(matLayout, attr, buf,
                                                                     sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  return host_cuda::create_descriptor(pref, host_cuda::PreferenceState{});
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
    size_t sizeInBytes) {
  return host_cuda::set_descriptor_attribute<host_cuda::PreferenceState>(pref, attr, buf,
                                                                         sizeInBytes);
}

// One algorithm (no workspace) for every problem cublasLtMatmul runs; the same status as
// cublasLtMatmul for the others.
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int* returnAlgoCount) {
  if (!host_cuda::valid_handle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (operationDesc == nullptr || preference == nullptr || heuristicResultsArray == nullptr ||
      returnAlgoCount == nullptr || requestedAlgoCount <= 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  *returnAlgoCount = 0;
  const cublasLtMatrixLayout_t layouts[4] = {Adesc, Bdesc, Cdesc, Ddesc};
  host_cuda::Matmul problem;
  const cublasStatus_t status = host_cuda::describe(operationDesc, layouts, &problem);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  heuristicResultsArray[0] = cublasLtMatmulHeuristicResult_t{};
  heuristicResultsArray[0].workspaceSize = 0;
  heuristicResultsArray[0].state = CUBLAS_STATUS_SUCCESS;
  heuristicResultsArray[0].wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
    const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
    const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* /*algo: any, or none*/,
    void* /*workspace: none needed*/, size_t /*workspaceSizeInBytes*/, cudaStream_t /*stream*/) {
  if (!host_cuda::valid_handle(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (computeDesc == nullptr || alpha == nullptr || beta == nullptr || A == nullptr ||
      B == nullptr || D == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  const cublasLtMatrixLayout_t layouts[4] = {Adesc, Bdesc, Cdesc, Ddesc};
  host_cuda::Matmul problem;
  const cublasStatus_t status = host_cuda::describe(computeDesc, layouts, &problem);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  const float alpha_value = *static_cast<const float*>(alpha);  // host pointer mode, f32 scale
  const float beta_value = *static_cast<const float*>(beta);
  if ((beta_value != 0.0f && C == nullptr) ||
      (C == D && (problem.ldc != problem.ldd || problem.stride_c != problem.stride_d)))
    return CUBLAS_STATUS_INVALID_VALUE;  // in place (C == D) needs C's layout to be D's
  if (problem.epilogue.kind == CUBLASLT_EPILOGUE_BGRADB && alpha_value != 1.0f)
    return CUBLAS_STATUS_NOT_SUPPORTED;  // Note [Host cuBLASLt semantics]
  problem.a.data = A;
  problem.b.data = B;
  host_cuda::run(problem, alpha_value, beta_value, C, D);
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
