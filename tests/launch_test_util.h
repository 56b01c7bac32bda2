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
#include <vector>

struct Launch {
  int status = -1;  // exit code, 128 + signal, or -1 when the deadline killed it
  std::string output;
};

/// Starts `args` (args[0] a path) in a process group of its own, its stdout and stderr
/// going to the returned descriptor's pipe; returns the child's pid.
inline pid_t start_in_own_group(std::vector<std::string> args, int& output_fd) {
  int pipe_fds[2];
  EXPECT_EQ(::pipe(pipe_fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  output_fd = pipe_fds[0];
  return pid;
}

/// Runs `command` (through /bin/sh) in its own process group, collecting
/// stdout and stderr; kills the whole group when `deadline` passes.
inline Launch run(const std::string& command, std::chrono::seconds deadline = std::chrono::seconds(60)) {
  int output = -1;
  pid_t pid = start_in_own_group({"/bin/sh", "-c", command}, output);
  Launch launch;
  auto end = std::chrono::steady_clock::now() + deadline;
  char buffer[4096];
  bool killed = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    pollfd pfd{output, POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (rc == 0 && !killed) {
      ::kill(-pid, SIGKILL);
      killed = true;
      launch.output += "\n<killed at the test's deadline>";
      continue;
    }
    ssize_t n = ::read(output, buffer, sizeof(buffer));
    if (n <= 0) break;
    launch.output.append(buffer, static_cast<size_t>(n));
  }
  ::close(output);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!killed) launch.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return launch;
}
