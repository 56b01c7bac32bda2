// Checks and quoting for text that comes from outside: a checkpoint's JSON header, the
// names and metadata a caller asks ember::save to write.
//
// Note [untrusted JSON]
// nlohmann's parser and serializer recurse once per nesting level, so a header nested a
// million levels deep overflows the stack before any of its content can be checked, and
// its messages quote the offending token whole. Every JSON text read from a file goes
// through json_nesting_depth_ok() before it is parsed (the reference reader, serde_json,
// stops at 128 levels too), and every piece of input an error names goes through
// excerpt(), which keeps a short excerpt. Text written as JSON must be valid UTF-8, or the
// serializer throws its own exception type: ember::save checks it first with
// is_valid_utf8() and names the offending string.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ember::detail {

/// The deepest nesting a JSON header may have (the outermost object is level 1).
inline constexpr int kMaxJsonDepth = 128;

/// The extent of the JSON value at the start of `text`, found by counting brackets outside
/// strings: `end` is just past the bracket that closes the first one opened (nullopt when
/// none does), `too_deep` whether the nesting passed kMaxJsonDepth first (the scan stops
/// there). A parser stops at its first error, so it nests no deeper than this scan saw.
struct JsonExtent {
  std::optional<size_t> end;
  bool too_deep = false;
};
JsonExtent json_extent(std::string_view text);

/// Whether `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF), as a JSON serializer requires.
bool is_valid_utf8(std::string_view text);

/// `text` in single quotes for an error message: at most `max_bytes` bytes of it, bytes
/// outside printable ASCII as \xNN, and when cut, "... (N bytes)" after the quote.
std::string excerpt(std::string_view text, size_t max_bytes = 128);

}  // namespace ember::detail
