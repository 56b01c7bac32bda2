// The server's reader of requests: a resumable parser over the bytes of one connection.
//
// Note [Parsing store requests incrementally]
// The I/O loop hands the parser whatever recv() returned; the parser consumes as much as
// it can and keeps its place (the field it is in, the bytes of a length read so far, the
// keys parsed), so a request that arrives a byte at a time costs the same as one that
// arrives whole: every byte is examined once (bytes_parsed() counts them). A length is
// checked against the Limits when it is read, before anything is buffered for it, so an
// announced 4 GiB key is refused after its 5 bytes of header. The parser knows nothing of
// sockets: the I/O loop (tcp_store_server.cpp) and the fuzz test drive it alike.
// The connection's first bytes choose its dialect (Note [Store dialects]); ember's and
// PyTorch's requests become the same Request, and the dialect then stays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/tcp_store_protocol.h"

namespace ember::detail::store_protocol {

/// One parsed request; which fields it uses depends on the command (see the protocol).
struct Request {
  Command command{};
  std::vector<std::string> keys;      // SET, GET, ADD, DELETE, REGISTER (the run id): one; CHECK, WAIT: n
  std::string value;                  // SET, APPEND; COMPARE_SET's expected value
  int64_t number = 0;                 // ADD amount, WAIT and DEPARTED timeout_ms, REGISTER rank, PING nonce
  std::string desired;                // COMPARE_SET's new value
  Dialect dialect = Dialect::kEmber;  // how the reply is written
};

class RequestParser {
 public:
  enum class State { kNeedMore, kReady, kError };

  explicit RequestParser(const Limits& limits) : limits_(limits) {}

  /// Consumes bytes from the front of [data, data + size), stopping at the end of one
  /// request or at an error; returns how many it consumed.
  size_t feed(const char* data, size_t size);
  State state() const noexcept { return state_; }
  /// The request parsed (state kReady); the parser then starts on the next one.
  Request take();
  /// Why the bytes are not a request (state kError); the connection cannot be read further.
  const std::string& error() const noexcept { return error_; }
  /// Every byte fed and examined, over the parser's life.
  uint64_t bytes_parsed() const noexcept { return bytes_parsed_; }
  /// The connection's dialect, once its first bytes are read (kEmber before).
  Dialect dialect() const noexcept { return dialect_; }

 private:
  enum class Field : uint8_t { kNumber, kCount, kKey, kKeys, kValue, kDesired, kU32, kProbe };
  /// Reads into scratch_ until it holds `bytes`; true when it does.
  bool fill(const char* data, size_t size, size_t& pos, size_t bytes);
  void start_command(uint8_t byte);
  bool start_torch_command(uint8_t byte);
  void probe_done();
  void parse_field(const char* data, size_t size, size_t& pos);
  void start_string(uint64_t length);
  void next_field();
  void fail(std::string message);

  Limits limits_;
  State state_ = State::kNeedMore;
  std::string error_;
  Request request_;
  bool have_command_ = false;
  bool dialect_known_ = false;
  Dialect dialect_ = Dialect::kEmber;
  const Field* fields_ = nullptr;  // the command's fields, in order
  size_t field_count_ = 0;
  size_t field_ = 0;
  char scratch_[8] = {};
  size_t scratch_have_ = 0;
  bool in_string_ = false;  // its length is read, `string_left_` bytes follow
  uint32_t string_left_ = 0;
  std::string* string_ = nullptr;
  int64_t keys_expected_ = 0;
  uint64_t request_bytes_ = 0;
  uint64_t bytes_parsed_ = 0;
};

}  // namespace ember::detail::store_protocol
