// The store's PyTorch dialects (Note [Store dialects]): the parser reads PyTorch 1.13's and
// 2.x's requests, whole and a byte at a time, tells the dialects apart by a connection's
// first bytes, and StoreState answers in PyTorch's reply format. The fuzz target is a
// seeded mutation loop over PyTorch request streams (fixed seed and iteration count, as
// test_store_parser_fuzz.cpp's, which CI runs under ASan+UBSan the same way): the parser
// stays within its limits and gives the same requests and errors however the bytes are
// chunked; the requests it accepts drive StoreState, which either answers or refuses
// with a DistributedError (the server then closes the connection, as PyTorch's does).
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
using proto::Dialect;
using proto::Request;
using proto::RequestParser;

namespace {

/// PyTorch's query byte for `command` in `dialect` (1.13 numbers from SET = 0, and has
/// WATCH_KEY at 7: both number DELETE_KEY 8).
uint8_t query_byte(Command command, Dialect dialect) {
  uint8_t byte = 0;
  switch (command) {
    case Command::Set: byte = proto::torch2::kSet; break;
    case Command::CompareSet: byte = proto::torch2::kCompareSet; break;
    case Command::Get: byte = proto::torch2::kGet; break;
    case Command::Add: byte = proto::torch2::kAdd; break;
    case Command::Check: byte = proto::torch2::kCheck; break;
    case Command::Wait: byte = proto::torch2::kWait; break;
    case Command::NumKeys: byte = proto::torch2::kNumKeys; break;
    case Command::Delete: byte = proto::torch2::kDelete; break;
    case Command::Append: byte = proto::torch2::kAppend; break;
    case Command::CancelWait: byte = proto::torch2::kCancelWait; break;
    case Command::Ping: byte = proto::torch2::kPing; break;
    default: ADD_FAILURE() << "no PyTorch query"; break;
  }
  if (dialect == Dialect::kTorch1) {
    return command == Command::Delete ? uint8_t{proto::torch1::kDelete} : static_cast<uint8_t>(byte - 1);
  }
  return byte;
}

/// A request as PyTorch's client writes it.
std::string encode(const Request& r, Dialect dialect) {
  std::string out;
  proto::put_u8(out, query_byte(r.command, dialect));
  switch (r.command) {
    case Command::Set:
    case Command::Append:
      proto::put_torch_string(out, r.keys.at(0));
      proto::put_torch_string(out, r.value);
      break;
    case Command::CompareSet:
      proto::put_torch_string(out, r.keys.at(0));
      proto::put_torch_string(out, r.value);
      proto::put_torch_string(out, r.desired);
      break;
    case Command::Get:
    case Command::Delete: proto::put_torch_string(out, r.keys.at(0)); break;
    case Command::Add:
      proto::put_torch_string(out, r.keys.at(0));
      proto::put_i64(out, r.number);
      break;
    case Command::Check:
    case Command::Wait:
      proto::put_u64(out, r.keys.size());
      for (const auto& k : r.keys) proto::put_torch_string(out, k);
      break;
    case Command::Ping: proto::put_u32(out, static_cast<uint32_t>(r.number)); break;
    default: break;
  }
  return out;
}

std::string validate() {
  std::string out;
  proto::put_u8(out, proto::torch2::kValidate);
  proto::put_u32(out, proto::kTorchValidationMagic);
  return out;
}

bool same(const Request& a, const Request& b) {
  return a.command == b.command && a.keys == b.keys && a.value == b.value && a.desired == b.desired &&
         a.number == b.number;
}

/// Each query both dialects have, with the fields it uses.
std::vector<Request> every_query() {
  return {{Command::Set, {"key"}, "value", 0}, {Command::Get, {"key"}, "", 0},
          {Command::Add, {"counter"}, "", -5}, {Command::Check, {"a", "", "ccc"}, "", 0},
          {Command::Wait, {"a", "b"}, "", 0},  {Command::NumKeys, {}, "", 0},
          {Command::Delete, {"key"}, "", 0},   {Command::CompareSet, {"k"}, "old", 0, "new"},
          {Command::Check, {}, "", 0},         {Command::Set, {""}, "", 0}};
}

struct Outcome {
  std::vector<Request> requests;
  std::string error;
  Dialect dialect = Dialect::kEmber;
};

template <typename Chunk>
Outcome parse(const std::string& bytes, const proto::Limits& limits, Chunk&& chunk) {
  RequestParser parser(limits);
  Outcome out;
  size_t pos = 0;
  while (pos < bytes.size() && out.error.empty()) {
    size_t offered = std::min(bytes.size() - pos, chunk());
    while (offered > 0 && out.error.empty()) {
      size_t n = parser.feed(bytes.data() + pos, offered);
      EXPECT_LE(n, offered);
      pos += n;
      offered -= n;
      if (parser.state() == RequestParser::State::kReady) {
        out.requests.push_back(parser.take());
        const Request& r = out.requests.back();
        EXPECT_LE(r.keys.size(), static_cast<size_t>(limits.max_keys));
        for (const auto& k : r.keys) EXPECT_LE(k.size(), limits.max_key_bytes);
        EXPECT_LE(r.value.size(), limits.max_value_bytes);
        EXPECT_LE(r.desired.size(), limits.max_value_bytes);
      } else if (parser.state() == RequestParser::State::kError) {
        out.error = parser.error();
        EXPECT_EQ(out.error.rfind("TCPStore: ", 0), 0u) << out.error;
      } else {
        EXPECT_EQ(offered, 0u) << "the parser needs more bytes but left some unread";
      }
    }
  }
  EXPECT_EQ(parser.bytes_parsed(), pos);
  out.dialect = parser.dialect();
  return out;
}

}  // namespace

TEST(TCPStoreTorchDialects, EveryQueryWholeAndAByteAtATimeInBothDialects) {
  proto::Limits limits;
  for (Dialect dialect : {Dialect::kTorch1, Dialect::kTorch2}) {
    for (const Request& r : every_query()) {
      // The first request of a 1.13 connection is a plain query; 2.x's is VALIDATE.
      std::string bytes = (dialect == Dialect::kTorch2 ? validate() : "") + encode(r, dialect);
      for (size_t chunk : {size_t{1} << 20, size_t{1}}) {
        Outcome out = parse(bytes, limits, [&] { return chunk; });
        EXPECT_EQ(out.dialect, dialect);
        ASSERT_TRUE(out.error.empty()) << out.error;
        size_t first = dialect == Dialect::kTorch2 ? 1 : 0;
        ASSERT_EQ(out.requests.size(), first + 1) << static_cast<int>(r.command);
        if (first == 1) {
          EXPECT_EQ(out.requests[0].command, Command::Validate);
        }
        EXPECT_TRUE(same(out.requests[first], r)) << static_cast<int>(r.command);
        EXPECT_EQ(out.requests[first].dialect, dialect);
      }
    }
  }
}

TEST(TCPStoreTorchDialects, TheFirstBytesChooseTheDialect) {
  proto::Limits limits;
  auto whole = [] { return size_t{1} << 20; };
  // A 1.13 SET begins with byte 0, as 2.x's VALIDATE does: its key length is not the magic number.
  Outcome set = parse(encode({Command::Set, {"k"}, "v", 0}, Dialect::kTorch1), limits, whole);
  EXPECT_EQ(set.dialect, Dialect::kTorch1);
  ASSERT_EQ(set.requests.size(), 1u);
  EXPECT_TRUE(same(set.requests[0], {Command::Set, {"k"}, "v", 0}));
  // 2.x's PING and APPEND exist only in 2.x; 1.13's WATCH_KEY is not served.
  Outcome ping = parse(validate() + encode({Command::Ping, {}, "", 0x12345678}, Dialect::kTorch2), limits, whole);
  ASSERT_EQ(ping.requests.size(), 2u);
  EXPECT_EQ(ping.requests[1].number, 0x12345678);
  Outcome watch = parse(std::string(1, proto::torch1::kWatchKey), limits, whole);
  EXPECT_EQ(watch.error, "TCPStore: unknown query byte 7 from a PyTorch 1.x client");
  // A later VALIDATE is no query.
  Outcome again = parse(validate() + validate(), limits, whole);
  EXPECT_EQ(again.error, "TCPStore: unknown query byte 0 from a PyTorch 2.x client");
  // A key length over the limit is refused once read, as in ember's dialect.
  limits.max_key_bytes = 8;
  Outcome big = parse(encode({Command::Get, {"123456789"}, "", 0}, Dialect::kTorch1), limits, whole);
  EXPECT_EQ(big.error, "TCPStore: a key of 9 bytes exceeds the store's limit of 8 bytes");
}

TEST(TCPStoreTorchDialects, RepliesAreInPyTorchsFormat) {
  std::vector<std::string> replies;
  ember::distributed::StoreState state([&](int, std::string bytes) { replies.push_back(std::move(bytes)); });
  auto handle = [&](Request r) {
    r.dialect = Dialect::kTorch2;
    replies.clear();
    state.handle(1, std::move(r));
    return replies;
  };
  auto i64 = [](int64_t v) {
    std::string out;
    proto::put_i64(out, v);
    return out;
  };
  EXPECT_EQ(handle({Command::Validate, {}, "", 0}), std::vector<std::string>{});
  EXPECT_EQ(handle({Command::Check, {"k"}, "", 0}), std::vector<std::string>{"\x01"});  // NOT_READY
  EXPECT_EQ(handle({Command::Wait, {"k"}, "", 0}), std::vector<std::string>{});         // waits
  // SET has no reply; it wakes the waiter with STOP_WAITING (0).
  EXPECT_EQ(handle({Command::Set, {"k"}, "v", 0}), std::vector<std::string>{std::string(1, '\0')});
  EXPECT_EQ(handle({Command::Check, {"k"}, "", 0}), std::vector<std::string>{std::string(1, '\0')});  // READY
  std::string v;
  proto::put_torch_string(v, "v");
  EXPECT_EQ(handle({Command::Get, {"k"}, "", 0}), std::vector<std::string>{v});
  EXPECT_EQ(handle({Command::Add, {"n"}, "", 5}), std::vector<std::string>{i64(5)});
  EXPECT_EQ(handle({Command::NumKeys, {}, "", 0}), std::vector<std::string>{i64(2)});
  EXPECT_EQ(handle({Command::Delete, {"n"}, "", 0}), std::vector<std::string>{i64(1)});
  std::string now;
  proto::put_torch_string(now, "w");
  EXPECT_EQ(handle({Command::CompareSet, {"k"}, "v", 0, "w"}), std::vector<std::string>{now});
  EXPECT_EQ(handle({Command::Wait, {"never"}, "", 0}), std::vector<std::string>{});
  EXPECT_EQ(handle({Command::CancelWait, {}, "", 0}), std::vector<std::string>{"\x01"});  // WAIT_CANCELED
  // What PyTorch's server cannot serve closes the connection: here, a DistributedError.
  EXPECT_THROW(handle({Command::Get, {"missing"}, "", 0}), ember::DistributedError);
  EXPECT_THROW(handle({Command::Add, {"k"}, "", 1}), ember::DistributedError);  // "w" is no number
}

TEST(TCPStoreTorchDialectsFuzz, SeededMutationsKeepTheParserWithinItsLimits) {
  proto::Limits limits;
  limits.max_key_bytes = 64;
  limits.max_value_bytes = 256;
  limits.max_keys = 16;
  limits.max_request_bytes = 1024;
  ember::testing::FuzzRandom random(11);  // fixed: every run checks the same inputs
  auto below = [&](size_t n) { return random.below(n); };
  auto random_string = [&](size_t max) { return random.letters(max); };
  const uint64_t lengths[] = {
      0, 1, 8, 63, 64, 65, 255, 256, 257, 1024, 0xffffffffu, uint64_t{1} << 32, std::numeric_limits<uint64_t>::max()};
  const int64_t numbers[] = {
      0, 1, -1, 16, 17, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  const Command commands[] = {Command::Set,   Command::CompareSet, Command::Get,     Command::Add,
                              Command::Check, Command::Wait,       Command::NumKeys, Command::Delete};
  const Command commands2[] = {Command::Append, Command::CancelWait, Command::Ping};
  std::vector<std::string> replies;
  ember::distributed::StoreState state([&](int, std::string bytes) { replies.push_back(std::move(bytes)); });

  constexpr int kIterations = 100000;
  size_t requests_seen = 0, errors_seen = 0;
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    Dialect dialect = below(2) == 0 ? Dialect::kTorch1 : Dialect::kTorch2;
    std::string stream = dialect == Dialect::kTorch2 ? validate() : "";
    for (size_t i = 0, n = 1 + below(4); i < n; ++i) {
      Request r;
      r.command = dialect == Dialect::kTorch2 && below(4) == 0 ? commands2[below(std::size(commands2))]
                                                               : commands[below(std::size(commands))];
      size_t keys = r.command == Command::Check || r.command == Command::Wait ? below(5) : 1;
      for (size_t k = 0; k < keys; ++k) r.keys.push_back(random_string(8));
      r.value = random_string(32);
      r.desired = random_string(32);
      r.number = below(3) == 0 ? numbers[below(std::size(numbers))] : static_cast<int64_t>(below(50)) - 10;
      if (r.command == Command::Ping) r.number &= 0xffffffff;
      stream += encode(r, dialect);
    }
    ember::testing::mutate(stream, random, lengths, numbers);
    Outcome whole = parse(stream, limits, [] { return size_t{1} << 20; });
    Outcome chunked = parse(stream, limits, [&] { return 1 + below(below(2) == 0 ? 3 : 40); });
    ASSERT_EQ(whole.requests.size(), chunked.requests.size()) << "iteration " << iteration;
    for (size_t i = 0; i < whole.requests.size(); ++i) {
      ASSERT_TRUE(same(whole.requests[i], chunked.requests[i])) << "iteration " << iteration;
    }
    ASSERT_EQ(whole.error, chunked.error) << "iteration " << iteration;
    ASSERT_EQ(whole.dialect, chunked.dialect) << "iteration " << iteration;
    requests_seen += whole.requests.size();
    errors_seen += whole.error.empty() ? 0 : 1;

    int connection = static_cast<int>(below(4));
    for (auto& r : whole.requests) {
      try {
        state.handle(connection, std::move(r));
      } catch (const ember::DistributedError& e) {
        ASSERT_EQ(std::string(e.what()).rfind("TCPStore: ", 0), 0u) << e.what();
      }
    }
    if (below(16) == 0) state.closed(static_cast<int>(below(4)));
    replies.clear();
  }
  EXPECT_GT(requests_seen, static_cast<size_t>(kIterations));
  EXPECT_GT(errors_seen, static_cast<size_t>(kIterations / 20));
}
