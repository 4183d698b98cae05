// Compiled only with EXOGYM_HAVE_NCCL (see cmake/Backends.cmake).
#include "exogym/runtime/comm/nccl_exchange.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <nccl.h>

#include <string>

#include "exogym/runtime/dist/process_mesh.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::comm {

namespace {

void check(ncclResult_t result, const std::string& what) {
  if (result == ncclSuccess) return;
  throw sdk::Error("NCCL " + what + " failed: " + ncclGetErrorString(result) +
                   " (NCCL refuses two processes on one GPU: give each process its own GPU, or keep the nodes of a GPU "
                   "in one process)");
}

ncclDataType_t nccl_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
#if NCCL_MAJOR > 2 || (NCCL_MAJOR == 2 && NCCL_MINOR >= 10)
    case at::kBFloat16:
      return ncclBfloat16;
#endif
    case at::kLong:
      return ncclInt64;
    case at::kInt:
      return ncclInt32;
    case at::kChar:
      return ncclInt8;
    case at::kByte:
      return ncclUint8;
    default:
      throw sdk::Error(std::string("NCCL all_reduce: unsupported dtype ") + c10::toString(type));
  }
}

ncclRedOp_t nccl_op(sdk::ReduceOp op) {
  switch (op) {
    case sdk::ReduceOp::Sum:
    case sdk::ReduceOp::Avg:
      return ncclSum;
    case sdk::ReduceOp::Min:
      return ncclMin;
    case sdk::ReduceOp::Max:
      return ncclMax;
  }
  return ncclSum;
}

}  // namespace

struct NcclExchange::Impl {
  ncclComm_t comm = nullptr;
};

NcclExchange::NcclExchange(dist::ProcessMesh& mesh, c10::Device device)
    : impl_(std::make_unique<Impl>()), device_(device) {
  ncclUniqueId id;
  if (mesh.rank() == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  mesh.broadcast(&id, sizeof id, 0, dist::ProcessMesh::Scope::Members);  // within a collective
  c10::cuda::CUDAGuard guard(device_);
  check(ncclCommInitRank(&impl_->comm, mesh.size(), id, mesh.rank()),
        "ncclCommInitRank on " + device_.str() + " of " + mesh.describe(mesh.rank()));
}

NcclExchange::~NcclExchange() {
  if (impl_->comm) ncclCommDestroy(impl_->comm);
}

void NcclExchange::all_reduce(at::Tensor& tensor, sdk::ReduceOp op) {
  c10::cuda::CUDAGuard guard(device_);
  auto stream = at::cuda::getCurrentCUDAStream(device_.index());
  check(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                      nccl_type(tensor.scalar_type()), nccl_op(op), impl_->comm, stream.stream()),
        "ncclAllReduce");
  // The local nodes read the result on their own streams next.
  C10_CUDA_CHECK(cudaStreamSynchronize(stream.stream()));
}

void NcclExchange::synchronize() {
  c10::cuda::CUDAGuard guard(device_);
  C10_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace exogym::runtime::comm
