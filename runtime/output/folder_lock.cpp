#include "exogym/runtime/output/folder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::output {

FolderLock::FolderLock(const std::filesystem::path& folder) {
  // O_CLOEXEC: a child process (the launcher's) must not inherit it.
  fd_ = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw sdk::Error(folder.string() + ": cannot open the run folder: " + std::strerror(errno));
  int rc;
  do {
    rc = ::flock(fd_, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) return;
  const int error = errno;
  ::close(fd_);
  if (error == EWOULDBLOCK) {
    throw sdk::DataError(folder.string() +
                         ": in use by another exogym-run (it holds the folder's lock); wait for it to end, or "
                         "stop it, before resuming");
  }
  throw sdk::Error(folder.string() + ": cannot lock the run folder: " + std::strerror(error));
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock
}

}  // namespace exogym::runtime::output
