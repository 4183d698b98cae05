#include "exogym/runtime/dist/run_secret.h"

#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "exogym/sdk/error.h"

namespace exogym::runtime::dist {

namespace {

constexpr long kMaxSecretFile = 4096;

std::string read_secret_file(const std::string& file) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    throw sdk::ConfigError(kSecretFileVariable, "cannot read \"" + file + "\": " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode) || info.st_size > kMaxSecretFile) {
    throw sdk::ConfigError(kSecretFileVariable, "\"" + file + "\" is not a regular file of at most " +
                                                    std::to_string(kMaxSecretFile) + " bytes");
  }
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw sdk::ConfigError(kSecretFileVariable, "cannot read \"" + file + "\"");
  std::string secret = text.str();
  // An editor's or echo's final newline is not part of the secret.
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) throw sdk::ConfigError(kSecretFileVariable, "\"" + file + "\" is empty");
  return secret;
}

}  // namespace

std::string run_secret_from_environment() {
  const char* value = std::getenv(kSecretVariable);
  const char* file = std::getenv(kSecretFileVariable);
  const bool has_value = value && *value, has_file = file && *file;
  if (has_value && has_file) {
    throw sdk::ConfigError(kSecretFileVariable, std::string("set either it or ") + kSecretVariable + ", not both");
  }
  if (has_file) return read_secret_file(file);
  return has_value ? value : "";
}

std::string generate_run_secret() {
  unsigned char bytes[32];
  size_t done = 0;
  while (done < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + done, sizeof bytes - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sdk::Error(std::string("cannot draw a run secret from the kernel: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  static const char* digits = "0123456789abcdef";
  std::string secret;
  for (unsigned char b : bytes) {
    secret += digits[b >> 4];
    secret += digits[b & 15];
  }
  return secret;
}

}  // namespace exogym::runtime::dist
