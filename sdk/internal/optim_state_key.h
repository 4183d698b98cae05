#pragma once
// The key under which a LibTorch optimizer keeps a parameter's state: a
// string in LibTorch 1.x, the TensorImpl pointer in 2.x. A detail of the
// SDK library, not of its contract: checkpoints (optim_state.cpp) and the
// fused AdamW (fused_adamw.cpp) look state up the way LibTorch's own
// optimizers do.
#include <ATen/core/Tensor.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace exogym::sdk::internal {

template <class State>
auto optimizer_state_key(const State& /*state*/, const at::Tensor& param) {
  using Key = typename std::decay_t<State>::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream key;  // how LibTorch 1.x prints the pointer (c10::guts::to_string, gone in 2.x)
    key << param.unsafeGetTensorImpl();
    return key.str();
  } else {
    return static_cast<Key>(param.unsafeGetTensorImpl());
  }
}

}  // namespace exogym::sdk::internal
