// Signal flag and its agreement across ranks. The handler only touches a
// sig_atomic_t (and _exit on the second signal), as async-signal safety requires.
#include "trainer/run/stop_signals.h"

#include <unistd.h>

namespace trainer {
namespace {

volatile std::sig_atomic_t g_signals = 0;

void on_signal(int signal_number) {
  if (g_signals > 0) _exit(128 + signal_number);  // the second signal: now
  g_signals = g_signals + 1;
  static const char kMessage[] = "trainer: stopping after this step (signal again to exit now)\n";
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
}

}  // namespace

StopSignals::StopSignals() {
  g_signals = 0;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &action, &previous_[i]);
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
}

StopSignals::Stop StopSignals::stop_after_step(parallel::Communicator& world,
                                               bool past_duration) const {
  double requested[2] = {g_signals > 0 ? 1.0 : 0.0, past_duration ? 1.0 : 0.0};
  world.all_reduce_sum(requested, 2);
  if (requested[0] > 0) return Stop::signal;
  return requested[1] > 0 ? Stop::duration : Stop::none;
}

}  // namespace trainer
