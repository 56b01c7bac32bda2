// Starts the ranks of one node and supervises them (torchrun's local agent).
//
// The launcher blocks SIGCHLD, SIGINT and SIGTERM and takes them synchronously
// (sigtimedwait), so there is no signal-handler state: a child that exits is reaped and,
// if it failed, the others are sent SIGTERM and, after the term timeout, SIGKILL; SIGINT
// and SIGTERM sent to the launcher are forwarded to every live rank. Ranks are started
// with PR_SET_PDEATHSIG (SIGKILL): they die with the launcher, even one killed by SIGKILL.
#pragma once

#include <sys/types.h>

#include <functional>

#include "log_redirects.h"
#include "options.h"

namespace ember::run {

/// How one attempt of the worker group ended.
struct GroupResult {
  enum Kind { kSucceeded, kFailed, kInterrupted } kind = kSucceeded;
  int exit_code = 0;               // ember-run's exit status for this outcome
  int rank = -1, local_rank = -1;  // kFailed: the first failed rank
  pid_t pid = -1;
  int status = 0;  // its wait status
  int signal = 0;  // kInterrupted: the signal ember-run received
};

/// Runs one attempt of the node's ranks to completion (their environment names `attempt`).
GroupResult run_group(const Options& options, int master_port, int attempt, AttemptLogs& logs);

/// Runs the job: the worker group, started again after a failure up to --max-restarts
/// times (restarts.cpp); `fresh_store` gives each restart an empty store and returns its
/// port. Returns ember-run's exit status: 0 when every rank succeeded, else the first
/// failed rank's exit code (128 + signal if killed) of the last attempt.
int launch(const Options& options, int master_port, const std::function<int()>& fresh_store);

/// "exited with code 1", "was killed by signal 9 (Killed)".
std::string describe(int status);

}  // namespace ember::run
