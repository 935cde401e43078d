// The cost of one trace scope (runtime/trace.h), off and recording: a loop of scopes shaped
// like the executor's per-layer ones; prints ns per scope. Run by scripts/bench_trace.sh.
#include <chrono>
#include <cstdio>

#include "runtime/trace.h"

int main() {
  constexpr int kScopes = 1000000;
  for (const bool on : {false, true}) {
    if (on) runtime::trace::start();
    const auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < kScopes; ++i) {
      const runtime::trace::Scope scope({.name = "forward", .layer = i & 7});
    }
    const auto end = std::chrono::steady_clock::now();
    runtime::trace::stop();
    const size_t recorded = runtime::trace::take().size();
    std::printf("trace scope %s: %.1f ns each (%zu slices recorded)\n", on ? "recording" : "off",
                std::chrono::duration<double, std::nano>(end - begin).count() / kScopes, recorded);
  }
  return 0;
}
