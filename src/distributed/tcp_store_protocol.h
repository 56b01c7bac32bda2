// The TCPStore wire format, shared by the client and the server.
//
// A request is one command byte followed by its arguments; strings are a u32 length and
// the bytes, integers are i64, all in host byte order (the ranks of one job run one
// build of ember). Every request gets exactly one reply, in order:
//   SET key value            -> u8 0
//   GET key                  -> u8 found, then value if found
//   ADD key amount           -> i64 new value
//   CHECK n keys...          -> u8 all set
//   DELETE key               -> u8 was set
//   WAIT timeout_ms n keys.. -> u8 0 when all set, 1 when timeout_ms passed first
//   NUM_KEYS                 -> i64
//   REGISTER rank            -> u8 0    (the connection belongs to `rank`)
//   LEAVE                    -> u8 0    (the rank leaves; its close is no departure)
//   DEPARTED timeout_ms      -> i64 n, n x i64 rank (waits for the first departure)
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace ember::detail::store_protocol {

enum class Command : uint8_t { Set = 1, Get, Add, Check, Delete, Wait, NumKeys, Register, Leave, Departed };

inline void put_u8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }
inline void put_i64(std::string& out, int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
inline void put_string(std::string& out, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  out.append(reinterpret_cast<const char*>(&n), sizeof(n));
  out.append(s);
}

/// Reads from a buffer that may hold an incomplete request; ok() turns false on a short read.
class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}
  bool ok() const noexcept { return ok_; }
  size_t consumed() const noexcept { return pos_; }
  uint8_t u8() {
    uint8_t v = 0;
    take(&v, 1);
    return v;
  }
  int64_t i64() {
    int64_t v = 0;
    take(&v, sizeof(v));
    return v;
  }
  std::string string() {
    uint32_t n = 0;
    take(&n, sizeof(n));
    if (!ok_ || size_ - pos_ < n) {
      ok_ = false;
      return {};
    }
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }

 private:
  void take(void* out, size_t n) {
    if (!ok_ || size_ - pos_ < n) {
      ok_ = false;
      return;
    }
    std::memcpy(out, data_ + pos_, n);
    pos_ += n;
  }
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace ember::detail::store_protocol
