// Entry points of the cuda backend for runtime/run.cc (compiled only with JAXPP_HAVE_CUDA). This
// header includes no CUDA or NCCL header.
//
// One Worker per (actor, replica), created on the thread that runs it: it picks the GPU, creates
// the CudaDevice (compute stream, cuBLAS) and the NcclBackend (communicators, link streams) on top
// of a host `control` backend, and tears them down in the right order (NCCL first).
//
// Usage (one process driving several GPUs; under mpirun the ids are made on rank 0 and
// broadcast, and `control` is the MpiBackend):
//   int devices = cuda::prepare_process();
//   CommPlan plan = make_comm_plan(program, dp);
//   std::vector<cuda::NcclId> ids = cuda::make_nccl_ids(plan.comms.size());
//   // on each worker thread:
//   cuda::Worker w(*control, assign_device(worker, workers, devices), worker, plan, ids, 30);
//   MlpWorkload workload(mlp, actor, replica, program.stage_to_actor, w.device());
//   run_worker(program, w.backend(), workload, options);
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "runtime/backend.h"
#include "runtime/comm_plan.h"
#include "runtime/device.h"

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

// Sets CUDA_DEVICE_MAX_CONNECTIONS=32 unless the environment sets it (the worker's compute, link
// and all-reduce streams then get separate hardware queues, so a waiting NCCL kernel cannot
// block a compute kernel queued behind it; it must happen before the first CUDA context), then
// returns require_device().
int prepare_process();

class Worker {
 public:
  // `worker_id` (replica * num_actors + actor) is the rank that CUDA/NCCL error messages name.
  Worker(Backend& control, int device_index, int worker_id, const CommPlan& plan,
         const std::vector<NcclId>& ids, double timeout_s);
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
