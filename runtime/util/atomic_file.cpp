#include "exogym/runtime/util/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::util {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const fs::path& file, const std::string& what, int error) {
  throw sdk::Error(file.string() + ": " + what + ": " + std::strerror(error));
}

// Removes the temporary file unless the rename consumed it.
class TemporaryFile {
 public:
  // O_EXCL with a name no other writer uses (process id and a counter), and
  // mode 0666 so that the user's umask applies as to any file they create.
  explicit TemporaryFile(const fs::path& file) {
    static std::atomic<unsigned> counter{0};
    for (;;) {
      path_ = file.string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) return;
      if (errno != EEXIST) {
        const int error = errno;
        path_.clear();
        fail(file, "cannot create a temporary file beside it", error);
      }
    }
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Closes the descriptor, reporting the error a delayed write may surface.
  int close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result;
  }
  void renamed() { path_.clear(); }

 private:
  int fd_ = -1;
  std::string path_;
};

void write_all(int fd, std::string_view bytes, const fs::path& file) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      fail(file, "write failed", errno);
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
}

}  // namespace

// Best effort: some file systems refuse to sync a directory, and the
// files' own data is already on the disk.
void sync_folder(const fs::path& folder) {
  const int fd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_file_atomically(const fs::path& file, std::string_view bytes) {
  TemporaryFile temporary(file);
  write_all(temporary.fd(), bytes, file);
  if (::fsync(temporary.fd()) != 0) fail(file, "flushing to the disk failed", errno);
  if (temporary.close() != 0) fail(file, "write failed", errno);
  if (::rename(temporary.path().c_str(), file.c_str()) != 0) fail(file, "cannot replace it", errno);
  temporary.renamed();
  sync_folder(file.parent_path());
}

}  // namespace exogym::runtime::util
