// SPDX-License-Identifier: MIT
// mmap on POSIX; owned bytes otherwise.
#include "core/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace basalt {

MappedFile MappedFile::map(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + " is not a regular file");
  }
  MappedFile f;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ > 0) {
    void* p = mmap(nullptr, f.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw Error("cannot map " + path + ": " + std::strerror(err));
    }
    f.data_ = static_cast<const uint8_t*>(p);
    f.mapped_ = true;
  }
  ::close(fd);
  return f;
}

void MappedFile::release(const uint8_t* p, size_t n) const {
  if (!mapped_ || n == 0 || p < data_ || p + n > data_ + size_) return;
  // Whole pages only, rounded outward: a neighbour's page dropped too is
  // only read again from the page cache, never lost (the mapping is read-only).
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p + n);
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice: failure only keeps the pages
}

MappedFile MappedFile::from_bytes(std::vector<uint8_t> bytes) {
  MappedFile f;
  f.owned_ = std::move(bytes);
  f.data_ = f.owned_.data();
  f.size_ = f.owned_.size();
  return f;
}

MappedFile::~MappedFile() {
  if (mapped_ && data_) munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (mapped_ && data_) munmap(const_cast<uint8_t*>(data_), size_);
    owned_ = std::move(o.owned_);
    mapped_ = o.mapped_;
    size_ = o.size_;
    data_ = mapped_ ? o.data_ : owned_.data();
    o.data_ = nullptr;
    o.size_ = 0;
    o.mapped_ = false;
  }
  return *this;
}

}  // namespace basalt
