// Checks and quoting for untrusted text (Note [untrusted JSON] in untrusted_text.h).
#include "nn/untrusted_text.h"

#include <cstdint>
#include <cstdio>

namespace ember::detail {

JsonExtent json_extent(std::string_view text) {
  JsonExtent extent;
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) {
        extent.too_deep = true;
        return extent;
      }
    } else if (c == '}' || c == ']') {
      if (--depth <= 0) {  // below 0: a stray closer, which the parser refuses first
        if (depth == 0) extent.end = i + 1;
        return extent;
      }
    }
  }
  return extent;
}

bool is_valid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char lead = s[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    size_t length;
    uint32_t code;
    if (lead >= 0xC2 && lead <= 0xDF) length = 2, code = lead & 0x1F;
    else if (lead >= 0xE0 && lead <= 0xEF) length = 3, code = lead & 0x0F;
    else if (lead >= 0xF0 && lead <= 0xF4) length = 4, code = lead & 0x07;
    else return false;  // a continuation byte, an overlong two-byte lead (C0, C1) or past F4
    if (n - i < length) return false;
    for (size_t k = 1; k < length; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    if ((length == 3 && code < 0x800) || (length == 4 && code < 0x10000)) return false;  // overlong
    if ((code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return false;
    i += length;
  }
  return true;
}

std::string excerpt(std::string_view text, size_t max_bytes) {
  // Valid UTF-8 stays readable (cut at a character boundary); bytes of invalid text past
  // ASCII, and control bytes in any text, are escaped.
  const bool utf8 = is_valid_utf8(text);
  size_t shown = text.size() <= max_bytes ? text.size() : max_bytes;
  if (utf8) {
    while (shown > 0 && shown < text.size() && (static_cast<unsigned char>(text[shown]) & 0xC0) == 0x80) --shown;
  }
  std::string out = "'";
  for (size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c >= 0x20 && c != 0x7F) && (c < 0x80 || utf8)) {
      out += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02X", c);
      out += escaped;
    }
  }
  out += "'";
  if (shown < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace ember::detail
