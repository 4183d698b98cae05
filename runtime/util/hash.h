#pragma once
// FNV-1a, 64 bits: a hash that gives the same digest on every host and build
// (std::hash does not), for values that the processes of one run compare:
// the run's fingerprint, the signature of a collective's tensors.
#include <cstdint>
#include <string>
#include <string_view>

namespace exogym::runtime::util {

class Fnv1a {
 public:
  // Hashes `bytes` in order, after what was hashed before.
  void add(std::string_view bytes);
  // Hashes the 8 bytes of `value`, least significant first, so that hosts of
  // either byte order agree.
  void add_integer(int64_t value);
  uint64_t digest() const { return hash_; }
  // The digest as 16 lowercase hex digits.
  std::string hex() const;

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;  // the FNV offset basis
};

}  // namespace exogym::runtime::util
