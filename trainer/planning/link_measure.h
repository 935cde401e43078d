// Links measured among the ranks of an MPI launch (`mpirun -np N trainer plan --search ...`):
// rank 0 exchanges 64 MiB and 8-byte messages with the first rank on its own node and the first
// on another (and, when every rank shares rank 0's node, all of them all-reduce 64 MiB for the
// bus bandwidth of sums), and the comm model takes their bandwidths and latency instead of the
// stated ones (step_time.h). Ranks share a node when their host names are equal. These are MPI's
// links, the ones a CPU run's collectives take; plan_command keeps a CUDA config's stated links
// (its collectives go over NCCL).
#pragma once

#include "parallel/core/communicator.h"
#include "trainer/planning/step_time.h"

namespace trainer {

// Collective over `world`; every rank returns the same links. Where no peer exists of a kind
// (one node: no inter-node peer), that bandwidth stays `stated`'s. ranks_per_node becomes the
// measured ranks of rank 0's node.
LinkBandwidths measure_links(parallel::Communicator& world, const LinkBandwidths& stated);

}  // namespace trainer
