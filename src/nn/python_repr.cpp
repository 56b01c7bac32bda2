#include "nn/python_repr.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace ember::detail {

std::string python_float(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form: "d.ddde[+-]XX".
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string text(buf, end);
  std::string sign;
  if (text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (text[i] != '.') digits += text[i];
  }
  // Python (float_repr_style 'short'): the value is 0.DIGITS * 10^decpt; fixed notation
  // when -4 < decpt <= 16, else scientific with at least two exponent digits.
  const int decpt = exponent + 1;
  const int n = static_cast<int>(digits.size());
  std::string out;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out = "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (decpt >= n) {
      out = digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
  } else {
    out = digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    const int exp10 = decpt - 1;
    std::string exp_digits = std::to_string(std::abs(exp10));
    if (exp_digits.size() < 2) exp_digits.insert(0, "0");
    out += std::string(exp10 < 0 ? "e-" : "e+") + exp_digits;
  }
  return sign + out;
}

std::string python_tuple(const IntList& values) {
  std::string out = "(";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() == 1) out += ",";
  return out + ")";
}

}  // namespace ember::detail
