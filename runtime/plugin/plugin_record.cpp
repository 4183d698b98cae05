#include "exogym/runtime/plugin/plugin_record.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <vector>

#include "exogym/sdk/error.h"

namespace exogym::runtime::plugin {

namespace fs = std::filesystem;
using sdk::PluginError;

namespace {

constexpr const char* kSection = ".exogym_plugin";
constexpr uint64_t kMaxRecord = 64 * 1024;      // a record is a few hundred bytes
constexpr uint64_t kMaxSectionNames = 1 << 20;  // .shstrtab of a large library

class ElfFile {
 public:
  explicit ElfFile(const fs::path& file) : file_(file) {
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0) fail(std::string("cannot read it: ") + std::strerror(errno));
    if (!S_ISREG(info.st_mode)) fail("not a regular file (a plugin is a shared library)");
    // O_NONBLOCK: had the file been swapped for a FIFO meanwhile, open()
    // returns at once and fstat() below refuses it.
    fd_ = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) fail(std::string("cannot read it: ") + std::strerror(errno));
    if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) fail("not a regular file (a plugin is a shared library)");
    size_ = static_cast<uint64_t>(info.st_size);
  }
  ~ElfFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  [[noreturn]] void fail(const std::string& why) const { throw PluginError(file_.string() + ": " + why); }

  // `size` bytes at `offset`, which must lie inside the file.
  std::vector<char> read(uint64_t offset, uint64_t size) const {
    if (offset > size_ || size > size_ - offset) fail(not_a_library());
    std::vector<char> bytes(size);
    uint64_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd_, bytes.data() + done, size - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(std::string("cannot read it: ") + (n < 0 ? std::strerror(errno) : "unexpected end of file"));
      done += static_cast<uint64_t>(n);
    }
    return bytes;
  }

  std::string not_a_library() const {
    return "not a shared library (" + std::to_string(size_) + " bytes that are not a 64-bit ELF file for this machine)";
  }

  // The contents of the section named `wanted`; empty if there is none.
  std::vector<char> section(const std::string& wanted) const {
    Elf64_Ehdr header{};
    if (size_ < sizeof header) fail(not_a_library());
    const auto head = read(0, sizeof header);
    std::memcpy(&header, head.data(), sizeof header);
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
        header.e_ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB)) {
      fail(not_a_library());
    }
    if (header.e_type != ET_DYN) fail("an ELF file, but not a shared library");
    if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shstrndx >= header.e_shnum) fail(not_a_library());
    const auto table = read(header.e_shoff, uint64_t{header.e_shnum} * sizeof(Elf64_Shdr));
    auto section_header = [&](size_t i) {
      Elf64_Shdr s{};
      std::memcpy(&s, table.data() + i * sizeof s, sizeof s);
      return s;
    };
    const Elf64_Shdr names_header = section_header(header.e_shstrndx);
    if (names_header.sh_size > kMaxSectionNames) fail(not_a_library());
    const auto names = read(names_header.sh_offset, names_header.sh_size);
    for (size_t i = 0; i < header.e_shnum; ++i) {
      const Elf64_Shdr s = section_header(i);
      if (s.sh_name >= names.size()) continue;
      const char* name = names.data() + s.sh_name;
      if (::strnlen(name, names.size() - s.sh_name) != wanted.size() || wanted != name) continue;
      if (s.sh_type == SHT_NOBITS || s.sh_size > kMaxRecord) fail("its " + wanted + " section is malformed");
      return read(s.sh_offset, s.sh_size);
    }
    return {};
  }

 private:
  fs::path file_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace

PluginDescription read_plugin_record(const fs::path& file) {
  ElfFile elf(file);
  const std::vector<char> record = elf.section(kSection);
  if (record.empty()) {
    elf.fail(std::string("not an ExoGym plugin: it has no ") + kSection +
             " section (export it with an EXOGYM_*_PLUGIN macro; a plugin built against an SDK before ABI version 5 "
             "must be rebuilt)");
  }
  PluginDescription d;
  d.file = file;
  std::istringstream lines(std::string(record.data(), ::strnlen(record.data(), record.size())));
  std::string line;
  bool has_abi = false;
  while (std::getline(lines, line)) {
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    const std::string key = line.substr(0, equals), value = line.substr(equals + 1);
    if (key == "abi") {
      try {
        d.abi_version = std::stoi(value);
        has_abi = true;
      } catch (const std::exception&) {
      }
    }
    if (key == "kind") d.kind = value;
    if (key == "name") d.name = value;
    if (key == "version") d.version = value;
    if (key == "fingerprint") d.fingerprint = value;
    if (key == "per_node") d.per_node = value == "1";
  }
  if (!has_abi) elf.fail(std::string("its ") + kSection + " section holds no ABI version");
  return d;
}

}  // namespace exogym::runtime::plugin
