// The TCPStore wire format, shared by the client and the server.
//
// A request is one command byte followed by its arguments; strings are a u32 length and
// the bytes, integers are i64, all in host byte order (the ranks of one job run one
// build of ember). Every request gets exactly one reply, in order, except that a WAIT or
// DEPARTED that waits is answered when it ends, after the replies to requests sent behind
// it (ember's client sends one request at a time, so it never sees this). A reply starts
// with a status byte: kOk and the command's result, or kError / kClosing and a message
// string (kClosing: the server closes the connection after it, because the request could
// not be read to its end: unknown command, a size over the limits below, too many
// connections).
// The results:
//   SET key value            -> nothing
//   GET key                  -> u8 found, then value if found
//   ADD key amount           -> i64 new value (the value read as std::stoll reads it, as
//                               PyTorch's server does; kError when that fails, or on overflow)
//   CHECK n keys...          -> u8 all set
//   DELETE key               -> u8 was set
//   WAIT timeout_ms n keys.. -> u8 0 when all set, 1 when timeout_ms passed first
//   NUM_KEYS                 -> i64
//   REGISTER rank run_id     -> nothing (the connection belongs to `rank`); kError when the
//                               server was given a run id and `run_id` is another
//   LEAVE                    -> nothing (the rank leaves; its close is no departure)
//   DEPARTED timeout_ms      -> i64 n, n x i64 rank (waits for the first departure)
// The parser of requests is tcp_store_parser.h; the server never trusts a length it reads.
//
// Note [Store dialects]
// The server also speaks PyTorch's TCPStore protocol, so that PyTorch ranks join a store
// that ember serves (ember-run, an ember rank 0), and ember's client speaks it to join a
// store that torchrun's agent or a PyTorch rank serves. PyTorch's requests are one query
// byte and its arguments, strings as a u64 length and the bytes, integers i64, host byte
// order; there is no status byte: a request the server cannot serve closes the connection.
// PyTorch 2.x opens every connection with VALIDATE (query 0, then the u32 0x3C85F7CE) and
// numbers its queries from VALIDATE = 0; PyTorch 1.13 sends no VALIDATE and numbers them
// from SET = 0 (with WATCH_KEY at 7, so that DELETE_KEY is 8 in both). The server tells the three apart by a
// connection's first bytes: ember's command bytes are 0x51 and up, disjoint from PyTorch's (0-16); a 0 followed by the
// magic number is 2.x, any other PyTorch byte is 1.13 (a 1.13 SET whose key length begins with the magic number would
// announce a key of over 1 GiB, past the key limit). Replies follow the connection's dialect (tcp_store_state.cpp). The
// client's side is tcp_store.cpp's Note [Which store the client talks to].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ember::detail::store_protocol {

enum class Command : uint8_t {
  Set = 0x51,
  Get,
  Add,
  Check,
  Delete,
  Wait,
  NumKeys,
  Register,
  Leave,
  Departed,
  // PyTorch's queries that ember's protocol has no byte for (PyTorch dialects only).
  CompareSet = 0x70,
  Append,
  CancelWait,
  Ping,
  Validate,
};
/// Which protocol a connection speaks (Note [Store dialects]).
enum class Dialect : uint8_t { kEmber, kTorch1, kTorch2 };

/// PyTorch's query bytes: 1.13's (SET = 0) and 2.x's (VALIDATE = 0, SET = 1, ...).
namespace torch1 {
enum : uint8_t { kSet, kCompareSet, kGet, kAdd, kCheck, kWait, kNumKeys, kWatchKey, kDelete };
}
namespace torch2 {
enum : uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kDelete,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing
};
}
constexpr uint32_t kTorchValidationMagic = 0x3C85F7CE;
enum class Status : uint8_t { kOk = 0, kError = 1, kClosing = 2 };

/// What one client may ask of the server. A request over a limit is refused with a
/// kClosing reply to that client alone; the client checks the same limits before sending.
struct Limits {
  uint32_t max_key_bytes = 1u << 20;      // 1 MiB
  uint32_t max_value_bytes = 256u << 20;  // 256 MiB
  /// Keys of one CHECK or WAIT.
  int64_t max_keys = 1 << 20;
  /// All of one request's bytes (a CHECK's keys together); at least a SET of the largest key and value.
  uint64_t max_request_bytes = (256u << 20) + (1u << 20) + 64;
  /// Unsent replies to one connection: a reply queued beyond it disconnects the client
  /// (one that sends requests and does not read the replies). A reply to a connection with
  /// nothing queued is always accepted, so a value of any allowed size can be read.
  size_t max_pending_output = 16u << 20;
  /// What the replies queued to all connections together may hold of the server's memory
  /// beyond the store's own values: their heads and the values the store has dropped since
  /// (Note [No client can stall the store]). Past it, the connections holding the most are
  /// closed. Room for a few of the largest values.
  uint64_t max_reply_memory = uint64_t{1} << 30;
  /// Connections served at once; one more is told so and closed.
  size_t max_connections = 16384;
};

inline void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
inline void put_i64(std::string& out, int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
inline void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
inline void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
/// A string as PyTorch sends it: u64 length, bytes.
inline void put_torch_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out.append(s);
}
inline void put_string(std::string& out, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof(n));
  out.append(s);
}
inline void put_status(std::string& out, Status status) { put_u8(out, static_cast<uint8_t>(status)); }

}  // namespace ember::detail::store_protocol
