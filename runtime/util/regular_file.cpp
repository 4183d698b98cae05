#include "exogym/runtime/util/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exogym/sdk/error.h"

namespace exogym::runtime::util {

namespace fs = std::filesystem;

namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string open_problem(int error) {
  if (error == ELOOP) return "a loop of symbolic links";
  if (error == ENOENT) return "missing";
  return std::string("cannot open: ") + std::strerror(error);
}

}  // namespace

PathKind path_kind(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno == ENOENT || errno == ENOTDIR ? PathKind::Missing : PathKind::Other;
  if (S_ISREG(st.st_mode)) return PathKind::Regular;
  return S_ISDIR(st.st_mode) ? PathKind::Directory : PathKind::Other;
}

int open_regular_file(const fs::path& file) {
  // O_NONBLOCK: opening a FIFO returns at once instead of waiting for a
  // writer; what is opened is then checked before a byte is read.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw sdk::DataError(file.string() + ": " + open_problem(errno));
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::string("cannot read: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = kind_of(st.st_mode) + ", not a regular file";
  }
  if (!problem.empty()) {
    ::close(fd);
    throw sdk::DataError(file.string() + ": " + problem);
  }
  return fd;
}

std::string read_regular_file(const fs::path& file, uintmax_t max_bytes) {
  const int fd = open_regular_file(file);
  struct stat st {};
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::string("cannot read: ") + std::strerror(errno);
  } else if (static_cast<uintmax_t>(st.st_size) > max_bytes) {
    problem = "too large (" + std::to_string(st.st_size) + " bytes, at most " + std::to_string(max_bytes) + ")";
  }
  if (!problem.empty()) {
    ::close(fd);
    throw sdk::DataError(file.string() + ": " + problem);
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(st.st_size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || bytes.size() + static_cast<size_t>(n) > max_bytes) {
      const std::string why = n < 0 ? std::string("cannot read: ") + std::strerror(errno) : "grew while read";
      ::close(fd);
      throw sdk::DataError(file.string() + ": " + why);
    }
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return bytes;
}

}  // namespace exogym::runtime::util
