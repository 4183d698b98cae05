#pragma once
// NCCL between processes, for all-reduces of CUDA tensors in the
// hierarchical backend: each process reduces its nodes' tensors on its GPU,
// then one NCCL all-reduce combines the processes' partial results without
// a trip through host memory. Built only with EXOGYM_HAVE_NCCL (a CUDA
// LibTorch and NCCL found at configure time); other collectives of CUDA
// tensors go through Gloo, staged in host memory.
//
// NCCL refuses two ranks on one GPU, so each process must use its own GPU:
// all nodes that share a GPU stay in one process and are reduced there
// first. NCCL has no timeouts of its own: a lost peer is still detected by
// the ProcessMesh heartbeat, but a process blocked inside an NCCL call only
// ends when the launcher terminates it.
//
// Not compiled or tested on the development machine (no CUDA there).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>

#include "exogym/sdk/comm.h"

namespace exogym::runtime::dist {
class ProcessMesh;
}

namespace exogym::runtime::comm {

class NcclExchange {
 public:
  // Every process calls this at the same point; process 0 makes the NCCL id
  // and the mesh carries it to the others. Throws sdk::Error.
  NcclExchange(dist::ProcessMesh& mesh, c10::Device device);
  ~NcclExchange();
  NcclExchange(const NcclExchange&) = delete;
  NcclExchange& operator=(const NcclExchange&) = delete;

  const c10::Device& device() const { return device_; }
  // In place: op over the processes' `tensor` (contiguous, on device());
  // Avg is reduced as Sum (the caller divides by the node count).
  void all_reduce(at::Tensor& tensor, sdk::ReduceOp op);
  // Waits for all work on the device: the nodes wrote their tensors on
  // their own streams.
  void synchronize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  c10::Device device_;
};

}  // namespace exogym::runtime::comm
