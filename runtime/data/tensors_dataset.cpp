#include "exogym/runtime/data/tensors_dataset.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <system_error>

#include "exogym/runtime/data/mapped_file.h"
#include "exogym/runtime/data/npy_file.h"
#include "exogym/runtime/util/safetensors_layout.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool has_extension(const fs::path& file, const char* extension) { return file.extension() == extension; }

std::vector<fs::path> npy_files(const fs::path& folder) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec))
    if (entry.is_regular_file(ec) && has_extension(entry.path(), ".npy")) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The tensor files `split` reads under `path`: a .safetensors or .npy file
// as given; in a folder, <split>.safetensors or <split>/ first (unless one
// set of files is cut by a fraction), then the folder's own .npy files or
// its one .safetensors file.
std::vector<fs::path> files_of(const fs::path& path, const std::string& split, bool fraction) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    if (has_extension(path, ".safetensors") || has_extension(path, ".npy")) return {path};
    throw sdk::DataError(path.string() + ": not a .safetensors or .npy file (or a folder of .npy files)");
  }
  if (!fs::is_directory(path, ec)) throw sdk::DataError(path.string() + ": no such file or folder");
  if (!fraction) {
    if (fs::is_regular_file(path / (split + ".safetensors"), ec)) return {path / (split + ".safetensors")};
    if (fs::is_directory(path / split, ec)) {
      auto files = npy_files(path / split);
      if (!files.empty()) return files;
    }
  }
  if (auto files = npy_files(path); !files.empty()) return files;
  std::vector<fs::path> safetensors;
  for (const auto& entry : fs::directory_iterator(path, ec))
    if (entry.is_regular_file(ec) && has_extension(entry.path(), ".safetensors")) safetensors.push_back(entry.path());
  if (safetensors.size() == 1) return safetensors;
  throw sdk::DataError(path.string() + ": no tensor files for split \"" + split + "\": expected " +
                       (fraction ? std::string() : split + ".safetensors, a folder " + split + "/ of .npy files, ") +
                       ".npy files (one per field) or one .safetensors file");
}

// A CPU tensor over `bytes` of `mapped`, keeping the mapping alive.
at::Tensor tensor_view_of(const std::shared_ptr<const MappedFile>& mapped, uint64_t offset,
                          const util::SafetensorsEntry& e) {
  return at::from_blob(
      const_cast<unsigned char*>(mapped->data() + offset), e.shape, [mapped](void*) {},
      at::TensorOptions().dtype(e.type));
}

}  // namespace

sdk::OptionSpecs TensorsDataset::option_specs() {
  return {
      {"split_fraction", sdk::OptionType::Fraction, nullptr,
       "cut one set of files: the first fraction of the examples is \"train\", the rest every other split; null: each "
       "split has its own files"},
      {"label_field", sdk::OptionType::NonEmptyString, "target",
       "the field holding each example's class (one integer per example), for label partitions and data.csv"},
  };
}

TensorsOptions TensorsDataset::options_from_json(const json& options) {
  TensorsOptions o;
  if (!options.at("split_fraction").is_null()) o.split_fraction = options.at("split_fraction").get<double>();
  o.label_field = options.at("label_field").get<std::string>();
  return o;
}

TensorsDataset::TensorsDataset(const fs::path& path, const std::string& split, const TensorsOptions& options)
    : label_field_(options.label_field) {
  for (const fs::path& file : files_of(path, split, options.split_fraction.has_value())) {
    auto add = [&](const std::string& field, const at::Tensor& tensor) {
      if (!files_.emplace(field, file).second)
        throw sdk::DataError(file.string() + ": field \"" + field + "\" is also in " + files_.at(field).string());
      fields_.emplace(field, tensor);
    };
    if (has_extension(file, ".npy")) {
      NpyArray array = read_npy(file);
      mapped_.push_back(array.file);
      add(file.stem().string(), array.tensor);
      continue;
    }
    auto mapped = std::make_shared<const MappedFile>(file);
    mapped_.push_back(mapped);
    const auto layout = util::parse_safetensors(mapped->data(), mapped->size(), file.string());
    for (const auto& e : layout.entries) add(e.name, tensor_view_of(mapped, layout.data_offset + e.begin, e));
  }
  if (fields_.empty()) throw sdk::DataError(path.string() + ": no tensors in it");
  // Every field has one row per example.
  const auto& [first_name, first] = *fields_.begin();
  for (const auto& [field, tensor] : fields_) {
    const std::string where = files_.at(field).string() + ": field \"" + field + "\"";
    if (tensor.dim() < 1) throw sdk::DataError(where + " is a scalar; expected one row per example");
    if (tensor.size(0) != first.size(0))
      throw sdk::DataError(where + " has " + std::to_string(tensor.size(0)) + " examples, field \"" + first_name +
                           "\" (" + files_.at(first_name).string() + ") " + std::to_string(first.size(0)));
  }
  int64_t begin = 0, end = first.size(0);
  if (options.split_fraction) {
    const auto cut = static_cast<int64_t>(std::floor(*options.split_fraction * static_cast<double>(end)));
    (split == "train" ? end : begin) = cut;
  }
  count_ = end - begin;
  if (count_ <= 0)
    throw sdk::DataError(
        path.string() + ": split \"" + split + "\" has no examples" +
        (options.split_fraction ? " (split_fraction " + std::to_string(*options.split_fraction) + ")" : std::string()));
  for (auto& [field, tensor] : fields_) {
    tensor = tensor.narrow(0, begin, count_);
    // One pass over the data, once: NaN would only show as a NaN loss, late.
    if (at::isFloatingType(tensor.scalar_type()) && !at::isfinite(tensor).all().item<bool>())
      throw sdk::DataError(files_.at(field).string() + ": field \"" + field +
                           "\" holds NaN or infinite values; expected finite numbers");
  }
}

sdk::Batch TensorsDataset::get(const std::vector<int64_t>& indices) const {
  const at::Tensor index = at::tensor(indices, at::kLong);
  sdk::Batch batch;
  for (const auto& [field, tensor] : fields_) batch[field] = tensor.index_select(0, index);
  return batch;
}

std::optional<std::vector<int64_t>> TensorsDataset::all_labels() const {
  auto it = fields_.find(label_field_);
  if (it == fields_.end() || it->second.dim() != 1 ||
      !at::isIntegralType(it->second.scalar_type(), /*includeBool=*/false))
    return std::nullopt;
  const at::Tensor labels = it->second.to(at::kLong).contiguous();
  return std::vector<int64_t>(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + labels.numel());
}

}  // namespace exogym::runtime::data
