// The MFU/HFU denominator: a rate the step cannot exceed. On a GPU, the datasheet's dense peak
// for the precision (or train.peak_tflops); on a CPU, the FMA throughput of its cores or the
// best sgemm, both measured, whichever is higher.
#pragma once

#include <optional>
#include <string>

namespace trainer {

struct PeakRate {
  double gflops = 0;   // GFLOP/s
  std::string source;  // what the number is, for the log ("FMA throughput measured ...")
};

// The f32 FMA throughput of this process's OpenMP team, measured: every thread runs independent FMA
// chains on the widest vectors the CPU has (AVX-512 or AVX2), best of `repeats`. Measured
// rather than stated: a core may run 512-bit FMAs as two 256-bit halves (Zen 4), and a VM's
// stated clock is not the one it runs at. nullopt on a CPU without FMA.
std::optional<PeakRate> measure_fma_peak(int repeats = 5);

// The best of `repeats` 1024^3 OpenBLAS sgemms, GFLOP/s.
double measure_sgemm_gflops(int repeats = 5);

// The higher of the FMA throughput and the sgemm rate (sgemm can only beat the FMA loop when that
// was disturbed), named by its source.
PeakRate cpu_mfu_peak();

}  // namespace trainer
