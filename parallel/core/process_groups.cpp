// Rank layout arithmetic, MPI group splitting, MPI lifetime and job abort.
#include "parallel/core/process_groups.h"

#include <mpi.h>

#include <cstdlib>
#include <utility>

#include "parallel/core/mpi_check.h"
#include "parallel/core/mpi_communicator.h"

namespace parallel {

RankCoordinates rank_coordinates(int64_t rank, const ParallelConfig& c) {
  RankCoordinates r;
  r.tp = rank % c.tensor;
  r.cp = (rank / c.tensor) % c.context;
  r.dp = (rank / (c.tensor * c.context)) % c.data;
  r.pp = rank / (c.tensor * c.context * c.data);
  return r;
}

int64_t ProcessGroups::payload_bytes() const {
  int64_t total = 0;
  for (const auto* group : {&world, &tp, &cp, &dp, &pp, &embedding, &model_parallel})
    if (*group) total += (*group)->payload_bytes();
  return total;
}

namespace {
// Names the groups in traces (Note [Communication trace]).
void name_groups(ProcessGroups& g) {
  const std::pair<std::unique_ptr<Communicator>*, const char*> names[] = {
      {&g.world, "world"}, {&g.tp, "tp"},        {&g.cp, "cp"},
      {&g.dp, "dp"},       {&g.pp, "pp"},        {&g.embedding, "embedding"},
      {&g.model_parallel, "model_parallel"}};
  for (const auto& [group, name] : names)
    if (*group) (*group)->set_group_name(name);
}
}  // namespace

ProcessGroups ProcessGroups::single() {
  ProcessGroups g;
  g.world = std::make_unique<SelfCommunicator>();
  g.tp = std::make_unique<SelfCommunicator>();
  g.cp = std::make_unique<SelfCommunicator>();
  g.dp = std::make_unique<SelfCommunicator>();
  g.pp = std::make_unique<SelfCommunicator>();
  g.model_parallel = std::make_unique<SelfCommunicator>();
  name_groups(g);
  return g;
}

void add_device_communicators(
    ProcessGroups& groups,
    const std::function<std::unique_ptr<Communicator>(Communicator& host, bool point_to_point)>&
        make_device) {
  // Groups of one kind are disjoint and every rank goes tp, cp, dp, pp, embedding, so each
  // creation (collective over its group) meets its peers; groups of one rank and ranks
  // outside an embedding group skip theirs, which involves nobody else.
  for (std::unique_ptr<Communicator>* group :
       {&groups.tp, &groups.cp, &groups.dp, &groups.pp, &groups.embedding}) {
    if (*group == nullptr || (*group)->size() == 1) continue;
    const bool point_to_point = group == &groups.pp || group == &groups.cp;
    std::unique_ptr<Communicator> device = make_device(**group, point_to_point);
    *group = std::make_unique<SplitCommunicator>(std::move(*group), std::move(device));
  }
}

ProcessGroups ProcessGroups::from_mpi(const ParallelConfig& config) {
  ProcessGroups g;
  g.config = config;
  int rank = 0, size = 0;
  TRAINER_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  TRAINER_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  TRAINER_ASSERT(size == config.world_size(), "world " << size << " vs " << config.world_size());
  g.world_rank = rank;
  g.coordinates = rank_coordinates(rank, config);
  auto split = [&](int64_t color, int64_t key) -> std::unique_ptr<Communicator> {
    MPI_Comm comm = MPI_COMM_NULL;
    TRAINER_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD,
                                     color < 0 ? MPI_UNDEFINED : static_cast<int>(color),
                                     static_cast<int>(key), &comm));
    if (comm == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiCommunicator>(reinterpret_cast<void*>(comm));
  };
  const RankCoordinates& r = g.coordinates;
  const int64_t T = config.tensor, C = config.context, D = config.data;
  const int64_t replica = r.cp + C * r.dp;  // rank in the data x context group
  g.world = split(0, rank);
  g.tp = split(replica + C * D * r.pp, r.tp);
  g.cp = split(r.tp + T * (r.dp + D * r.pp), r.cp);
  g.dp = split(r.tp + T * r.pp, replica);
  g.pp = split(r.tp + T * replica, r.pp);
  g.model_parallel = split(replica, r.tp + T * r.pp);
  const bool embedding_stage = r.pp == 0 || r.pp == config.pipeline - 1;
  g.embedding = split(config.pipeline > 1 && embedding_stage ? r.tp + T * replica : -1, r.pp);
  name_groups(g);
  return g;
}

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  TRAINER_MPI_CHECK(MPI_Init(argc, argv));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  TRAINER_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  TRAINER_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  MPI_Comm node = MPI_COMM_NULL;
  TRAINER_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  TRAINER_MPI_CHECK(MPI_Comm_rank(node, &local_rank_));
  MPI_Comm_free(&node);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void abort_job(int exit_code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::exit(exit_code);
}

}  // namespace parallel
