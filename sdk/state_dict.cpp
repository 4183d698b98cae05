#include "exogym/sdk/state_dict.h"

#include <ATen/core/grad_mode.h>
#include <c10/util/StringUtil.h>

#include "exogym/sdk/error.h"

namespace exogym::sdk {

const at::Tensor& state_tensor(const StateDict& in, const std::string& key) {
  auto it = in.find(key);
  if (it == in.end()) throw Error("strategy state: missing " + key);
  return it->second;
}

void save_tensors(StateDict& out, const std::string& prefix, const std::vector<at::Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) out[prefix + std::to_string(i)] = tensors[i];
}

void load_tensors(const StateDict& in, const std::string& prefix, std::vector<at::Tensor>& tensors) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string key = prefix + std::to_string(i);
    const at::Tensor& saved = state_tensor(in, key);
    // copy_ would broadcast a smaller tensor silently.
    if (!saved.sizes().equals(tensors[i].sizes()))
      throw Error("strategy state: " + key + " has the shape " + c10::str(saved.sizes()) + ", expected " +
                  c10::str(tensors[i].sizes()));
    tensors[i].copy_(saved);
  }
}

}  // namespace exogym::sdk
