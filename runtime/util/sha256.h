#pragma once
// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the rendezvous store
// authenticates processes with them (dist/store_server.h). Small and
// dependency-free; checked against the RFC 4231 test vectors.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace exogym::runtime::util {

using Digest = std::array<uint8_t, 32>;

Digest sha256(std::string_view data);
Digest hmac_sha256(std::string_view key, std::string_view message);

// Lowercase hexadecimal.
std::string hex(const Digest& digest);

// Compares in time independent of where they differ.
bool digests_equal(const Digest& a, const Digest& b);

}  // namespace exogym::runtime::util
