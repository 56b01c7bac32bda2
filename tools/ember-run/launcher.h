// Starts the ranks of one node and supervises them (torchrun's local agent).
//
// The launcher blocks SIGCHLD, SIGINT and SIGTERM and takes them synchronously
// (sigtimedwait), so there is no signal-handler state: a child that exits is reaped and,
// if it failed, the others are sent SIGTERM and, after the term timeout, SIGKILL; SIGINT
// and SIGTERM sent to the launcher are forwarded to every live rank.
#pragma once

#include "options.h"

namespace ember::run {

/// Runs the node's ranks to completion; returns ember-run's exit status: 0 when every
/// rank succeeded, else the first failed rank's exit code (128 + signal if killed).
int launch(const Options& options, int master_port);

}  // namespace ember::run
