#include "exogym/runtime/sim/adversarial_communicator.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <utility>

#include "exogym/sdk/random.h"

namespace exogym::runtime::sim {

namespace {

// derive_seed's stream of the noise attack ("ADVERS").
constexpr uint64_t kNoiseStream = 0x414456455253ULL;

}  // namespace

AdversarialCommunicator::AdversarialCommunicator(sdk::Communicator& inner, std::vector<AdversarySpec> mine,
                                                 uint64_t run_seed, const int64_t* step)
    : inner_(inner), mine_(std::move(mine)), run_seed_(run_seed), step_(step) {}

std::vector<at::Tensor> AdversarialCommunicator::outgoing(const std::vector<at::Tensor>& tensors) {
  const int64_t step = *step_;
  if (step != call_step_) {
    call_step_ = step;
    calls_ = 0;
  }
  const uint64_t call = calls_++;
  const AdversarySpec* active = nullptr;
  for (const auto& spec : mine_) {
    if (spec.active(step)) active = &spec;  // the last active entry wins
  }
  if (!active) return tensors;
  at::NoGradGuard no_grad;
  const uint64_t key = sdk::derive_seed(
      run_seed_, kNoiseStream,
      (static_cast<uint64_t>(step) * static_cast<uint64_t>(inner_.size()) + static_cast<uint64_t>(inner_.rank())));
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!t.defined() || !at::isFloatingType(t.scalar_type())) {
      out.push_back(t);
      continue;
    }
    switch (active->attack) {
      case Attack::SignFlip:
        out.push_back(t.detach().mul(-active->scale));
        break;
      case Attack::Constant:
        out.push_back(at::full_like(t.detach(), active->scale));
        break;
      case Attack::Noise: {
        // Drawn on the CPU in fp32, so the same on every device.
        at::Generator gen = at::detail::createCPUGenerator(sdk::derive_seed(key, call, i));
        const at::Tensor noise = at::randn(t.sizes(), gen, at::TensorOptions().dtype(at::kFloat));
        out.push_back(t.detach() + noise.mul_(active->scale).to(t.device(), t.scalar_type()));
        break;
      }
    }
  }
  return out;
}

namespace {

// An in-place collective's results, from the corrupted copies that went
// out back into the caller's tensors.
void copy_back(std::vector<at::Tensor>& tensors, const std::vector<at::Tensor>& sent) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!sent[i].is_same(tensors[i])) tensors[i].detach().copy_(sent[i]);
  }
}

}  // namespace

void AdversarialCommunicator::all_reduce(std::vector<at::Tensor>& tensors, sdk::ReduceOp op) {
  std::vector<at::Tensor> sent = outgoing(tensors);
  inner_.all_reduce(sent, op);
  copy_back(tensors, sent);
}

void AdversarialCommunicator::group_all_reduce(const std::vector<int>& members, std::vector<at::Tensor>& tensors,
                                               sdk::ReduceOp op) {
  std::vector<at::Tensor> sent = outgoing(tensors);
  inner_.group_all_reduce(members, sent, op);
  copy_back(tensors, sent);
}

std::vector<std::vector<at::Tensor>> AdversarialCommunicator::group_all_gather(const std::vector<int>& members,
                                                                               const std::vector<at::Tensor>& tensors) {
  return inner_.group_all_gather(members, outgoing(tensors));
}

std::vector<at::Tensor> AdversarialCommunicator::exchange(int peer, const std::vector<at::Tensor>& tensors) {
  return inner_.exchange(peer, outgoing(tensors));
}

sdk::SharedTensors AdversarialCommunicator::all_reduce_shared(const std::vector<at::Tensor>& tensors,
                                                              sdk::ReduceOp op) {
  return inner_.all_reduce_shared(outgoing(tensors), op);
}

void AdversarialCommunicator::broadcast(std::vector<at::Tensor>& tensors, int root) {
  if (root != rank()) return inner_.broadcast(tensors, root);
  // The root keeps its own values; the others receive the corrupted ones.
  std::vector<at::Tensor> sent = outgoing(tensors);
  inner_.broadcast(sent, root);
}

std::vector<std::vector<at::Tensor>> AdversarialCommunicator::all_gather(const std::vector<at::Tensor>& tensors) {
  return inner_.all_gather(outgoing(tensors));
}

sdk::Pending AdversarialCommunicator::all_reduce_async(const std::vector<at::Tensor>& tensors, sdk::ReduceOp op) {
  return inner_.all_reduce_async(outgoing(tensors), op);
}

sdk::Pending AdversarialCommunicator::all_gather_async(const std::vector<at::Tensor>& tensors) {
  return inner_.all_gather_async(outgoing(tensors));
}

sdk::Pending AdversarialCommunicator::all_to_all_async(const std::vector<at::Tensor>& tensors) {
  return inner_.all_to_all_async(outgoing(tensors));
}

}  // namespace exogym::runtime::sim
