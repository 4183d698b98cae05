#pragma once
// A text file read line by line from a regular file, each line at most a
// given length: a user's file of rows (an availability trace) may be
// anything, and a 1 GB "line" must be an error after a few kilobytes, not
// an allocation of the whole file (util/regular_file.h refuses FIFOs,
// devices and folders before a byte is read).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace exogym::runtime::util {

class TextLines {
 public:
  // sdk::DataError naming the file as open_regular_file (regular_file.h).
  TextLines(const std::filesystem::path& file, size_t max_line);
  ~TextLines();
  TextLines(const TextLines&) = delete;
  TextLines& operator=(const TextLines&) = delete;

  // The next line, without its "\n" (a "\r" before it is the caller's);
  // false at the end of the file. sdk::DataError "<file>:<line>: ..." for a
  // line longer than max_line bytes, or a failed read.
  bool next(std::string& line);
  // The 1-based number of the line next() returned last.
  int64_t line_number() const { return line_; }

 private:
  // Reads more of the file into buffer_; false at its end.
  bool fill();

  std::string file_;
  int fd_ = -1;
  size_t max_line_;
  std::string buffer_;
  size_t start_ = 0;  // where the next line starts in buffer_
  bool end_ = false;
  int64_t line_ = 0;
};

}  // namespace exogym::runtime::util
