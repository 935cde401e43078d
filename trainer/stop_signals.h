// SIGTERM / SIGINT as a scheduler's preemption notice: the first signal asks the
// training loop to stop after the current step (every rank agrees on the step);
// a second one exits at once. Installed for the lifetime of the object.
#pragma once

#include <csignal>

#include "parallel/core/communicator.h"

namespace trainer {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Collective over `world`: true on every rank once any rank got a signal.
  bool stop_requested(parallel::Communicator& world) const;

 private:
  struct sigaction previous_term_ {};
  struct sigaction previous_int_ {};
};

}  // namespace trainer
