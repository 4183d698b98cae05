#include "exogym/runtime/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

MappedFile::MappedFile(const std::filesystem::path& file) : file_(file) {
  // Checked before opening: opening a FIFO blocks until a writer comes.
  struct stat before {};
  if (::stat(file.c_str(), &before) == 0 && !S_ISREG(before.st_mode)) {
    throw sdk::DataError(file.string() + ": not a regular file");
  }
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw sdk::DataError(file.string() + ": cannot open: " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    throw sdk::DataError(file.string() + ": cannot stat: " + std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw sdk::DataError(file.string() + ": not a regular file");
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (mapped == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      throw sdk::DataError(file.string() + ": cannot memory-map: " + std::strerror(error));
    }
    // Examples are drawn at random offsets: read-ahead would mostly fetch
    // pages nobody asked for.
    ::madvise(mapped, size_, MADV_RANDOM);
    data_ = static_cast<const unsigned char*>(mapped);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace exogym::runtime::data
