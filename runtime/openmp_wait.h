// The OpenMP wait policy of a host process (Note [OpenMP wait policy] in openmp_wait.cpp).
#pragma once

namespace runtime {

// "active" when this node's ranks times OpenMP threads fit its cores, else "passive".
const char* openmp_wait_policy();

// Call first in main: unless OMP_WAIT_POLICY is set, sets it to openmp_wait_policy() and
// re-executes the process (libgomp reads it when it loads). Returns only when it was set
// already, or when the re-execution failed (the run goes on with libgomp's default).
void choose_openmp_wait_policy(char** argv);

}  // namespace runtime
