// The CPU's MFU denominator: the measured FMA throughput against OpenBLAS sgemm on this machine.
#include <gtest/gtest.h>

#include "trainer/mfu_peak.h"

namespace trainer {
namespace {

// sgemm runs FMAs plus packing and loads, so it cannot beat the FMA chains by much (only when a
// neighbour disturbed them), and a chain loop the compiler folded or miscounted would read far
// above it. Bounds are loose: ctest runs this beside other tests on the same cores.
TEST(MfuPeak, FmaThroughputIsNearTheSgemmRate) {
#if defined(__x86_64__)
  const std::optional<PeakRate> fma = measure_fma_peak();
  ASSERT_TRUE(fma.has_value()) << "an x86-64 CPU that runs this build has FMA";
  const double sgemm = measure_sgemm_gflops();
  EXPECT_GE(fma->gflops, 0.5 * sgemm) << fma->source;
  EXPECT_LE(fma->gflops, 4.0 * sgemm) << fma->source;
  EXPECT_NE(fma->source.find("FMA throughput measured"), std::string::npos) << fma->source;
  const PeakRate peak = cpu_mfu_peak();
  EXPECT_GE(peak.gflops, 0.5 * sgemm) << peak.source;
#else
  GTEST_SKIP() << "the FMA chains are written for x86-64";
#endif
}

}  // namespace
}  // namespace trainer
