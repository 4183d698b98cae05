#include "exogym/runtime/util/sha256.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <stdexcept>

namespace exogym::runtime::util {

namespace {

const unsigned char* bytes_of(std::string_view text) { return reinterpret_cast<const unsigned char*>(text.data()); }

}  // namespace

Digest sha256(std::string_view data) {
  Digest digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1 || size != digest.size())
    throw std::runtime_error("OpenSSL's SHA-256 failed");
  return digest;
}

Digest hmac_sha256(std::string_view key, std::string_view message) {
  Digest digest{};
  unsigned int size = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), bytes_of(message), message.size(), digest.data(),
            &size) ||
      size != digest.size())
    throw std::runtime_error("OpenSSL's HMAC-SHA256 failed");
  return digest;
}

std::string hex(const Digest& digest) {
  static const char* const kDigits = "0123456789abcdef";
  std::string text;
  for (uint8_t byte : digest) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

bool digests_equal(const Digest& a, const Digest& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

bool bytes_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace exogym::runtime::util
