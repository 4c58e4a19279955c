// A file the user named on weightctl's command line, written as the user
// named it (SPEC §10):
//
//   "-"                          standard output, written in place
//   a device, a FIFO, a socket   written in place: opened for writing, never replaced
//   a symlink                    its target, by these same rules (the link stays a link)
//   a regular file, or nothing   PATH.weightd-partial next to it, renamed over it by
//                                commit(); discard() (or the destructor) removes it
//
// Nothing here throws: the first error (ENOSPC, EPIPE, a path under a regular
// file, ...) is kept with the path and the OS's words, every later write is a
// no-op, and error() says what happened for the command to report with
// kExitLocalFile.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace weightd::api {

class output_file {
 public:
  /// Opens PATH for writing; check ok() before writing.
  explicit output_file(const std::string& path);
  ~output_file();  // discard() unless committed
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;

  bool ok() const { return error_.empty(); }
  /// "cannot write 'PATH': No space left on device": the first failure.
  const std::string& error() const { return error_; }

  /// Appends bytes (retrying short writes and EINTR); false once anything failed.
  bool write(std::string_view bytes);
  /// Closes the file, checking the close, and for a regular file renames the
  /// temporary over the target. False (and nothing renamed) after any error.
  bool commit();
  /// Closes and removes the temporary; a file written in place is left as is.
  void discard();

  /// Written in place (stdout, device, FIFO, socket): the bytes cannot be read back.
  bool in_place() const { return in_place_; }
  /// Where the bytes are until commit(): the temporary, or the target itself in place.
  const std::string& written_path() const { return temp_.empty() ? target_ : temp_; }
  /// Closes the file without renaming, so that another thread can read the
  /// temporary (export checks its sha256 before commit()).
  bool close();

 private:
  bool fail(const std::string& what, const std::string& path, int os_error);

  std::string named_;   // as the user typed it, for messages
  std::string target_;  // symlinks resolved
  std::string temp_;    // empty when in place
  int fd_ = -1;
  bool owns_fd_ = true;  // false for stdout
  bool in_place_ = false;
  bool committed_ = false;
  std::string error_;
};

/// Prints "weightctl: MESSAGE" (a local file's error()) and returns kExitLocalFile.
int fail_local(std::ostream& err, const std::string& message);

/// Flushes std::cout and reports a failed write of it ("cannot write standard
/// output: No space left on device"): the exit code for main, or 0.
int check_stdout(std::ostream& err);

}  // namespace weightd::api
