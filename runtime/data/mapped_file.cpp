#include "exogym/runtime/data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <string>

#include "exogym/sdk/error.h"

namespace exogym::runtime::data {

namespace {

// Reading a mapped page past the end of a file that shrank after it was
// mapped raises SIGBUS, which would end the process with no word of which
// file. The mappings are registered here, so that the handler can say, and
// end the run with exit status 1 (a failure while running). The handler may
// only read: each slot's fields are atomics, its message written once
// before the slot is published.
struct MappingSlot {
  std::atomic<uintptr_t> begin{0}, end{0};  // end 0: free
  std::array<char, 512> message{};
};
std::array<MappingSlot, 64> g_mappings;
std::mutex g_mappings_mutex;  // taken by registering threads, never by the handler

extern "C" void on_sigbus(int signal, siginfo_t* info, void*) {
  const auto address = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
  for (const MappingSlot& slot : g_mappings) {
    if (address < slot.begin.load() || address >= slot.end.load()) continue;
    (void)!::write(2, slot.message.data(), ::strnlen(slot.message.data(), slot.message.size()));
    ::_exit(1);
  }
  // Not one of ours: the default action, as if there were no handler.
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, nullptr);
  });
}

void register_mapping(const void* data, size_t size, const std::filesystem::path& file) {
  install_sigbus_handler();
  const std::string message = "exogym-run: " + file.string() +
                              ": the memory-mapped file was truncated or became unreadable while the run read it "
                              "(SIGBUS); the run stopped\n";
  std::lock_guard<std::mutex> lock(g_mappings_mutex);
  for (MappingSlot& slot : g_mappings) {
    if (slot.end.load() != 0) continue;
    std::strncpy(slot.message.data(), message.c_str(), slot.message.size() - 1);
    slot.begin.store(reinterpret_cast<uintptr_t>(data));
    slot.end.store(reinterpret_cast<uintptr_t>(data) + size);
    return;
  }
  // More than 64 files mapped at once: these are not named on SIGBUS.
}

void unregister_mapping(const void* data) {
  std::lock_guard<std::mutex> lock(g_mappings_mutex);
  for (MappingSlot& slot : g_mappings) {
    if (slot.end.load() == 0 || slot.begin.load() != reinterpret_cast<uintptr_t>(data)) continue;
    slot.end.store(0);
    slot.begin.store(0);
  }
}

}  // namespace

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
    register_mapping(data_, size_, file_);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
  if (!data_) return;
  unregister_mapping(data_);
  ::munmap(const_cast<unsigned char*>(data_), size_);
}

}  // namespace exogym::runtime::data
