#pragma once
// A read-only memory mapping of a whole file: the pages are shared by every
// node thread (and with the page cache), so a dataset of many gigabytes costs
// no copy and is read only where examples are drawn. A file truncated while
// it is mapped stops the process with exit status 1 and a message naming it,
// instead of a bare SIGBUS.
#include <cstddef>
#include <filesystem>

namespace exogym::runtime::data {

class MappedFile {
 public:
  // Throws sdk::DataError naming the file when it cannot be opened or mapped.
  explicit MappedFile(const std::filesystem::path& file);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::filesystem::path& file() const { return file_; }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  std::filesystem::path file_;
  const unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace exogym::runtime::data
