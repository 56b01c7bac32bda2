#include "distributed/tcp_store_parser.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "ember/errors.h"

namespace ember::detail::store_protocol {
size_t RequestParser::feed(const char* data, size_t size) {
  size_t pos = 0;
  while (state_ == State::kNeedMore && pos < size) {
    if (!have_command_) {
      request_bytes_ = 1;
      start_command(static_cast<uint8_t>(data[pos++]));
    } else {
      parse_field(data, size, pos);
    }
  }
  bytes_parsed_ += pos;
  return pos;
}

Request RequestParser::take() {
  Request out = std::move(request_);
  out.dialect = dialect_;
  request_ = Request{};
  state_ = State::kNeedMore;
  have_command_ = false;
  field_ = 0;
  return out;
}

void RequestParser::start_command(uint8_t byte) {
  using F = Field;
  static constexpr F kKeyValue[] = {F::kKey, F::kValue};
  static constexpr F kKeyNumberKey[] = {F::kNumber, F::kKey};
  static constexpr F kKey[] = {F::kKey};
  static constexpr F kKeyNumber[] = {F::kKey, F::kNumber};
  static constexpr F kCountKeys[] = {F::kCount, F::kKeys};
  static constexpr F kNumberCountKeys[] = {F::kNumber, F::kCount, F::kKeys};
  static constexpr F kNumber[] = {F::kNumber};
  auto use = [&](const F* fields, size_t count) {
    fields_ = fields;
    field_count_ = count;
  };
  if (!dialect_known_ && byte <= torch2::kPing) {
    dialect_known_ = true;
    dialect_ = Dialect::kTorch1;
    if (byte == 0) {  // 1.13's SET or 2.x's VALIDATE: the next 4 bytes tell
      static constexpr F kProbe[] = {F::kProbe};
      use(kProbe, 1);
      have_command_ = true;
      field_ = 0;
      return;
    }
  }
  dialect_known_ = true;
  if (dialect_ != Dialect::kEmber) {
    if (!start_torch_command(byte)) {
      return fail(cat("TCPStore: unknown query byte ", static_cast<int>(byte), " from a PyTorch ",
                      dialect_ == Dialect::kTorch1 ? "1.x" : "2.x", " client"));
    }
    have_command_ = true;
    field_ = 0;
    if (field_count_ == 0) state_ = State::kReady;
    return;
  }
  request_.command = static_cast<Command>(byte);
  switch (request_.command) {
    case Command::Set: use(kKeyValue, 2); break;
    case Command::Get: use(kKey, 1); break;
    case Command::Add: use(kKeyNumber, 2); break;
    case Command::Check: use(kCountKeys, 2); break;
    case Command::Delete: use(kKey, 1); break;
    case Command::Wait: use(kNumberCountKeys, 3); break;
    case Command::NumKeys:
    case Command::Leave: use(nullptr, 0); break;
    case Command::Register: use(kKeyNumberKey, 2); break;
    case Command::Departed: use(kNumber, 1); break;
    default:
      return fail(cat("TCPStore: unknown command byte ", static_cast<int>(byte),
                      " (the client does not speak ember's store protocol)"));
  }
  have_command_ = true;
  field_ = 0;
  if (field_count_ == 0) state_ = State::kReady;
}

/// PyTorch's queries (Note [Store dialects]); false for a byte the dialect has no query for.
bool RequestParser::start_torch_command(uint8_t byte) {
  using F = Field;
  static constexpr F kKeyValue[] = {F::kKey, F::kValue};
  static constexpr F kKeyValueDesired[] = {F::kKey, F::kValue, F::kDesired};
  static constexpr F kKey[] = {F::kKey};
  static constexpr F kKeyNumber[] = {F::kKey, F::kNumber};
  static constexpr F kCountKeys[] = {F::kCount, F::kKeys};
  static constexpr F kU32[] = {F::kU32};
  auto use = [&](Command command, const F* fields, size_t count) {
    request_.command = command;
    fields_ = fields;
    field_count_ = count;
    return true;
  };
  // 1.13's bytes are 2.x's less one up to GETNUMKEYS; 1.13's WATCH_KEY (a callback
  // connection PyTorch's own client opens for watch_key) is not served, and after it both
  // number DELETE_KEY 8.
  if (dialect_ == Dialect::kTorch1) {
    if (byte == torch1::kWatchKey || byte > torch1::kDelete) return false;
    if (byte != torch1::kDelete) byte = static_cast<uint8_t>(byte + 1);
  }
  switch (byte) {
    case torch2::kSet: return use(Command::Set, kKeyValue, 2);
    case torch2::kCompareSet: return use(Command::CompareSet, kKeyValueDesired, 3);
    case torch2::kGet: return use(Command::Get, kKey, 1);
    case torch2::kAdd: return use(Command::Add, kKeyNumber, 2);
    case torch2::kCheck: return use(Command::Check, kCountKeys, 2);
    case torch2::kWait: return use(Command::Wait, kCountKeys, 2);
    case torch2::kNumKeys: return use(Command::NumKeys, nullptr, 0);
    case torch2::kDelete: return use(Command::Delete, kKey, 1);
    case torch2::kAppend: return use(Command::Append, kKeyValue, 2);
    case torch2::kCancelWait: return use(Command::CancelWait, nullptr, 0);
    case torch2::kPing: return use(Command::Ping, kU32, 1);
    default: return false;  // VALIDATE after the first request, MULTI_GET, MULTI_SET
  }
}

/// The 4 bytes after a first byte 0: 2.x's validation number, else the low half of a
/// 1.13 SET's key length (Note [Store dialects]).
void RequestParser::probe_done() {
  uint32_t word = 0;
  std::memcpy(&word, scratch_, sizeof(word));
  if (word == kTorchValidationMagic) {
    dialect_ = Dialect::kTorch2;
    request_.command = Command::Validate;
    scratch_have_ = 0;
    state_ = State::kReady;
    return;
  }
  start_torch_command(torch1::kSet);
  field_ = 0;
  scratch_have_ = 4;  // the key length's first 4 bytes are read
}

bool RequestParser::fill(const char* data, size_t size, size_t& pos, size_t bytes) {
  size_t take = std::min(bytes - scratch_have_, size - pos);
  std::memcpy(scratch_ + scratch_have_, data + pos, take);
  scratch_have_ += take;
  pos += take;
  request_bytes_ += take;
  if (scratch_have_ < bytes) return false;
  scratch_have_ = 0;
  return true;
}

void RequestParser::parse_field(const char* data, size_t size, size_t& pos) {
  Field field = fields_[field_];
  if (field == Field::kProbe || field == Field::kU32) {
    // fill() leaves the bytes in scratch_ and resets its count; probe_done() may take them back.
    if (!fill(data, size, pos, sizeof(uint32_t))) return;
    if (field == Field::kProbe) return probe_done();
    uint32_t v = 0;
    std::memcpy(&v, scratch_, sizeof(v));
    request_.number = v;
    return next_field();
  }
  if (field == Field::kNumber || field == Field::kCount) {
    if (!fill(data, size, pos, sizeof(int64_t))) return;
    int64_t v = 0;
    std::memcpy(&v, scratch_, sizeof(v));
    if (field == Field::kNumber) {
      request_.number = v;
      return next_field();
    }
    // Each key takes at least its 4-byte length: a count the request size cannot hold is refused now.
    int64_t room = static_cast<int64_t>(limits_.max_request_bytes / sizeof(uint32_t));
    if (v < 0 || v > limits_.max_keys || v > room) {
      return fail(cat("TCPStore: a request for ", v, " keys exceeds the store's limit of ",
                      std::min(limits_.max_keys, room), " keys"));
    }
    keys_expected_ = v;
    return next_field();
  }
  if (!in_string_) {
    if (dialect_ != Dialect::kEmber) {
      if (!fill(data, size, pos, sizeof(uint64_t))) return;
      uint64_t length = 0;
      std::memcpy(&length, scratch_, sizeof(length));
      return start_string(length);
    }
    if (!fill(data, size, pos, sizeof(uint32_t))) return;
    uint32_t length = 0;
    std::memcpy(&length, scratch_, sizeof(length));
    return start_string(length);
  }
  size_t take = std::min<size_t>(string_left_, size - pos);
  string_->append(data + pos, take);
  pos += take;
  request_bytes_ += take;
  string_left_ -= static_cast<uint32_t>(take);
  if (string_left_ == 0) {
    in_string_ = false;
    next_field();
  }
}

void RequestParser::start_string(uint64_t length) {
  bool is_value = fields_[field_] == Field::kValue || fields_[field_] == Field::kDesired;
  uint64_t limit = is_value ? limits_.max_value_bytes : limits_.max_key_bytes;
  if (length > limit) {
    return fail(cat("TCPStore: a ", is_value ? "value" : "key", " of ", length, " bytes exceeds the store's limit of ",
                    limit, " bytes"));
  }
  if (request_bytes_ + length > limits_.max_request_bytes) {
    return fail(
        cat("TCPStore: a request of more than ", limits_.max_request_bytes, " bytes exceeds the store's limit"));
  }
  // Nothing is reserved for the announced length: the buffer grows only as bytes arrive.
  string_ = fields_[field_] == Field::kDesired ? &request_.desired
            : is_value                         ? &request_.value
                                               : &request_.keys.emplace_back();
  string_left_ = static_cast<uint32_t>(length);
  in_string_ = length > 0;
  if (length == 0) next_field();
}

void RequestParser::next_field() {
  // kKeys stays the current field until it holds keys_expected_ keys.
  if (fields_[field_] == Field::kKeys && static_cast<int64_t>(request_.keys.size()) < keys_expected_) return;
  ++field_;
  if (field_ < field_count_ && fields_[field_] == Field::kKeys && keys_expected_ == 0) ++field_;
  if (field_ == field_count_) state_ = State::kReady;
}

void RequestParser::fail(std::string message) {
  state_ = State::kError;
  error_ = std::move(message);
}

}  // namespace ember::detail::store_protocol
