#pragma once
// model.pt: the format of Python's torch.save(state_dict) — a zip archive
// with a pickled {name: tensor} dict (data.pkl) and each tensor's bytes
// (data/<n>). The pickle is a plain dict of torch._utils._rebuild_tensor_v2
// calls on typed storages, nothing else, so torch.load(path,
// weights_only=True) accepts it in PyTorch 1.13 and 2.x. LibTorch's
// torch::pickle_save is not used: it tags typed dicts with
// torch.jit._pickle.restore_type_tag, which weights_only refuses.
#include <filesystem>
#include <string>

#include "exogym/runtime/output/safetensors.h"

namespace exogym::runtime::output {

// The file's bytes; tensors are stored in the order given (moved to the CPU,
// made contiguous), bit for bit. Names must be unique. A dtype torch.save
// has no typed storage for here (complex, quantized) is an sdk::Error.
std::string model_pt_bytes(const NamedTensors& tensors);

// Writes the file atomically (see atomic_file.h).
void write_model_pt(const std::filesystem::path& file, const NamedTensors& tensors);

// Reads a {name: tensor} dict that this writer or Python's torch.save made,
// in the file's order. A missing file, or one that is not such a dict, is an
// sdk::DataError naming the file.
NamedTensors read_model_pt(const std::filesystem::path& file);

}  // namespace exogym::runtime::output
