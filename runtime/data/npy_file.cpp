#include "exogym/runtime/data/npy_file.h"

#include <ATen/ops/from_blob.h>

#include <cctype>
#include <cstring>
#include <map>

#include "exogym/runtime/data/mapped_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

namespace {

struct Dtype {
  const char* code;  // without the byte-order character
  at::ScalarType type;
};

// What LibTorch can hold; unsigned types beyond uint8 it cannot.
constexpr Dtype kDtypes[] = {{"b1", at::kBool},  {"u1", at::kByte},  {"i1", at::kChar},
                             {"i2", at::kShort}, {"i4", at::kInt},   {"i8", at::kLong},
                             {"f2", at::kHalf},  {"f4", at::kFloat}, {"f8", at::kDouble}};

class HeaderReader {
 public:
  HeaderReader(std::string text, const std::filesystem::path& file) : text_(std::move(text)), file_(file) {}

  // The dict's entries, each value as written: 'x', True, (1, 2).
  std::map<std::string, std::string> entries() {
    std::map<std::string, std::string> out;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = quoted();
      skip_space();
      expect(':');
      skip_space();
      out[key] = value();
      skip_space();
      if (peek() == ',') ++at_;
    }
    return out;
  }

 private:
  sdk::DataError bad(const std::string& why) const {
    return sdk::DataError(file_.string() + ": not a .npy file numpy.save writes: its header " + why);
  }
  char peek() const {
    if (at_ >= text_.size()) throw bad("ends early");
    return text_[at_];
  }
  void skip_space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  void expect(char c) {
    if (peek() != c) throw bad(std::string("has '") + text_[at_] + "' where '" + c + "' belongs");
    ++at_;
  }
  std::string quoted() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') throw bad("has a key that is not a string");
    const size_t end = text_.find(quote, at_ + 1);
    if (end == std::string::npos) throw bad("has an unterminated string");
    std::string s = text_.substr(at_ + 1, end - at_ - 1);
    at_ = end + 1;
    return s;
  }
  std::string value() {
    const char c = peek();
    if (c == '\'' || c == '"') return quoted();
    const size_t begin = at_;
    if (c == '(') {
      const size_t end = text_.find(')', at_);
      if (end == std::string::npos) throw bad("has an unterminated tuple");
      at_ = end + 1;
    } else {
      while (at_ < text_.size() && std::isalnum(static_cast<unsigned char>(text_[at_]))) ++at_;
    }
    return text_.substr(begin, at_ - begin);
  }

  std::string text_;
  const std::filesystem::path& file_;
  size_t at_ = 0;
};

uint64_t little_endian(const unsigned char* p, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

std::vector<int64_t> shape_of(const std::string& tuple, const std::filesystem::path& file) {
  std::vector<int64_t> shape;
  std::string digits;
  for (size_t i = 1; i + 1 <= tuple.size(); ++i) {
    const char c = tuple[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
    } else if (c == ',' || c == ')') {
      if (!digits.empty()) {
        if (digits.size() > 18)
          throw sdk::DataError(file.string() + ": a dimension of shape " + tuple + " is too large");
        shape.push_back(std::stoll(digits));
      }
      digits.clear();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      throw sdk::DataError(file.string() + ": not a .npy file numpy.save writes: shape " + tuple);
    }
  }
  return shape;
}

}  // namespace

NpyArray read_npy(const std::filesystem::path& file) {
  auto mapped = std::make_shared<const MappedFile>(file);
  const unsigned char* bytes = mapped->data();
  const size_t size = mapped->size();
  if (size < 10 || std::memcmp(bytes, "\x93NUMPY", 6) != 0)
    throw sdk::DataError(file.string() + ": not a .npy file (no \\x93NUMPY magic string; numpy.save writes one)");
  const int major = bytes[6];
  if (major < 1 || major > 3)
    throw sdk::DataError(file.string() + ": .npy format version " + std::to_string(major) + "." +
                         std::to_string(bytes[7]) + ", this reader knows 1 to 3");
  const int length_bytes = major == 1 ? 2 : 4;
  const uint64_t header_length = little_endian(bytes + 8, length_bytes);
  const uint64_t data_offset = 8 + length_bytes + header_length;
  if (data_offset > size) throw sdk::DataError(file.string() + ": the .npy header is longer than the file");
  auto entries =
      HeaderReader(std::string(reinterpret_cast<const char*>(bytes) + 8 + length_bytes, header_length), file).entries();
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (!entries.count(key))
      throw sdk::DataError(file.string() + ": not a .npy file numpy.save writes: its header has no '" + key + "'");
  }
  const std::string descr = entries["descr"];
  if (entries["fortran_order"] != "False")
    throw sdk::DataError(file.string() + ": the array is in Fortran order; save it with numpy.ascontiguousarray");
  const Dtype* dtype = nullptr;
  const bool ordered = descr.size() == 3 && (descr[0] == '<' || descr[0] == '|' || descr[0] == '=');
  for (const Dtype& d : kDtypes)
    if (ordered && descr.compare(1, 2, d.code) == 0) dtype = &d;
  if (!dtype)
    throw sdk::DataError(file.string() + ": dtype '" + descr +
                         "' is not one ExoGym reads (bool, uint8, int8, int16, int32, int64, float16, float32, "
                         "float64, little-endian); convert it, e.g. array.astype(numpy.float32)");
  const std::vector<int64_t> shape = shape_of(entries["shape"], file);
  uint64_t expected = c10::elementSize(dtype->type);
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(expected, static_cast<uint64_t>(d), &expected))
      throw sdk::DataError(file.string() + ": shape " + entries["shape"] + " is too large");
  }
  if (size - data_offset != expected)
    throw sdk::DataError(file.string() + ": holds " + std::to_string(size - data_offset) + " bytes of data, shape " +
                         entries["shape"] + " of '" + descr + "' needs " + std::to_string(expected) + " (truncated?)");
  NpyArray array;
  array.file = mapped;
  array.descr = descr;
  // The mapping lives as long as any tensor over it.
  array.tensor = at::from_blob(
      const_cast<unsigned char*>(bytes + data_offset), shape, [mapped](void*) {},
      at::TensorOptions().dtype(dtype->type));
  return array;
}

}  // namespace exogym::runtime::data
