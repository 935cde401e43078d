// Every operator of TRAINER_OPS on the binary's device (make_twin_device) against the host: one
// row each (a listed operator without a row, or a row without an operator, fails), each row run
// on kCasesPerRow random cases per activation dtype. Skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "runtime/ops.h"
#include "tests/unit/ops/twin_harness.h"

namespace op_twins {
namespace {

using runtime::DType;

constexpr uint32_t kCasesPerRow = 8;

std::vector<std::string> row_names() {
  std::vector<std::string> names;
  for (const Row& row : rows()) names.push_back(row.op);
  return names;
}

TEST(OpTwins, EveryListedOperatorHasOneRow) {
#define TWIN_LISTED_NAME(result, name, ...) #name,
  std::vector<std::string> listed = {TRAINER_OPS(TWIN_LISTED_NAME, TWIN_LISTED_NAME)};
#undef TWIN_LISTED_NAME
  std::vector<std::string> covered = row_names();
  std::sort(listed.begin(), listed.end());
  std::sort(covered.begin(), covered.end());
  EXPECT_EQ(covered, listed);
}

// The parameter of a twin test: an operator and the activation dtype of its cases.
struct TwinParam {
  std::string op;
  DType activation;
};
void PrintTo(const TwinParam& param, std::ostream* out) {
  *out << param.op << " (" << runtime::dtype_name(param.activation) << ")";
}

std::vector<TwinParam> twin_params() {
  std::vector<TwinParam> params;
  for (const std::string& op : row_names()) {
    for (DType activation : {DType::f32, DType::bf16}) params.push_back({op, activation});
  }
  return params;
}

class OpTwin : public ::testing::TestWithParam<TwinParam> {
 protected:
  void SetUp() override {
    device_ = make_twin_device();
    if (device_ == nullptr) GTEST_SKIP() << "no device";
  }
  void TearDown() override { device_.reset(); }

  std::unique_ptr<TwinDevice> device_;
};

TEST_P(OpTwin, DeviceMatchesHost) {
  const std::string& op = GetParam().op;
  const DType activation = GetParam().activation;
  const auto row = std::find_if(rows().begin(), rows().end(),
                                [&](const Row& candidate) { return candidate.op == op; });
  ASSERT_NE(row, rows().end());
  for (uint32_t seed = 1; seed <= kCasesPerRow; ++seed) {
    SCOPED_TRACE(testing::Message()
                 << op << ", " << runtime::dtype_name(activation) << " activations, seed " << seed);
    row->run_case(*device_, seed, activation);
    if (HasFailure()) return;  // the first failing case is enough to read
  }
}

std::string param_name(const testing::TestParamInfo<TwinParam>& info) {
  return info.param.op + "_" + std::string(runtime::dtype_name(info.param.activation));
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTwin, testing::ValuesIn(twin_params()), param_name);

}  // namespace
}  // namespace op_twins
