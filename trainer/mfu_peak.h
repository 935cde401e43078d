// The MFU/HFU denominator: a rate the step cannot exceed. On a GPU, the datasheet's dense peak
// for the precision (or train.peak_tflops); on a CPU, the stated peak (cores x FMA units x
// vector lanes x 2 FLOP x clock) or the best sgemm measured, whichever is higher.
#pragma once

#include <optional>
#include <string>

namespace trainer {

struct PeakRate {
  double gflops = 0;   // GFLOP/s
  std::string source;  // what the number is, for the log ("stated: 2 cores x ...")
};

// The CPU's stated f32 peak for the cores this process may run on, with 2 FMA units per core
// and the widest vector unit the CPU reports (AVX-512: 16 lanes, AVX2/AVX: 8, else SSE: 4) at
// its maximum clock (cpufreq's cpuinfo_max_freq, else /proc/cpuinfo's highest "cpu MHz").
// nullopt when no clock is known.
std::optional<PeakRate> stated_cpu_peak();

// The best of `repeats` 1024^3 OpenBLAS sgemms, GFLOP/s.
double measure_sgemm_gflops(int repeats = 5);

// The higher of the stated peak and the measured sgemm (a stated peak can be wrong: a VM's
// reported clock, a core without the second FMA unit), named by its source.
PeakRate cpu_mfu_peak();

}  // namespace trainer
