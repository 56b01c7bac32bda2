// See Note [Log directory] in log_redirects.h.
#include "log_redirects.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace ember::run {
namespace {

std::runtime_error os_error(const std::string& what, const std::string& path) {
  return std::runtime_error("cannot " + what + " " + path + ": " + std::strerror(errno));
}

std::string make_temp_dir(const std::string& templ) {
  std::string path = templ;
  if (!::mkdtemp(path.data())) throw os_error("create the directory", templ);
  return path;
}

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the console or the file is gone: drop the rest, as tail would
    data += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

RunLogDir::RunLogDir(const Options& options) {
  std::string base;
  if (options.log_dir) {
    base = *options.log_dir;
    std::error_code error;
    std::filesystem::create_directories(base, error);
    if (error) throw std::runtime_error("cannot create --log-dir " + base + ": " + error.message());
  } else {
    const char* tmp = std::getenv("TMPDIR");
    base = temporary_ = make_temp_dir(std::string(tmp && *tmp ? tmp : "/tmp") + "/torchelastic_XXXXXX");
  }
  path_ = make_temp_dir(base + "/" + options.rdzv_id + "_XXXXXX");
}

RunLogDir::~RunLogDir() {
  std::error_code ignored;
  if (!temporary_.empty()) std::filesystem::remove_all(temporary_, ignored);
}

struct AttemptLogs::Stream {
  int file = -1;        // the log file (redirected or teed)
  int pipe_read = -1;   // teed: the launcher's end
  int pipe_write = -1;  // teed: the rank's end
  int console = -1;     // teed: 1 or 2
  std::string prefix;   // teed: "[default0]:"
  std::string partial;  // teed: a line not yet ended
};

class AttemptLogs::Copier {
 public:
  explicit Copier(std::vector<Stream*> streams) : streams_(std::move(streams)) {
    if (::pipe2(stop_, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    thread_ = std::thread([this] { run(); });
  }
  ~Copier() {
    char byte = 0;
    write_all(stop_[1], &byte, 1);
    thread_.join();
    ::close(stop_[0]);
    ::close(stop_[1]);
  }

 private:
  // Copies what `s` has; false at its end.
  static bool copy(Stream& s) {
    char buffer[65536];
    ssize_t n = ::read(s.pipe_read, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) return true;
    if (n < 0 && errno == EAGAIN) return false;
    if (n <= 0) {
      if (!s.partial.empty()) {
        std::string line = s.prefix + s.partial + "\n";
        write_all(s.console, line.data(), line.size());
        s.partial.clear();
      }
      ::close(s.pipe_read);
      s.pipe_read = -1;
      return false;
    }
    write_all(s.file, buffer, static_cast<size_t>(n));
    std::string text;
    for (ssize_t i = 0; i < n; ++i) {
      s.partial += buffer[i];
      if (buffer[i] == '\n') {
        text += s.prefix + s.partial;
        s.partial.clear();
      }
    }
    write_all(s.console, text.data(), text.size());
    return true;
  }

  void run() {
    for (;;) {
      std::vector<pollfd> fds{{stop_[0], POLLIN, 0}};
      std::vector<Stream*> open;
      for (Stream* s : streams_) {
        if (s->pipe_read < 0) continue;
        fds.push_back({s->pipe_read, POLLIN, 0});
        open.push_back(s);
      }
      if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
      if (fds[0].revents) break;
      for (size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents) copy(*open[i - 1]);
      }
    }
    // Every rank has ended: what they wrote is in the pipes (a process they left behind
    // may still hold a write end, so read what is there, not up to the end).
    for (Stream* s : streams_) {
      if (s->pipe_read < 0) continue;
      ::fcntl(s->pipe_read, F_SETFL, O_NONBLOCK);
      while (s->pipe_read >= 0 && copy(*s)) {
      }
      if (s->pipe_read >= 0 && !s->partial.empty()) {
        std::string line = s->prefix + s->partial + "\n";
        write_all(s->console, line.data(), line.size());
      }
    }
  }

  std::vector<Stream*> streams_;
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

AttemptLogs::AttemptLogs(const Options& options, const RunLogDir& dir, int attempt)
    : dir_(dir.path() + "/attempt_" + std::to_string(attempt)) {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  for (int local = 0; local < options.nproc_per_node; ++local) {
    std::string rank_dir = dir_ + "/" + std::to_string(local);
    std::error_code error;
    std::filesystem::create_directories(rank_dir, error);
    if (error) throw std::runtime_error("cannot create " + rank_dir + ": " + error.message());
    // torchrun: a teed stream is also redirected (the file is what it tails).
    int mask = options.redirects[static_cast<size_t>(local)] | options.tee[static_cast<size_t>(local)];
    for (int stream : {1, 2}) {
      auto s = std::make_unique<Stream>();
      if (mask & stream) {
        std::string path = rank_dir + (stream == 1 ? "/stdout.log" : "/stderr.log");
        s->file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (s->file < 0) throw os_error("open", path);
      }
      if (options.tee[static_cast<size_t>(local)] & stream) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw os_error("create a pipe for", rank_dir);
        s->pipe_read = fds[0];
        s->pipe_write = fds[1];
        s->console = stream;
        s->prefix = "[" + options.role + std::to_string(local) + "]:";
      }
      streams_.push_back(std::move(s));
    }
  }
}

AttemptLogs::~AttemptLogs() {
  copier_.reset();
  for (auto& s : streams_) {
    for (int fd : {s->file, s->pipe_read, s->pipe_write}) {
      if (fd >= 0) ::close(fd);
    }
  }
}

int AttemptLogs::child_fd(int local_rank, int stream) const {
  const Stream& s = *streams_[static_cast<size_t>(2 * local_rank + stream - 1)];
  return s.pipe_write >= 0 ? s.pipe_write : s.file;
}

std::string AttemptLogs::error_file(int local_rank) const {
  return dir_ + "/" + std::to_string(local_rank) + "/error.json";
}

void AttemptLogs::start_copying() {
  std::vector<Stream*> teed;
  for (auto& s : streams_) {
    if (s->pipe_write >= 0) {  // only the ranks write into the pipes now
      ::close(s->pipe_write);
      s->pipe_write = -1;
      teed.push_back(s.get());
    } else if (s->file >= 0) {  // redirected: the rank has the file
      ::close(s->file);
      s->file = -1;
    }
  }
  if (!teed.empty()) copier_ = std::make_unique<Copier>(std::move(teed));
}

void AttemptLogs::finish() { copier_.reset(); }

}  // namespace ember::run
