// SIGTERM, SIGINT and SIGUSR1 as a scheduler's preemption notice: the first signal asks the
// training loop to stop after the current step (every rank agrees on the step); a second one
// exits at once. Installed for the lifetime of the object. SIGUSR1 is the notice that reaches
// ranks under Open MPI's mpirun, which forwards it to every rank and exits with theirs, while a
// SIGTERM to mpirun aborts the job: it kills the ranks within seconds and exits 1
// (docs/checkpoints.md, "SIGTERM, SIGINT and SIGUSR1").
#pragma once

#include <csignal>
#include <iterator>

#include "parallel/core/communicator.h"

namespace trainer {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // What stops the run after this step, the same on every rank (collective over `world`): a
  // signal any rank got; else `past_duration` on any rank (train.exit_duration_minutes, each
  // rank by its own clock); else nothing.
  enum class Stop { none, signal, duration };
  Stop stop_after_step(parallel::Communicator& world, bool past_duration) const;

 private:
  static constexpr int kSignals[] = {SIGTERM, SIGINT, SIGUSR1};
  struct sigaction previous_[std::size(kSignals)]{};  // the handlers before, restored after
};

}  // namespace trainer
