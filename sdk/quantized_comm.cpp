#include "exogym/sdk/quantized_comm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "exogym/sdk/check.h"
#include "exogym/sdk/error.h"
#include "exogym/sdk/option_validation.h"
#include "exogym/sdk/options.h"

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

// The keys of a quantized mean's layout in a saved handle, one per
// collective, a list of longs: format, block size, tensor count, then per
// tensor its dtype, its number of dimensions and its sizes.
const char* layout_key(QuantCollective collective) {
  return collective == QuantCollective::Gather ? "quantized_mean" : "quantized_reduce_scatter";
}

// Values [begin, end) of `whole`, a payload of a flat tensor, as a payload
// of its own: begin is a multiple of the block size and of the codes in a
// byte (quant_chunk_length), so its codes and scales are slices.
QuantizedPayload slice(const QuantizedPayload& whole, int64_t begin, int64_t end) {
  QuantizedPayload part = whole;
  part.shape = {end - begin};
  // An empty chunk (a node past the tensor's end) holds nothing, even where
  // the tensor ends inside a block or a byte.
  if (end == begin) end = begin = 0;
  const int bits = quant_bits(whole.format);
  part.codes = whole.codes.slice(0, begin * bits / 8, (end * bits + 7) / 8);
  part.scales = whole.scales.slice(0, begin / whole.block_size, (end + whole.block_size - 1) / whole.block_size);
  return part;
}

// Chunk p of a tensor of `numel` values cut for `nodes` nodes.
std::pair<int64_t, int64_t> chunk_bounds(int64_t numel, int nodes, int p, const QuantizedPayload& like) {
  const int64_t c = quant_chunk_length(numel, nodes, like.format, like.block_size);
  return {std::min(numel, p * c), std::min(numel, (p + 1) * c)};
}

// A payload's codes and scales as they arrived, with what every node knows
// of it (its layout's format, block size, dtype and device, and `numel`).
QuantizedPayload arrived_payload(const QuantizedPayload& layout, int64_t numel, const at::Tensor& codes,
                                 const at::Tensor& scales) {
  QuantizedPayload p = layout;
  p.shape = {numel};
  p.codes = codes;
  p.scales = scales;
  return p;
}

// A quantized mean on its way: what every node knows of the payloads
// without sending them (their format, block size, shapes, dtypes and
// devices), to make the means of what arrives, rank by rank: every rank's
// codes and scales of every tensor (Gather), or every rank's mean chunk of
// every tensor (ReduceScatter).
class QuantizedMeanDecoding final : public detail::Decoding {
 public:
  QuantizedMeanDecoding(std::vector<QuantizedPayload> layout, QuantCollective collective)
      : layout_(std::move(layout)), collective_(collective) {}

  std::vector<at::Tensor> decode(const std::vector<at::Tensor>& arrived) const override {
    const size_t n = layout_.size();
    if (n == 0) return {};
    EXOGYM_CHECK_INTERNAL(arrived.size() % (2 * n) == 0, "a quantized mean got another tensor count");
    const size_t ranks = arrived.size() / (2 * n);
    std::vector<at::Tensor> means;
    means.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const QuantizedPayload& like = layout_[i];
      if (collective_ == QuantCollective::Gather) {
        std::vector<QuantizedPayload> column(ranks);
        for (size_t r = 0; r < ranks; ++r) {
          column[r] = like;
          column[r].codes = arrived[r * 2 * n + 2 * i];
          column[r].scales = arrived[r * 2 * n + 2 * i + 1];
        }
        means.push_back(mean_of_payloads(column));
        continue;
      }
      // Rank p's mean chunk p, in order: the tensor's values.
      const int64_t numel = like.numel();
      std::vector<at::Tensor> chunks;
      for (size_t p = 0; p < ranks; ++p) {
        const auto [begin, end] = chunk_bounds(numel, static_cast<int>(ranks), static_cast<int>(p), like);
        chunks.push_back(dequantize_float(
            arrived_payload(like, end - begin, arrived[p * 2 * n + 2 * i], arrived[p * 2 * n + 2 * i + 1])));
      }
      means.push_back(at::cat(chunks).reshape(like.shape).to(like.device, like.dtype));
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
    out[prefix + layout_key(collective_)] = at::tensor(layout, at::kLong);
  }

 private:
  std::vector<QuantizedPayload> layout_;  // the metadata only: the codes and scales arrive
  QuantCollective collective_;
};

// The payloads' metadata, without their codes and scales.
std::vector<QuantizedPayload> layout_of(std::vector<QuantizedPayload> payloads) {
  for (auto& payload : payloads) payload.codes = payload.scales = at::Tensor();
  return payloads;
}

Pending gathered_mean(Communicator& comm, const std::vector<QuantizedPayload>& payloads) {
  Pending gathered = comm.all_gather_async(wire_of(payloads));
  return std::move(gathered).decoded_by(
      std::make_shared<QuantizedMeanDecoding>(layout_of(payloads), QuantCollective::Gather));
}

// The reduce-scatter: chunk p of every payload to node p; there, the mean
// of the K chunks quantised once more; then every node's mean chunks to
// every node.
Pending reduce_scattered_mean(Communicator& comm, const std::vector<QuantizedPayload>& payloads) {
  const int nodes = comm.size();
  const size_t n = payloads.size();
  std::vector<at::Tensor> parts;  // node p's part: chunk p's codes and scales of every tensor
  parts.reserve(2 * n * static_cast<size_t>(nodes));
  for (int p = 0; p < nodes; ++p) {
    for (const auto& whole : payloads) {
      const auto [begin, end] = chunk_bounds(whole.numel(), nodes, p, whole);
      QuantizedPayload part = slice(whole, begin, end);
      parts.push_back(part.codes);
      parts.push_back(part.scales);
    }
  }
  std::vector<QuantizedPayload> layout = layout_of(payloads);
  const int me = comm.place();
  // This node's chunk of every tensor, from every node: their mean,
  // quantised once more.
  auto owner_means = [layout, n, nodes, me](std::vector<at::Tensor> arrived) {
    EXOGYM_CHECK_INTERNAL(arrived.size() == 2 * n * static_cast<size_t>(nodes),
                          "an all_to_all returned another tensor count");
    std::vector<QuantizedPayload> means;
    for (size_t i = 0; i < n; ++i) {
      const auto [begin, end] = chunk_bounds(layout[i].numel(), nodes, me, layout[i]);
      std::vector<QuantizedPayload> column(static_cast<size_t>(nodes));
      for (size_t r = 0; r < column.size(); ++r) {
        column[r] = arrived_payload(layout[i], end - begin, arrived[r * 2 * n + 2 * i], arrived[r * 2 * n + 2 * i + 1]);
        column[r].dtype = at::kFloat;
        column[r].device = at::kCPU;
      }
      means.push_back(quantize(mean_of_payloads(column), layout[i].format, layout[i].block_size));
    }
    return means;
  };
  return comm.all_to_all_async(parts).and_then([&comm, owner_means, layout](std::vector<at::Tensor> arrived) {
    Pending gathered = comm.all_gather_async(wire_of(owner_means(std::move(arrived))));
    return std::move(gathered).decoded_by(
        std::make_shared<QuantizedMeanDecoding>(layout, QuantCollective::ReduceScatter));
  });
}

}  // namespace

const char* to_string(QuantCollective collective) {
  return collective == QuantCollective::Gather ? "gather" : "reduce_scatter";
}

QuantCollective quant_collective_from_name(const std::string& name, const std::string& json_path) {
  if (name == "reduce_scatter") return QuantCollective::ReduceScatter;
  if (name == "gather") return QuantCollective::Gather;
  const std::string guess = closest_name(name, {"reduce_scatter", "gather"});
  throw ConfigError(json_path, "unknown collective \"" + name + "\"" +
                                   (guess.empty() ? "" : "; did you mean \"" + guess + "\"?") +
                                   " known: reduce_scatter, gather");
}

int64_t quant_chunk_length(int64_t numel, int nodes, QuantFormat format, int64_t block_size) {
  EXOGYM_CHECK_INTERNAL(nodes > 0 && block_size > 0 && numel >= 0, "quant_chunk_length's arguments");
  const int64_t unit = std::lcm(block_size, static_cast<int64_t>(8 / quant_bits(format)));
  const int64_t units = (numel + unit - 1) / unit;
  return (units + nodes - 1) / nodes * unit;
}

namespace detail {

std::shared_ptr<const Decoding> load_decoding(const StateDict& in, const std::string& prefix, c10::Device device) {
  QuantCollective collective = QuantCollective::Gather;
  auto it = in.find(prefix + layout_key(collective));
  if (it == in.end()) {
    collective = QuantCollective::ReduceScatter;
    it = in.find(prefix + layout_key(collective));
  }
  if (it == in.end()) return nullptr;
  const std::string key = prefix + layout_key(collective);
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
  return std::make_shared<QuantizedMeanDecoding>(std::move(layout), collective);
}

}  // namespace detail

at::Tensor mean_of_payloads(const std::vector<QuantizedPayload>& by_rank) {
  EXOGYM_CHECK_INTERNAL(!by_rank.empty(), "mean_of_payloads needs at least one payload");
  at::Tensor sum = dequantize_float(by_rank[0]);
  for (size_t r = 1; r < by_rank.size(); ++r) sum.add_(dequantize_float(by_rank[r]));
  sum.div_(static_cast<double>(by_rank.size()));
  return sum.to(by_rank[0].device, by_rank[0].dtype);
}

Pending quantized_mean_async(Communicator& comm, const std::vector<QuantizedPayload>& payloads,
                             QuantCollective collective) {
  for (const auto& p : payloads) {
    if (p.format != payloads[0].format || p.block_size != payloads[0].block_size)
      throw Error("quantized_mean_async: payloads in more than one format or block size");
  }
  return collective == QuantCollective::Gather ? gathered_mean(comm, payloads) : reduce_scattered_mean(comm, payloads);
}

}  // namespace exogym::sdk
