// How the hierarchical backend lays tensors out in the bytes it sends
// between processes (comm/tensor_message.h).
#include <ATen/ATen.h>

#include <cstring>

#include "exogym/runtime/comm/tensor_message.h"
#include "testing.h"

using exogym::runtime::comm::pack_tensors;
using exogym::runtime::comm::TensorLayout;
using exogym::runtime::comm::unpack_tensors;

TEST_CASE("a tensor layout places blocks of tensors at aligned offsets of a byte buffer", "[collectives]") {
  const std::vector<at::Tensor> tensors = {at::arange(3, at::kFloat), at::arange(6, at::kLong).reshape({2, 3})};
  const TensorLayout layout(tensors);
  REQUIRE(layout.block_bytes() == 64 + 64);  // 12 and 48 bytes, each rounded up to 64
  at::Tensor buffer = at::zeros({2 * layout.block_bytes()}, at::kByte);
  for (int64_t block = 0; block < 2; ++block) {
    for (size_t i = 0; i < tensors.size(); ++i) layout.view(buffer, i, block).copy_(tensors[i] + block);
  }
  for (int64_t block = 0; block < 2; ++block) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const at::Tensor view = layout.view(buffer, i, block);
      REQUIRE(reinterpret_cast<uintptr_t>(view.data_ptr()) % 64 == reinterpret_cast<uintptr_t>(buffer.data_ptr()) % 64);
      REQUIRE(at::equal(view, tensors[i] + block));
    }
  }
}

TEST_CASE("a tensor message carries tensors of any shapes and dtypes and rejects malformed bytes", "[collectives]") {
  const std::vector<at::Tensor> tensors = {at::arange(5, at::kDouble), at::ones({2, 0, 3}, at::kFloat),
                                           at::full({}, 7, at::kLong), at::eye(3, at::kInt).t()};
  const at::Tensor message = pack_tensors(tensors);
  const auto back = unpack_tensors(message);
  REQUIRE(back.has_value());
  REQUIRE(back->size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO("tensor " << i);
    REQUIRE((*back)[i].scalar_type() == tensors[i].scalar_type());
    REQUIRE(at::equal((*back)[i], tensors[i]));
  }
  REQUIRE(unpack_tensors(pack_tensors({}))->empty());

  // Cut short, too long, or with metadata that points past its end.
  REQUIRE_FALSE(unpack_tensors(message.slice(0, 0, message.numel() - 64)).has_value());
  REQUIRE_FALSE(unpack_tensors(at::cat({message, at::zeros({64}, at::kByte)})).has_value());
  REQUIRE_FALSE(unpack_tensors(at::zeros({4}, at::kByte)).has_value());
  at::Tensor lying = message.clone();
  const int64_t words = 1000;
  std::memcpy(lying.data_ptr(), &words, sizeof words);
  REQUIRE_FALSE(unpack_tensors(lying).has_value());
}
