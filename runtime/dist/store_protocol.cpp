#include "exogym/runtime/dist/store_protocol.h"

#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>

#include "exogym/runtime/util/sha256.h"

namespace exogym::runtime::dist::store_protocol {

namespace {

bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool receive_all(int fd, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::recv(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string length_bytes(size_t size) {
  std::string out(4, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  return out;
}

uint32_t read_length(const char* bytes) {
  uint32_t size = 0;
  for (int i = 0; i < 4; ++i) size |= uint32_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return size;
}

}  // namespace

bool send_frame(int fd, std::string_view payload) {
  if (payload.size() > kMaxFrame) return false;
  const std::string message = length_bytes(payload.size()) + std::string(payload);
  return send_all(fd, message.data(), message.size());
}

bool receive_frame(int fd, std::string& payload) {
  char header[4];
  if (!receive_all(fd, header, sizeof header)) return false;
  const uint32_t size = read_length(header);
  if (size > kMaxFrame) return false;
  payload.resize(size);
  return receive_all(fd, payload.data(), size);
}

void put_field(std::string& out, std::string_view field) {
  out += length_bytes(field.size());
  out += field;
}

bool take_field(std::string_view& in, std::string& field) {
  if (in.size() < 4) return false;
  const uint32_t size = read_length(in.data());
  if (in.size() - 4 < size) return false;
  field.assign(in.substr(4, size));
  in.remove_prefix(4 + size);
  return true;
}

std::string random_nonce() {
  std::string nonce(kNonceSize, '\0');
  size_t done = 0;
  while (done < nonce.size()) {
    const ssize_t n = ::getrandom(nonce.data() + done, nonce.size() - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {};
    done += static_cast<size_t>(n);
  }
  return nonce;
}

std::string proof(const std::string& secret, std::string_view role, std::string_view nonce) {
  const util::Digest digest = util::hmac_sha256(secret, std::string(role) + std::string(nonce));
  return std::string(digest.begin(), digest.end());
}

}  // namespace exogym::runtime::dist::store_protocol
