#pragma once
// Named tensors from one process to all the others, outside the collectives
// (a recovering node's state, the final model): names and tensors of any
// shapes and dtypes, as one message (tensor_message.h).
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace exogym::runtime::dist {
class ProcessMesh;
}

namespace exogym::runtime::comm {

using NamedTensorList = std::vector<std::pair<std::string, at::Tensor>>;

// Every process calls it; process `root` passes `tensors` and gets them
// back, the others get copies (on the CPU) of root's. `what` names them in
// the error when the message is malformed.
NamedTensorList broadcast_named_tensors(dist::ProcessMesh& mesh, int root, const NamedTensorList& tensors,
                                        const std::string& what);

}  // namespace exogym::runtime::comm
