#pragma once
// The tensor element types that model.pt, model.safetensors and checkpoints
// store, with each format's name for them: one table, so that every format
// stores the same dtypes.
#include <c10/core/ScalarType.h>

#include <cstring>

namespace exogym::runtime::util {

struct TensorDtype {
  at::ScalarType type;
  const char* safetensors;    // the safetensors header's "dtype", e.g. "F32"
  const char* torch_storage;  // the torch.<name> class torch.save names, e.g. "FloatStorage"
};

inline constexpr TensorDtype kTensorDtypes[] = {
    {at::kDouble, "F64", "DoubleStorage"},      {at::kFloat, "F32", "FloatStorage"}, {at::kHalf, "F16", "HalfStorage"},
    {at::kBFloat16, "BF16", "BFloat16Storage"}, {at::kLong, "I64", "LongStorage"},   {at::kInt, "I32", "IntStorage"},
    {at::kShort, "I16", "ShortStorage"},        {at::kChar, "I8", "CharStorage"},    {at::kByte, "U8", "ByteStorage"},
    {at::kBool, "BOOL", "BoolStorage"},
};

// The entry of `type`, or nullptr when the formats cannot store it.
inline const TensorDtype* find_dtype(at::ScalarType type) {
  for (const auto& d : kTensorDtypes) {
    if (d.type == type) return &d;
  }
  return nullptr;
}

// The entry whose safetensors name is `name`, or nullptr.
inline const TensorDtype* find_safetensors_dtype(const char* name) {
  for (const auto& d : kTensorDtypes) {
    if (std::strcmp(d.safetensors, name) == 0) return &d;
  }
  return nullptr;
}

}  // namespace exogym::runtime::util
