// Where ranks' output and error files go (torchrun's log directory, --redirects, --tee).
//
// Note [Log directory]
// As torchrun's agent: a job directory LOG_DIR/RUN_ID_xxxxxxxx (mkdtemp) is made once, and
// each attempt of the worker group gets attempt_K/LOCAL_RANK/ under it (made afresh), with
// error.json (TORCHELASTIC_ERROR_FILE) and, when redirected, stdout.log and stderr.log.
// Without --log-dir LOG_DIR is a mkdtemp /tmp/torchelastic_xxxxxx that ember-run removes at
// exit (torchrun leaves it). A redirected stream is the file itself, opened before fork and
// dup2'ed in the child; a teed stream is a pipe that a thread of the launcher copies into
// the file and, line by line with torchrun's prefix "[ROLE LOCAL_RANK]:" ("[default0]:"),
// to the launcher's own stream. Once every rank of the attempt has been reaped, what
// the ranks wrote is in the pipes: the thread drains them without waiting and ends.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "options.h"

namespace ember::run {

class RunLogDir {
 public:
  /// Makes the job directory; throws std::runtime_error naming the path on failure.
  explicit RunLogDir(const Options& options);
  ~RunLogDir();
  RunLogDir(const RunLogDir&) = delete;
  RunLogDir& operator=(const RunLogDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string temporary_;  // the directory to remove at exit; empty with --log-dir
};

/// The files and pipes of one attempt of the worker group.
class AttemptLogs {
 public:
  AttemptLogs(const Options& options, const RunLogDir& dir, int attempt);
  ~AttemptLogs();
  AttemptLogs(const AttemptLogs&) = delete;
  AttemptLogs& operator=(const AttemptLogs&) = delete;

  /// The descriptor a rank's stdout (stream 1) or stderr (2) becomes; -1: the launcher's.
  int child_fd(int local_rank, int stream) const;
  std::string error_file(int local_rank) const;
  /// Starts copying teed streams (after the ranks are forked: closes the pipes' write ends).
  void start_copying();
  /// Once every rank is reaped: copies what is left in the pipes, then stops.
  void finish();

 private:
  struct Stream;
  std::string dir_;
  std::vector<std::unique_ptr<Stream>> streams_;  // 2 per local rank: stdout, stderr
  class Copier;
  std::unique_ptr<Copier> copier_;
};

}  // namespace ember::run
