// FileStore: a log of set/delete records in one file, read and appended under flock(2).
//
// Every operation opens the file, takes the exclusive lock, replays the log into a map,
// appends its own record if it changes anything, and closes: so ranks in different
// processes (on one machine or a shared file system with working locks) see each
// other's writes in lock order. wait() re-reads with a backoff of up to 10 ms.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "distributed/deadline.h"
#include "ember/distributed.h"
#include "ember/errors.h"

namespace ember::distributed {
namespace {

constexpr char kUsersKey[] = "__ember_filestore_users";
enum Record : uint8_t { kSet = 1, kDelete = 2 };

class LockedFile {
 public:
  explicit LockedFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EMBER_CHECK(fd_ >= 0, DistributedError, "FileStore: cannot open ", path, ": ", std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        int error = errno;
        ::close(fd_);
        detail::fail<DistributedError>("FileStore: cannot lock ", path, ": ", std::strerror(error));
      }
    }
    replay();
  }
  ~LockedFile() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  LockedFile(const LockedFile&) = delete;
  LockedFile& operator=(const LockedFile&) = delete;

  std::map<std::string, std::string>& data() { return data_; }
  void append(Record kind, const std::string& key, const std::string& value = {}) {
    std::string out;
    out.push_back(static_cast<char>(kind));
    for (const std::string* s : {&key, &value}) {
      uint32_t n = static_cast<uint32_t>(s->size());
      out.append(reinterpret_cast<const char*>(&n), sizeof(n));
      out.append(*s);
    }
    EMBER_CHECK(
        ::lseek(fd_, 0, SEEK_END) >= 0 && ::write(fd_, out.data(), out.size()) == static_cast<ssize_t>(out.size()),
        DistributedError, "FileStore: cannot write ", path_, ": ", std::strerror(errno));
    if (kind == kSet) data_[key] = value;
    else data_.erase(key);
  }

 private:
  void replay() {
    std::string log;
    char buffer[1 << 14];
    ssize_t n;
    while ((n = ::read(fd_, buffer, sizeof(buffer))) > 0) log.append(buffer, static_cast<size_t>(n));
    size_t pos = 0;
    auto take_string = [&](std::string& s) {
      uint32_t length = 0;
      if (log.size() - pos < sizeof(length)) return false;
      std::memcpy(&length, log.data() + pos, sizeof(length));
      pos += sizeof(length);
      if (log.size() - pos < length) return false;
      s.assign(log, pos, length);
      pos += length;
      return true;
    };
    while (pos < log.size()) {
      auto kind = static_cast<Record>(log[pos++]);
      std::string key, value;
      if (!take_string(key) || !take_string(value)) break;  // a torn record at the end
      if (kind == kSet) data_[key] = std::move(value);
      else data_.erase(key);
    }
  }
  std::string path_;
  int fd_ = -1;
  std::map<std::string, std::string> data_;
};

}  // namespace

FileStore::FileStore(const std::string& path, int world_size, std::chrono::milliseconds timeout)
    : Store(timeout), path_(path), world_size_(world_size) {
  EMBER_CHECK(!path.empty(), ValueError, "FileStore: the path must not be empty");
  add(kUsersKey, 1);
}

FileStore::~FileStore() {
  try {
    LockedFile file(path_);
    auto& data = file.data();
    int64_t users = data.count(kUsersKey) ? std::strtoll(data[kUsersKey].c_str(), nullptr, 10) - 1 : 0;
    file.append(kSet, kUsersKey, std::to_string(users));
    if (world_size_ > 0 && users <= 0) ::unlink(path_.c_str());  // the last of the job's users
  } catch (...) {
  }
}

void FileStore::set(const std::string& key, const std::string& value) { LockedFile(path_).append(kSet, key, value); }

std::string FileStore::get(const std::string& key) {
  wait({key});
  LockedFile file(path_);
  auto it = file.data().find(key);
  EMBER_CHECK(it != file.data().end(), DistributedError, "FileStore: key '", key, "' was deleted while getting it");
  return it->second;
}

int64_t FileStore::add(const std::string& key, int64_t amount) {
  LockedFile file(path_);
  auto it = file.data().find(key);
  int64_t value = (it == file.data().end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 10)) + amount;
  file.append(kSet, key, std::to_string(value));
  return value;
}

bool FileStore::check(const std::vector<std::string>& keys) {
  LockedFile file(path_);
  for (const auto& k : keys) {
    if (!file.data().count(k)) return false;
  }
  return true;
}

bool FileStore::delete_key(const std::string& key) {
  LockedFile file(path_);
  if (!file.data().count(key)) return false;
  file.append(kDelete, key);
  return true;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds wait_timeout) {
  auto deadline = detail::deadline_after(wait_timeout);
  auto backoff = std::chrono::microseconds(100);
  while (!check(keys)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string names;
      for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
      detail::fail<DistributedError>("wait timeout after ", wait_timeout.count(), "ms, keys: ", names);
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::microseconds(10'000));
  }
}

}  // namespace ember::distributed
