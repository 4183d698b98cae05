#include "exogym/runtime/checkpoint/state_digest.h"

#include <ATen/core/Tensor.h>

#include <string_view>

#include "exogym/runtime/util/hash.h"

namespace exogym::runtime::checkpoint {

namespace {

void add_text(util::Fnv1a& hash, std::string_view text) {
  // Length first, so that no two sequences of strings hash alike.
  hash.add_integer(static_cast<int64_t>(text.size()));
  hash.add(text);
}

}  // namespace

std::string state_digest(const output::NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  util::Fnv1a hash;
  for (const auto& [name, tensor] : tensors) {
    add_text(hash, name);
    add_text(hash, c10::toString(tensor.scalar_type()));
    hash.add_integer(tensor.dim());
    for (int64_t size : tensor.sizes()) hash.add_integer(size);
    add_text(hash, std::string_view(static_cast<const char*>(tensor.data_ptr()), tensor.nbytes()));
  }
  for (const auto& [key, value] : metadata) {
    if (key == kDigestKey) continue;
    add_text(hash, key);
    add_text(hash, value);
  }
  return hash.hex();
}

}  // namespace exogym::runtime::checkpoint
