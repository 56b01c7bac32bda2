// Launching a multi-process test: run a command line (ember-run and its ranks) under a
// deadline and collect its output.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

struct Launch {
  int status = -1;  // exit code, 128 + signal, or -1 when the deadline killed it
  std::string output;
};

/// Runs `command` (through /bin/sh) in its own process group, collecting
/// stdout and stderr; kills the whole group when `deadline` passes.
inline Launch run(const std::string& command, std::chrono::seconds deadline = std::chrono::seconds(60)) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  Launch launch;
  auto end = std::chrono::steady_clock::now() + deadline;
  char buffer[4096];
  bool killed = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    pollfd pfd{pipe_fds[0], POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (rc == 0 && !killed) {
      ::kill(-pid, SIGKILL);
      killed = true;
      launch.output += "\n<killed at the test's deadline>";
      continue;
    }
    ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    launch.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!killed) launch.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return launch;
}
