#pragma once
// A CSV file written row by row, whose every write is checked: a run whose
// output cannot be written stops at the first failure instead of training on
// with its rows lost (a full disk, a quota, an I/O error).
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace exogym::runtime::output {

class CsvFile {
 public:
  enum class Mode {
    Create,  // creates (or truncates) the file and writes the header and a newline
    Append,  // rows go after what the file holds (a resumed run's CSVs); no header
  };

  CsvFile() = default;
  CsvFile(std::filesystem::path file, std::string_view header, Mode mode = Mode::Create);
  // Writes what was appended and not flushed yet, if it can.
  ~CsvFile();
  CsvFile(CsvFile&& other) noexcept;
  CsvFile& operator=(CsvFile&& other) noexcept;
  CsvFile(const CsvFile&) = delete;
  CsvFile& operator=(const CsvFile&) = delete;

  // Adds whole rows (each ending in '\n') to what the next flush writes.
  void append(std::string_view rows) { pending_ += rows; }
  size_t pending() const { return pending_.size(); }
  // Writes what was appended. On failure the file is cut back to its last
  // complete flush, so that it never ends in half a row, and an sdk::Error
  // (exit 1) names the file and the reason; later flushes fail the same way.
  void flush();
  // flush(), then fsync(2): a delayed write error (a disk that filled up
  // after the data was accepted) surfaces here rather than never.
  void sync();
  // Bytes of complete rows in the file: what flush() has written.
  off_t bytes() const { return complete_; }

 private:
  [[noreturn]] void fail(const std::string& what, int error);

  std::filesystem::path file_;
  int fd_ = -1;
  off_t complete_ = 0;  // bytes of complete rows in the file
  std::string pending_;
  std::string failure_;  // the first failure's message, once there was one
};

}  // namespace exogym::runtime::output
