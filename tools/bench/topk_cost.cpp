#include "bench/topk_cost.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/table.h"
#include "exogym/modules/compression/chunk_topk.h"

namespace exogym::bench {

using nlohmann::json;

namespace {

uint32_t magnitude_key(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits & 0x7fffffffu;
}

// The selection chunk_topk made before select_topk: the same order (larger
// magnitude, then lower offset), by nth_element and a sort of the k kept.
void nth_element_select(const float* row, int64_t n, int64_t k, std::vector<int64_t>& order, int64_t* offsets) {
  order.resize(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  auto before = [row](int64_t a, int64_t b) {
    const uint32_t ka = magnitude_key(row[a]), kb = magnitude_key(row[b]);
    return ka != kb ? ka > kb : a < b;
  };
  if (k < n) std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
  std::sort(order.begin(), order.begin() + k);
  std::copy(order.begin(), order.begin() + k, offsets);
}

template <class Select>
double fastest_ms(int repeats, Select select) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    select();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

json topk_section(const BenchOptions& o) {
  const int64_t values = o.quick ? (int64_t{1} << 16) : (int64_t{1} << 22);
  const int repeats = o.quick ? 1 : 5;
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  at::Generator generator = at::detail::createCPUGenerator(7);
  const at::Tensor x = at::randn({values}, generator);
  const float* data = x.data_ptr<float>();
  json rows = json::array();
  std::vector<std::vector<std::string>> table;
  for (int64_t chunk : {int64_t{64}, int64_t{4096}}) {
    for (double density : {0.03, 0.25}) {
      const int64_t k = modules::topk_per_chunk(chunk, density), chunks = values / chunk;
      std::vector<int64_t> by_nth(static_cast<size_t>(chunks * k)), by_select(by_nth.size()), order;
      modules::TopkScratch scratch;
      const double nth_ms = fastest_ms(repeats, [&] {
        for (int64_t c = 0; c < chunks; ++c) nth_element_select(data + c * chunk, chunk, k, order, &by_nth[c * k]);
      });
      const double select_ms = fastest_ms(repeats, [&] {
        for (int64_t c = 0; c < chunks; ++c)
          modules::select_topk(data + c * chunk, chunk, k, &by_select[c * k], scratch);
      });
      if (by_nth != by_select) throw std::runtime_error("topk: select_topk and nth_element chose differently");
      rows.push_back({{"chunk", chunk},
                      {"density", density},
                      {"k", k},
                      {"values", values},
                      {"nth_element_ms", nth_ms},
                      {"select_topk_ms", select_ms}});
      table.push_back({std::to_string(chunk), fmt(density * 100, 0) + " %", std::to_string(k), fmt(nth_ms, 1),
                       fmt(select_ms, 1), fmt(nth_ms / select_ms, 1)});
    }
  }
  at::set_num_threads(threads);
  std::cout << "chunk-wise top-k of " << values << " values on one thread (ms, fastest of " << repeats << "):\n";
  print_table({"chunk", "density", "k", "nth_element", "select_topk", "speed-up"}, table);
  return rows;
}

}  // namespace exogym::bench
