#pragma once
// SHA-256 and HMAC-SHA256: the rendezvous store authenticates processes with
// them (dist/store_server.h). OpenSSL's libcrypto computes them (a library
// kept and reviewed for this, not code of ours); checked against the FIPS
// 180-4 and RFC 4231 test vectors.
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

// Compare in time independent of where they differ (CRYPTO_memcmp): a
// proof checked byte by byte with early exit would tell an attacker how many
// leading bytes were right. Sizes are not secret and compared first.
bool digests_equal(const Digest& a, const Digest& b);
bool bytes_equal(std::string_view a, std::string_view b);

}  // namespace exogym::runtime::util
