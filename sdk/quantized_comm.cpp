#include "exogym/sdk/quantized_comm.h"

#include <ATen/ATen.h>

#include <string>

#include "exogym/sdk/error.h"

namespace exogym::sdk {

namespace {

// What the wire carries of `payloads`: each one's codes, then its scales.
std::vector<at::Tensor> wire_of(const std::vector<QuantizedPayload>& payloads) {
  std::vector<at::Tensor> wire;
  wire.reserve(2 * payloads.size());
  for (const auto& p : payloads) {
    wire.push_back(p.codes);
    wire.push_back(p.scales);
  }
  return wire;
}

// The key of a quantized mean's layout in a saved handle, a list of longs:
// format, block size, tensor count, then per tensor its dtype, its number of
// dimensions and its sizes.
const std::string kLayoutKey = "quantized_mean";

// A quantized mean on its way: what every node knows of the payloads
// without sending them (their format, block size, shapes, dtypes and
// devices), to make the means of what arrives: every rank's codes and
// scales, rank by rank (all_gather_async's list).
class QuantizedMeanDecoding final : public detail::Decoding {
 public:
  explicit QuantizedMeanDecoding(std::vector<QuantizedPayload> layout) : layout_(std::move(layout)) {}

  std::vector<at::Tensor> decode(const std::vector<at::Tensor>& arrived) const override {
    const size_t n = layout_.size();
    if (n == 0) return {};
    EXOGYM_CHECK_INTERNAL(arrived.size() % (2 * n) == 0, "a quantized mean got another tensor count");
    const size_t ranks = arrived.size() / (2 * n);
    std::vector<at::Tensor> means;
    means.reserve(n);
    std::vector<QuantizedPayload> column(ranks);
    for (size_t i = 0; i < n; ++i) {
      for (size_t r = 0; r < ranks; ++r) {
        column[r] = layout_[i];
        column[r].codes = arrived[r * 2 * n + 2 * i];
        column[r].scales = arrived[r * 2 * n + 2 * i + 1];
      }
      means.push_back(mean_of_payloads(column));
    }
    return means;
  }

  void save(StateDict& out, const std::string& prefix) const override {
    const QuantizedPayload first = layout_.empty() ? QuantizedPayload{} : layout_[0];
    std::vector<int64_t> layout{static_cast<int64_t>(first.format), first.block_size,
                                static_cast<int64_t>(layout_.size())};
    for (const auto& p : layout_) {
      layout.push_back(static_cast<int64_t>(p.dtype));
      layout.push_back(static_cast<int64_t>(p.shape.size()));
      layout.insert(layout.end(), p.shape.begin(), p.shape.end());
    }
    out[prefix + kLayoutKey] = at::tensor(layout, at::kLong);
  }

 private:
  std::vector<QuantizedPayload> layout_;  // the metadata only: the codes and scales arrive
};

std::vector<QuantizedPayload> quantize_all(const std::vector<at::Tensor>& tensors, QuantFormat format,
                                           int64_t block_size, ErrorFeedback* feedback) {
  std::vector<QuantizedPayload> payloads;
  payloads.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    payloads.push_back(feedback ? feedback->quantize(i, tensors[i], format, block_size)
                                : quantize(tensors[i], format, block_size));
  }
  return payloads;
}

}  // namespace

namespace detail {

std::shared_ptr<const Decoding> load_decoding(const StateDict& in, const std::string& prefix, c10::Device device) {
  auto it = in.find(prefix + kLayoutKey);
  if (it == in.end()) return nullptr;
  const std::string key = prefix + kLayoutKey;
  auto broken = [&](const std::string& why) {
    return Error("\"" + key + "\" is not a quantized mean's layout: " + why);
  };
  if (it->second.scalar_type() != at::kLong || it->second.dim() != 1) throw broken("not a list of integers");
  const at::Tensor values = it->second.contiguous();
  const int64_t* v = values.data_ptr<int64_t>();
  const int64_t size = values.numel();
  int64_t pos = 0;
  auto next = [&]() {
    if (pos >= size) throw broken("it ends early");
    return v[pos++];
  };
  const int64_t format = next(), block_size = next(), count = next();
  if (format < 0 || format > static_cast<int64_t>(QuantFormat::Int2))
    throw broken("no format " + std::to_string(format));
  if (block_size <= 0 || count < 0) throw broken("a block size or tensor count out of range");
  std::vector<QuantizedPayload> layout(static_cast<size_t>(count));
  for (auto& p : layout) {
    p.format = static_cast<QuantFormat>(format);
    p.block_size = block_size;
    const int64_t dtype = next(), dims = next();
    if (dtype < 0 || dtype >= static_cast<int64_t>(at::ScalarType::NumOptions) || dims < 0)
      throw broken("a dtype or dimension count out of range");
    p.dtype = static_cast<at::ScalarType>(dtype);
    p.device = device;
    for (int64_t d = 0; d < dims; ++d) p.shape.push_back(next());
  }
  if (pos != size) throw broken("it holds more than its tensors");
  return std::make_shared<QuantizedMeanDecoding>(std::move(layout));
}

}  // namespace detail

at::Tensor mean_of_payloads(const std::vector<QuantizedPayload>& by_rank) {
  EXOGYM_CHECK_INTERNAL(!by_rank.empty(), "mean_of_payloads needs at least one payload");
  at::Tensor sum = dequantize_float(by_rank[0]);
  for (size_t r = 1; r < by_rank.size(); ++r) sum.add_(dequantize_float(by_rank[r]));
  sum.div_(static_cast<double>(by_rank.size()));
  return sum.to(by_rank[0].device, by_rank[0].dtype);
}

Pending quantized_mean_async(Communicator& comm, const std::vector<at::Tensor>& tensors, QuantFormat format,
                             int64_t block_size, ErrorFeedback* feedback) {
  std::vector<QuantizedPayload> layout = quantize_all(tensors, format, block_size, feedback);
  Pending gathered = comm.all_gather_async(wire_of(layout));
  // Only the metadata stays: the payloads travel in the handle.
  for (auto& payload : layout) payload.codes = payload.scales = at::Tensor();
  return std::move(gathered).decoded_by(std::make_shared<QuantizedMeanDecoding>(std::move(layout)));
}

}  // namespace exogym::sdk
