#include "exogym/runtime/output/model_pt.h"

#include <c10/core/ScalarType.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "exogym/runtime/util/atomic_file.h"
#include "exogym/runtime/util/exception_text.h"
#include "exogym/runtime/util/regular_file.h"
#include "exogym/runtime/util/tensor_dtypes.h"
#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::output {

namespace fs = std::filesystem;

namespace {

const char* storage_name(at::ScalarType type, const std::string& tensor) {
  if (const util::TensorDtype* dtype = util::find_dtype(type)) return dtype->torch_storage;
  throw sdk::Error("model.pt: tensor \"" + tensor + "\" has dtype " + std::string(c10::toString(type)) +
                   ", which model.pt cannot store");
}

// Pickle protocol 2 (torch.save's default), restricted to the opcodes that
// torch's weights_only unpickler accepts.
class Pickle {
 public:
  void proto() { bytes_ += "\x80\x02"; }
  void stop() { op('.'); }
  void mark() { op('('); }
  void tuple() { op('t'); }
  void empty_tuple() { op(')'); }
  void empty_dict() { op('}'); }
  void set_items() { op('u'); }
  void reduce() { op('R'); }
  void persistent_id() { op('Q'); }
  void false_value() { op('\x89'); }
  void global(std::string_view module, std::string_view name) {
    op('c');
    bytes_.append(module).append("\n").append(name).append("\n");
  }
  void text(std::string_view value) {
    op('X');
    little_endian(value.size(), 4);
    bytes_.append(value);
  }
  void integer(int64_t value) {
    if (value >= 0 && value < 256) {
      op('K');
      little_endian(static_cast<uint64_t>(value), 1);
    } else if (value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max()) {
      op('J');
      little_endian(static_cast<uint32_t>(static_cast<int32_t>(value)), 4);
    } else {
      op('\x8a');  // LONG1: a length byte, then two's complement
      little_endian(8, 1);
      little_endian(static_cast<uint64_t>(value), 8);
    }
  }
  void integers(at::IntArrayRef values) {
    mark();
    for (int64_t v : values) integer(v);
    tuple();
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void op(char code) { bytes_.push_back(code); }
  void little_endian(uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
  std::string bytes_;
};

// torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
// requires_grad, backward_hooks), the storage being persistent id
// ("storage", torch.<Type>Storage, key, "cpu", numel) as torch.save writes it.
void pickle_tensor(Pickle& p, const at::Tensor& tensor, const std::string& key, const std::string& name) {
  p.global("torch._utils", "_rebuild_tensor_v2");
  p.mark();
  p.mark();
  p.text("storage");
  p.global("torch", storage_name(tensor.scalar_type(), name));
  p.text(key);
  p.text("cpu");
  p.integer(tensor.numel());
  p.tuple();
  p.persistent_id();
  p.integer(0);
  p.integers(tensor.sizes());
  p.integers(tensor.strides());
  p.false_value();
  p.global("collections", "OrderedDict");
  p.empty_tuple();
  p.reduce();
  p.tuple();
  p.reduce();
}

}  // namespace

std::string model_pt_bytes(const NamedTensors& tensors) {
  std::vector<at::Tensor> stored;
  std::set<std::string> names;
  Pickle pickle;
  pickle.proto();
  pickle.empty_dict();
  pickle.mark();
  for (const auto& [name, tensor] : tensors) {
    EXOGYM_CHECK_INTERNAL(names.insert(name).second, "model.pt: tensor \"" + name + "\" appears twice");
    stored.push_back(tensor.detach().to(at::kCPU).contiguous());
    pickle.text(name);
    pickle_tensor(pickle, stored.back(), std::to_string(stored.size() - 1), name);
  }
  pickle.set_items();
  pickle.stop();

  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  writer.writeRecord("data.pkl", pickle.bytes().data(), pickle.bytes().size());
  // As torch.save (2.x) writes it, so that a big-endian reader swaps bytes.
  writer.writeRecord("byteorder", "little", 6);
  for (size_t i = 0; i < stored.size(); ++i)
    writer.writeRecord("data/" + std::to_string(i), stored[i].data_ptr(), stored[i].nbytes());
  writer.writeEndOfFile();
  return out;
}

void write_model_pt(const fs::path& file, const NamedTensors& tensors) {
  util::write_file_atomically(file, model_pt_bytes(tensors));
}

NamedTensors read_model_pt(const fs::path& file) {
  // A regular file only (not /dev/zero, which never ends, nor a FIFO).
  const std::string text = util::read_regular_file(file);
  const std::vector<char> bytes(text.begin(), text.end());
  NamedTensors out;
  try {
    if (bytes.empty()) throw std::runtime_error("the file is empty");
    const auto value = torch::jit::pickle_load(bytes);
    for (const auto& item : value.toGenericDict()) out.emplace_back(item.key().toStringRef(), item.value().toTensor());
  } catch (const std::exception&) {
    // LibTorch's message without its stack trace, and its first line only:
    // the user's file is at fault, not the program.
    std::string why = util::current_exception_text();
    why = why.substr(0, why.find('\n'));
    throw sdk::DataError(file.string() + ": not a {name: tensor} dict saved by exogym-run or torch.save: " + why);
  }
  return out;
}

}  // namespace exogym::runtime::output
