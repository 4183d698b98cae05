#include "exogym/runtime/util/text_lines.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exogym/runtime/util/regular_file.h"
#include "exogym/sdk/error.h"

namespace exogym::runtime::util {

namespace {
constexpr size_t kChunk = size_t{1} << 16;
}  // namespace

TextLines::TextLines(const std::filesystem::path& file, size_t max_line)
    : file_(file.string()), fd_(open_regular_file(file)), max_line_(max_line) {}

TextLines::~TextLines() { ::close(fd_); }

bool TextLines::fill() {
  // Keep only what is left of the current line, so that the buffer holds
  // at most a line and a chunk.
  buffer_.erase(0, start_);
  start_ = 0;
  char chunk[kChunk];
  for (;;) {
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw sdk::DataError(file_ + ": cannot read: " + std::strerror(errno));
    if (n == 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
}

bool TextLines::next(std::string& line) {
  for (;;) {
    const size_t newline = buffer_.find('\n', start_);
    const size_t length = (newline == std::string::npos ? buffer_.size() : newline) - start_;
    if (length > max_line_) {
      throw sdk::DataError(file_ + ":" + std::to_string(line_ + 1) + ": a line longer than " +
                           std::to_string(max_line_) + " bytes");
    }
    if (newline != std::string::npos || (end_ && length > 0)) {
      line.assign(buffer_, start_, length);
      start_ += length + (newline == std::string::npos ? 0 : 1);
      ++line_;
      return true;
    }
    if (end_) return false;
    end_ = !fill();
  }
}

}  // namespace exogym::runtime::util
