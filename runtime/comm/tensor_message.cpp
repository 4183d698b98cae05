#include "exogym/runtime/comm/tensor_message.h"

#include <ATen/ATen.h>

#include <cstring>

namespace exogym::runtime::comm {

namespace {

constexpr int64_t kAlign = 64;
int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

int64_t tensor_bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

at::Tensor view_of(const at::Tensor& buffer, int64_t offset, at::IntArrayRef sizes, at::ScalarType dtype) {
  return at::from_blob(buffer.data_ptr<uint8_t>() + offset, sizes, at::TensorOptions().dtype(dtype));
}

constexpr int64_t kWord = static_cast<int64_t>(sizeof(int64_t));

}  // namespace

TensorLayout::TensorLayout(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    sizes_.push_back(t.sizes().vec());
    dtypes_.push_back(t.scalar_type());
    offsets_.push_back(block_bytes_);
    block_bytes_ += aligned(tensor_bytes(t));
  }
}

at::Tensor TensorLayout::view(const at::Tensor& buffer, size_t i, int64_t block) const {
  return view_of(buffer, block * block_bytes_ + offsets_[i], sizes_[i], dtypes_[i]);
}

at::Tensor pack_tensors(const std::vector<at::Tensor>& tensors) {
  std::vector<int64_t> meta;
  int64_t data_bytes = 0;
  for (const auto& t : tensors) {
    meta.push_back(static_cast<int64_t>(t.scalar_type()));
    meta.push_back(t.dim());
    for (int64_t s : t.sizes()) meta.push_back(s);
    data_bytes += aligned(tensor_bytes(t));
  }
  const int64_t head = aligned(static_cast<int64_t>(meta.size() + 1) * kWord);
  at::Tensor message = at::empty({head + data_bytes}, at::kByte);
  auto* words = reinterpret_cast<int64_t*>(message.data_ptr<uint8_t>());
  words[0] = static_cast<int64_t>(meta.size());
  // No tensors: no metadata, and memcpy from an empty vector's null data()
  // is undefined even for zero bytes (UBSan reported it).
  if (!meta.empty()) std::memcpy(words + 1, meta.data(), meta.size() * sizeof(int64_t));
  int64_t offset = head;
  for (const auto& t : tensors) {
    view_of(message, offset, t.sizes(), t.scalar_type()).copy_(t);
    offset += aligned(tensor_bytes(t));
  }
  return message;
}

std::optional<std::vector<at::Tensor>> unpack_tensors(const at::Tensor& message) {
  const int64_t bytes = message.numel();
  if (bytes < kWord) return std::nullopt;
  const auto* words = reinterpret_cast<const int64_t*>(message.data_ptr<uint8_t>());
  const int64_t end = 1 + words[0];  // one past the metadata, in words
  if (words[0] < 0 || end * kWord > bytes) return std::nullopt;
  std::vector<at::Tensor> tensors;
  int64_t at_word = 1;
  int64_t data = aligned(end * kWord);
  while (at_word < end) {
    if (at_word + 2 > end) return std::nullopt;
    const auto dtype = static_cast<at::ScalarType>(words[at_word++]);
    const int64_t dim = words[at_word++];
    if (dim < 0 || at_word + dim > end) return std::nullopt;
    const std::vector<int64_t> shape(words + at_word, words + at_word + dim);
    at_word += dim;
    at::Tensor t = view_of(message, data, shape, dtype);
    data += aligned(tensor_bytes(t));
    if (data > bytes) return std::nullopt;
    tensors.push_back(t);
  }
  if (data != bytes) return std::nullopt;
  return tensors;
}

}  // namespace exogym::runtime::comm
