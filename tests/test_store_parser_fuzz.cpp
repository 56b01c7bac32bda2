// The TCPStore request parser (tcp_store_parser.h) alone: every command whole and a byte
// at a time, the limits, and a fuzz target. The fuzz target is a seeded mutation loop
// (a fixed seed and a bounded number of iterations, so every run, and CI's run under
// ASan+UBSan, checks the same inputs): valid request streams are mutated (bit flips,
// interesting lengths and counts, insertions, deletions, truncation) and fed in random
// chunks; the parser must stay within its limits, consume every byte it is given while
// it needs more, and give the same requests and errors however the bytes are chunked.
// The requests it accepts then drive StoreState, whose replies must be well-formed.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "distributed/tcp_store_parser.h"
#include "distributed/tcp_store_state.h"
#include "ember/errors.h"
#include "store_fuzz_util.h"

namespace proto = ember::detail::store_protocol;
using proto::Command;
using proto::Request;
using proto::RequestParser;

namespace {

std::string encode(const Request& r) {
  std::string out;
  proto::put_u8(out, static_cast<uint8_t>(r.command));
  switch (r.command) {
    case Command::Set:
      proto::put_string(out, r.keys.at(0));
      proto::put_string(out, r.value);
      break;
    case Command::Get:
    case Command::Delete: proto::put_string(out, r.keys.at(0)); break;
    case Command::Add:
      proto::put_string(out, r.keys.at(0));
      proto::put_i64(out, r.number);
      break;
    case Command::Wait: proto::put_i64(out, r.number); [[fallthrough]];
    case Command::Check:
      proto::put_i64(out, static_cast<int64_t>(r.keys.size()));
      for (const auto& k : r.keys) proto::put_string(out, k);
      break;
    case Command::Register:
      proto::put_i64(out, r.number);
      proto::put_string(out, r.keys.at(0));
      break;
    case Command::Departed: proto::put_i64(out, r.number); break;
    case Command::NumKeys:
    case Command::Leave: break;
    default:  // PyTorch's queries: test_store_torch_protocol.cpp
      break;
  }
  return out;
}

bool same(const Request& a, const Request& b) {
  return a.command == b.command && a.keys == b.keys && a.value == b.value && a.number == b.number;
}

/// One of each command, with the fields it uses.
std::vector<Request> every_command() {
  return {{Command::Set, {"key"}, "value", 0}, {Command::Get, {"key"}, "", 0},
          {Command::Add, {"counter"}, "", -5}, {Command::Check, {"a", "", "ccc"}, "", 0},
          {Command::Delete, {"key"}, "", 0},   {Command::Wait, {"a", "b"}, "", 1234},
          {Command::NumKeys, {}, "", 0},       {Command::Register, {"run"}, "", 3},
          {Command::Leave, {}, "", 0},         {Command::Departed, {}, "", 100},
          {Command::Check, {}, "", 0},         {Command::Set, {""}, "", 0}};
}

/// The outcome of parsing a stream: its requests, then the error if one ended it.
struct Outcome {
  std::vector<Request> requests;
  std::string error;
  uint64_t consumed = 0;
};

/// Feeds `bytes` in chunks whose sizes `chunk()` picks, checking the parser's contract.
template <typename Chunk>
Outcome parse(const std::string& bytes, const proto::Limits& limits, Chunk&& chunk) {
  RequestParser parser(limits);
  Outcome out;
  size_t pos = 0;
  while (pos < bytes.size() && out.error.empty()) {
    size_t size = std::min(bytes.size() - pos, chunk());
    size_t offered = size;
    while (offered > 0 && out.error.empty()) {
      size_t n = parser.feed(bytes.data() + pos, offered);
      EXPECT_LE(n, offered);
      pos += n;
      offered -= n;
      out.consumed += n;
      if (parser.state() == RequestParser::State::kReady) {
        out.requests.push_back(parser.take());
        const Request& r = out.requests.back();
        EXPECT_LE(r.keys.size(), static_cast<size_t>(limits.max_keys));
        for (const auto& k : r.keys) EXPECT_LE(k.size(), limits.max_key_bytes);
        EXPECT_LE(r.value.size(), limits.max_value_bytes);
      } else if (parser.state() == RequestParser::State::kError) {
        out.error = parser.error();
        EXPECT_EQ(out.error.rfind("TCPStore: ", 0), 0u) << out.error;
      } else {
        EXPECT_EQ(offered, 0u) << "the parser needs more bytes but left some unread";
      }
    }
  }
  EXPECT_EQ(parser.bytes_parsed(), out.consumed);
  return out;
}

}  // namespace

TEST(TCPStoreParser, EveryCommandWholeAndAByteAtATime) {
  proto::Limits limits;
  for (const Request& r : every_command()) {
    std::string bytes = encode(r);
    Outcome whole = parse(bytes, limits, [] { return size_t{1} << 20; });
    Outcome bytewise = parse(bytes, limits, [] { return size_t{1}; });
    ASSERT_EQ(whole.requests.size(), 1u) << static_cast<int>(r.command);
    ASSERT_EQ(bytewise.requests.size(), 1u);
    EXPECT_TRUE(same(whole.requests[0], r)) << static_cast<int>(r.command);
    EXPECT_TRUE(same(bytewise.requests[0], r)) << static_cast<int>(r.command);
    EXPECT_EQ(bytewise.consumed, bytes.size());
  }
}

TEST(TCPStoreParser, OneFeedStopsAtTheEndOfARequest) {
  std::string two = encode({Command::Get, {"a"}, "", 0}) + encode({Command::NumKeys, {}, "", 0});
  RequestParser parser(proto::Limits{});
  size_t n = parser.feed(two.data(), two.size());
  EXPECT_EQ(n, two.size() - 1);
  ASSERT_EQ(parser.state(), RequestParser::State::kReady);
  EXPECT_EQ(parser.take().keys, std::vector<std::string>{"a"});
  EXPECT_EQ(parser.feed(two.data() + n, 1), 1u);
  ASSERT_EQ(parser.state(), RequestParser::State::kReady);
  EXPECT_EQ(parser.take().command, Command::NumKeys);
}

TEST(TCPStoreParser, LengthsOverTheLimitsAreRefusedOnceRead) {
  proto::Limits limits;
  limits.max_key_bytes = 8;
  limits.max_value_bytes = 16;
  limits.max_keys = 4;
  limits.max_request_bytes = 40;
  struct Case {
    std::string bytes;
    std::string error;
  };
  std::vector<Case> cases = {
      {encode({Command::Get, {"123456789"}, "", 0}), "TCPStore: a key of 9 bytes exceeds the store's limit of 8 bytes"},
      {encode({Command::Set, {"k"}, std::string(17, 'v'), 0}),
       "TCPStore: a value of 17 bytes exceeds the store's limit of 16 bytes"},
      {encode({Command::Check, {"a", "b", "c", "d", "e"}, "", 0}),
       "TCPStore: a request for 5 keys exceeds the store's limit of 4 keys"},
      {encode({Command::Check, {"12345678", "12345678", "12345678"}, "", 0}),
       "TCPStore: a request of more than 40 bytes exceeds the store's limit"},
      {std::string("\x2a", 1), "TCPStore: unknown command byte 42 (the client does not speak ember's store protocol)"},
  };
  for (const auto& c : cases) {
    // Only the header is needed: the error comes before the announced bytes.
    Outcome out = parse(c.bytes, limits, [] { return size_t{1}; });
    EXPECT_EQ(out.error, c.error);
    EXPECT_TRUE(out.requests.empty());
  }
}

TEST(TCPStoreParserFuzz, SeededMutationsKeepTheParserWithinItsLimits) {
  proto::Limits limits;
  limits.max_key_bytes = 64;
  limits.max_value_bytes = 256;
  limits.max_keys = 16;
  limits.max_request_bytes = 1024;
  ember::testing::FuzzRandom random(28);  // fixed: every run checks the same inputs
  auto below = [&](size_t n) { return random.below(n); };
  auto random_string = [&](size_t max) { return random.letters(max); };
  const uint32_t lengths[] = {0, 1, 8, 63, 64, 65, 255, 256, 257, 1024, 0x7fffffffu, 0xffffffffu};
  const int64_t numbers[] = {
      0, 1, -1, 16, 17, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), int64_t{1} << 40};
  std::vector<std::string> replies;
  ember::distributed::StoreState state([&](int, std::string bytes) { replies.push_back(std::move(bytes)); });

  constexpr int kIterations = 100000;
  size_t requests_seen = 0, errors_seen = 0;
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    std::string stream;
    for (size_t i = 0, n = 1 + below(4); i < n; ++i) {
      Request r;
      r.command = static_cast<Command>(static_cast<uint8_t>(Command::Set) + below(10));
      size_t keys = r.command == Command::Check || r.command == Command::Wait ? below(5) : 1;
      for (size_t k = 0; k < keys; ++k) r.keys.push_back(random_string(8));
      r.value = random_string(32);
      r.number = below(3) == 0 ? numbers[below(std::size(numbers))] : static_cast<int64_t>(below(50)) - 10;
      stream += encode(r);
    }
    ember::testing::mutate(stream, random, lengths, numbers);
    Outcome whole = parse(stream, limits, [] { return size_t{1} << 20; });
    Outcome chunked = parse(stream, limits, [&] { return 1 + below(below(2) == 0 ? 3 : 40); });
    ASSERT_EQ(whole.requests.size(), chunked.requests.size()) << "iteration " << iteration;
    for (size_t i = 0; i < whole.requests.size(); ++i) {
      ASSERT_TRUE(same(whole.requests[i], chunked.requests[i])) << "iteration " << iteration;
    }
    ASSERT_EQ(whole.error, chunked.error) << "iteration " << iteration;
    requests_seen += whole.requests.size();
    errors_seen += whole.error.empty() ? 0 : 1;

    // The accepted requests drive the store's state; every reply is a well-formed frame.
    int connection = static_cast<int>(below(4));
    for (auto& r : whole.requests) {
      // A mutated first byte can make the stream PyTorch's (test_store_torch_protocol.cpp
      // fuzzes that dialect): what it cannot serve throws, and the server closes.
      bool ember = r.dialect == proto::Dialect::kEmber;
      try {
        state.handle(connection, std::move(r));
      } catch (const ember::DistributedError&) {
        ASSERT_FALSE(ember);
      }
      if (!ember) replies.clear();
    }
    if (below(8) == 0) state.expire(state.next_deadline());
    if (below(16) == 0) state.closed(static_cast<int>(below(4)));
    for (const auto& reply : replies) {
      ASSERT_FALSE(reply.empty());
      ASSERT_LE(static_cast<uint8_t>(reply[0]), static_cast<uint8_t>(proto::Status::kClosing));
    }
    replies.clear();
  }
  // The loop reached both ends: streams parsed to requests, and streams refused.
  EXPECT_GT(requests_seen, static_cast<size_t>(kIterations));
  EXPECT_GT(errors_seen, static_cast<size_t>(kIterations / 10));
}
