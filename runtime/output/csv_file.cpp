#include "exogym/runtime/output/csv_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "exogym/sdk/error.h"

namespace exogym::runtime::output {

CsvFile::CsvFile(std::filesystem::path file, std::string_view header, Mode mode) : file_(std::move(file)) {
  if (mode == Mode::Append) {
    fd_ = ::open(file_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot append to it", errno);
    complete_ = ::lseek(fd_, 0, SEEK_END);
    if (complete_ < 0) fail("cannot append to it", errno);
    return;
  }
  fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) fail("cannot create it", errno);
  append(header);
  append("\n");
  flush();
}

CsvFile::~CsvFile() {
  if (fd_ < 0) return;
  // A run that stops on an error or a signal keeps the rows it appended.
  if (failure_.empty() && !pending_.empty()) {
    try {
      flush();
    } catch (const sdk::Error&) {
    }
  }
  ::close(fd_);
}

CsvFile::CsvFile(CsvFile&& other) noexcept { *this = std::move(other); }

CsvFile& CsvFile::operator=(CsvFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    file_ = std::move(other.file_);
    fd_ = std::exchange(other.fd_, -1);
    complete_ = other.complete_;
    pending_ = std::move(other.pending_);
    failure_ = std::move(other.failure_);
  }
  return *this;
}

void CsvFile::fail(const std::string& what, int error) {
  if (failure_.empty()) failure_ = file_.string() + ": " + what + ": " + std::strerror(error);
  throw sdk::Error(failure_);
}

void CsvFile::flush() {
  if (!failure_.empty()) throw sdk::Error(failure_);
  std::string_view rest = pending_;
  while (!rest.empty()) {
    const ssize_t written = ::write(fd_, rest.data(), rest.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      const int error = written < 0 ? errno : ENOSPC;
      // Best effort: the rows already in the file stay line-complete.
      if (::ftruncate(fd_, complete_) == 0) ::lseek(fd_, complete_, SEEK_SET);
      pending_.clear();
      fail("write failed", error);
    }
    rest.remove_prefix(static_cast<size_t>(written));
  }
  complete_ += static_cast<off_t>(pending_.size());
  pending_.clear();
}

void CsvFile::sync() {
  flush();
  // EINVAL: a file system that cannot sync (a pipe, some FUSE mounts).
  if (::fsync(fd_) != 0 && errno != EINVAL) fail("flushing to the disk failed", errno);
}

}  // namespace exogym::runtime::output
