// The files under ember::save and ember::load: positioned reads, and writes that replace a
// checkpoint atomically.
//
// Note [atomic checkpoint writes]
// save() never writes the checkpoint in place. It writes a temporary file in the same
// directory, under a name no other writer picks (created with O_EXCL, so two ranks saving
// one checkpoint at once each get their own), and renames it over the target when it is
// complete. Readers then see the old file or the new one, never a mix, and among
// concurrent savers the last rename wins. The target is the path with symbolic links in
// its last component followed, as torch.save and safetensors write through a link: the
// link stays and its target is replaced. The new file gets the permissions open() would
// give it (0666 less the umask), or the target's own when it exists. Any failure removes
// the temporary file.
#pragma once

#include <cstdint>
#include <string>

namespace ember::detail {

/// A file opened for reading by `who` ("ember::load"). Reads are positioned, so only the
/// bytes asked for are read: the header of a file larger than memory, one tensor at a
/// time. Errors are ValueErrors naming `who` and the path.
class CheckpointReader {
 public:
  CheckpointReader(std::string path, const char* who);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  uint64_t size() const noexcept { return size_; }
  /// Reads exactly `bytes` bytes at `offset`; false when the file ends first.
  bool read_at(void* destination, uint64_t bytes, uint64_t offset) const;

 private:
  std::string path_;
  const char* who_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// A new version of the file at `path`, written beside it and renamed over it by commit()
/// (Note [atomic checkpoint writes]).
class AtomicFileWriter {
 public:
  AtomicFileWriter(const std::string& path, const char* who);
  ~AtomicFileWriter();  // removes the temporary file unless commit() succeeded
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, uint64_t bytes);
  /// Closes the temporary file and renames it over the target.
  void commit();

 private:
  [[noreturn]] void fail_io(const char* doing);

  std::string path_;    // as the caller named it, for messages
  std::string target_;  // with symbolic links followed
  std::string temporary_;
  const char* who_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace ember::detail
