#include "exogym/runtime/util/hash.h"

#include <cstdio>

namespace exogym::runtime::util {

namespace {

constexpr uint64_t kPrime = 0x100000001b3ULL;

}  // namespace

void Fnv1a::add(std::string_view bytes) {
  for (unsigned char c : bytes) {
    hash_ ^= c;
    hash_ *= kPrime;
  }
}

void Fnv1a::add_integer(int64_t value) {
  for (int i = 0; i < 8; ++i) {
    hash_ ^= static_cast<uint64_t>(value >> (8 * i)) & 0xff;
    hash_ *= kPrime;
  }
}

std::string Fnv1a::hex() const {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash_));
  return text;
}

}  // namespace exogym::runtime::util
