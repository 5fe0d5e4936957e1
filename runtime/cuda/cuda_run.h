// Entry points of the cuda backend for runtime/run.cc (compiled only with JAXPP_HAVE_CUDA). This
// header includes no CUDA or NCCL header.
//
// One Worker per (actor, replica), created on the thread that runs it: it picks the GPU, creates
// the CudaDevice (compute stream, cuBLAS, the project's kernels loaded), runs the compute once at
// the run's shapes with no communication in flight (warm_up_compute), then creates the
// NcclBackend (communicators, link streams) on top of a host `control` backend, and tears them
// down in the right order (NCCL first, after a barrier of every worker; nccl_backend.h).
//
// Usage (one process driving several GPUs; under mpirun the ids are made on rank 0 and
// broadcast, and `control` is the MpiBackend):
//   int devices = cuda::prepare_process();
//   CommPlan plan = make_comm_plan(program, dp);
//   std::vector<cuda::NcclId> ids = cuda::make_nccl_ids(plan.comms.size());
//   // on each worker thread:
//   cuda::Worker w(*control, assign_device(worker, workers, devices), worker, plan, ids, 30,
//                  &mlp);  // mlp: the MLP sizes to warm up at (nullptr: emulated compute)
//   MlpWorkload workload(mlp, actor, replica, program.stage_to_actor, w.device());
//   run_worker(program, w.backend(), workload, options);
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "runtime/backend.h"
#include "runtime/comm_plan.h"
#include "runtime/device.h"
#include "runtime/workload.h"

namespace jaxpp::cuda {

class CudaDevice;
class NcclBackend;

// Bytes of one ncclUniqueId (NCCL_UNIQUE_ID_BYTES, checked where nccl.h is included).
using NcclId = std::array<char, 128>;
// `count` fresh ids; the calling process hosts their bootstrap roots until every rank joined.
std::vector<NcclId> make_nccl_ids(size_t count);

// Number of visible GPUs; throws RuntimeFailure "--backend cuda: no CUDA device visible (...)"
// when there is none (or no driver).
int require_device();

// Call before any other CUDA or NCCL call of the process. Sets, unless the environment already
// does (a user's value wins):
//   CUDA_DEVICE_MAX_CONNECTIONS=32  the worker's compute, link and all-reduce streams get separate
//                                   hardware queues, so a waiting NCCL kernel cannot block a
//                                   compute kernel queued behind it
//   CUDA_MODULE_LOADING=EAGER       every kernel is loaded when the context is created; under lazy
//                                   loading (the default since CUDA 12.2) the first launch of a
//                                   kernel may need a context synchronisation, which a spinning
//                                   ncclRecv kernel, posted before the first compute, never allows
//   NCCL_NVLS_ENABLE=0              no NVLink SHARP set-up (multicast memory per communicator) for
//                                   the 2-rank point-to-point links, which cannot use it
// then returns require_device(). The variables are read when the CUDA context is created and
// when NCCL initialises, so they must be set before both (docs/cuda.md).
int prepare_process();

// A CUDA Device (runtime/cuda/cuda_device.h) on GPU `device_index` for code outside runtime/cuda
// (tests): the calling thread's current device becomes that GPU.
std::unique_ptr<Device> make_cuda_device(int device_index);

// Runs every kernel and cuBLAS GEMM layout of the MLP workload once at the shapes of `mlp` on
// scratch tensors of `device`, then synchronizes and frees them: GEMM kernels are chosen by shape,
// so this loads exactly the ones the steps will launch. Meant to run before any NCCL operation
// is in flight (Worker does it before creating the communicators).
void warm_up_compute(Device& device, const MlpConfig& mlp);

class Worker {
 public:
  // `worker_id` (replica * num_actors + actor) is the rank that CUDA/NCCL error messages name.
  // `warm_up`: the MLP sizes to run warm_up_compute at before any communicator exists; nullptr
  // when the run does no real compute (emulation, microbenchmarks).
  Worker(Backend& control, int device_index, int worker_id, const CommPlan& plan,
         const std::vector<NcclId>& ids, double timeout_s, const MlpConfig* warm_up = nullptr);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  Device& device();
  Backend& backend();

 private:
  std::unique_ptr<CudaDevice> device_;
  std::unique_ptr<NcclBackend> backend_;  // declared last: destroyed before the device
};

}  // namespace jaxpp::cuda
