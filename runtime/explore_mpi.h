// MPI for `jaxpp-sim explore`: who am I under mpirun, and gather text at rank 0.
//
// The explorer (simulator/explorer.h) knows nothing of MPI: the command asks explore_mpi_world()
// for (rank, size), evaluates shard `rank` of `size`, serialises its records as text and calls
// explore_mpi_gather(); rank 0 merges and prints, the other ranks print nothing.
//
// A process counts as started by mpirun/mpiexec with several processes when the launcher's
// environment says so (Open MPI: OMPI_COMM_WORLD_SIZE; MPICH/Hydra and Intel MPI: PMI_SIZE;
// Slurm with PMI: PMI_SIZE too). Only then is MPI initialised (through MpiSession, which
// finalises at exit), so a plain `jaxpp-sim explore` never touches MPI.
//
// Usage:
//   ExploreMpiWorld w = explore_mpi_world();           // {0, 1} outside mpirun
//   std::vector<std::string> all = explore_mpi_gather(my_text);   // rank order, rank 0 only
#pragma once

#include <string>
#include <vector>

namespace jaxpp {

struct ExploreMpiWorld {
  int rank = 0;
  int size = 1;
  bool distributed() const { return size > 1; }
};

// {0, 1} unless launched by mpirun with more than one process; then MPI is initialised and the
// world rank and size are returned.
ExploreMpiWorld explore_mpi_world();

// Collective over MPI_COMM_WORLD (every rank must call it): rank 0 receives every rank's text in
// rank order, the other ranks an empty vector. Outside MPI, returns {mine}.
std::vector<std::string> explore_mpi_gather(const std::string& mine);

// Under MPI: prints `message` on stderr and ends every process of the job with `code`
// (MPI_Abort), for a failure on one rank that the others would wait on forever. Outside MPI:
// prints and exits.
[[noreturn]] void explore_mpi_abort(const std::string& message, int code);

}  // namespace jaxpp
