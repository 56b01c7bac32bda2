// Positioned reads and atomic writes of checkpoint files (Note [atomic checkpoint writes]).
#include "nn/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ember/errors.h"

namespace ember::detail {
namespace {

// One read or write call moves at most this much (Linux moves at most ~2 GiB per call).
constexpr uint64_t kMaxIoChunk = uint64_t{1} << 30;
// Linux's limit on symbolic links followed while resolving one path (ELOOP).
constexpr int kMaxSymlinkHops = 40;

// The path whose file writing through `path` would replace: symbolic links in the last
// component followed, relative ones from the link's directory. A dangling link resolves to
// the file it names, which the save creates.
std::string follow_symlinks(const std::string& path, const char* who) {
  namespace fs = std::filesystem;
  fs::path current = path;
  for (int hops = 0;; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(current, ec)) || ec) return current.string();
    EMBER_CHECK(hops < kMaxSymlinkHops, ValueError, who, ": cannot write '", path,
                "': too many levels of symbolic links");
    const fs::path link = fs::read_symlink(current, ec);
    EMBER_CHECK(!ec, ValueError, who, ": cannot write '", path, "': cannot read the symbolic link '", current.string(),
                "' (", ec.message(), ")");
    current = link.is_absolute() ? link : current.parent_path() / link;
  }
}

// A name for the temporary file beside `target` that no concurrent writer picks (O_EXCL
// settles the rare collision; the caller retries).
std::string temporary_name(const std::string& target, int attempt) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t mix = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                       (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull) ^ (static_cast<uint64_t>(attempt) << 48);
  char suffix[48];
  std::snprintf(suffix, sizeof(suffix), ".%d.%012llx.partial", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(mix & 0xFFFFFFFFFFFFull));
  return target + suffix;
}

}  // namespace

CheckpointReader::CheckpointReader(std::string path, const char* who) : path_(std::move(path)), who_(who) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  EMBER_CHECK(fd_ >= 0, ValueError, who_, ": cannot open '", path_, "': ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || S_ISDIR(info.st_mode)) {
    const int error = S_ISDIR(info.st_mode) ? EISDIR : errno;
    ::close(fd_);
    fail<ValueError>(who_, ": cannot open '", path_, "': ", std::strerror(error));
  }
  size_ = static_cast<uint64_t>(info.st_size);
}

CheckpointReader::~CheckpointReader() { ::close(fd_); }

bool CheckpointReader::read_at(void* destination, uint64_t bytes, uint64_t offset) const {
  auto* out = static_cast<char*>(destination);
  while (bytes > 0) {
    const ssize_t got = ::pread(fd_, out, std::min(bytes, kMaxIoChunk), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    EMBER_CHECK(got >= 0, ValueError, who_, ": cannot read '", path_, "': ", std::strerror(errno));
    if (got == 0) return false;
    out += got;
    bytes -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return true;
}

AtomicFileWriter::AtomicFileWriter(const std::string& path, const char* who)
    : path_(path), target_(follow_symlinks(path, who)), who_(who) {
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temporary_ = temporary_name(target_, attempt);
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt == 100)) {
      const int error = errno;
      temporary_.clear();  // nothing of ours to remove
      fail<ValueError>(who_, ": cannot write '", path_, "': ", std::strerror(error));
    }
  }
  struct stat existing {};
  if (::stat(target_.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) {
    ::fchmod(fd_, existing.st_mode & 0777);  // best effort, as a copy keeps what it can
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temporary_.empty()) ::unlink(temporary_.c_str());
}

void AtomicFileWriter::fail_io(const char* doing) {
  const int error = errno;
  fail<ValueError>(who_, ": cannot ", doing, " '", path_, "': ", std::strerror(error));
}

void AtomicFileWriter::write(const void* data, uint64_t bytes) {
  const auto* in = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t put = ::write(fd_, in, std::min(bytes, kMaxIoChunk));
    if (put < 0 && errno == EINTR) continue;
    if (put == 0) errno = EIO;
    if (put <= 0) fail_io("write");
    in += put;
    bytes -= static_cast<uint64_t>(put);
  }
}

void AtomicFileWriter::commit() {
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_io("write");
  if (::rename(temporary_.c_str(), target_.c_str()) != 0) fail_io("replace");
  committed_ = true;
}

}  // namespace ember::detail
