// The tensor repr; see format.h. Structured as torch/_tensor_str.py is: a
// Formatter that looks at the values to be shown and fixes one notation and
// one width for all of them, then a recursive printer for the nested lists.
#include "core/format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <complex>
#include <cstring>
#include <optional>

#include "ember/errors.h"
#include "ember/half.h"

namespace ember::detail {
namespace {

// std::to_chars rounds exactly, as Python's float formatting does, and unlike
// printf ignores the C locale's decimal separator. Python never prints "-nan".
std::string format_double(double value, std::chars_format style, int precision) {
  if (std::isnan(value)) return "nan";
  char buffer[512];  // fixed notation of the largest double needs ~310 characters
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, style, precision);
  EMBER_ASSERT(result.ec == std::errc());
  return std::string(buffer, result.ptr);
}
std::string format_fixed(double value, int precision) {
  return format_double(value, std::chars_format::fixed, precision);
}
std::string format_sci(double value, int precision) {
  return format_double(value, std::chars_format::scientific, precision);
}

std::string pad_left(const std::string& text, size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

// Fixes the notation and the column width for one set of values (the real or
// the imaginary parts, or the integers), from the values that will be shown.
class Formatter {
 public:
  // Integral and bool tensors: values are already their text.
  explicit Formatter(const std::vector<std::string>& texts) {
    for (const auto& text : texts) width_ = std::max(width_, text.size());
  }

  // Floating values. Only nonzero finite values decide the notation and the
  // width; nan, inf and zeros are then padded to that width.
  Formatter(const std::vector<double>& values, int precision) : precision_(precision) {
    std::vector<double> shown;
    for (double v : values) {
      if (std::isfinite(v) && v != 0) shown.push_back(v);
    }
    if (shown.empty()) return;
    double min_abs = INFINITY, max_abs = 0;
    for (double v : shown) {
      min_abs = std::min(min_abs, std::fabs(v));
      max_abs = std::max(max_abs, std::fabs(v));
      int_mode_ = int_mode_ && v == std::ceil(v);
    }
    bool wide_range = max_abs / min_abs > 1000.0 || max_abs > 1.0e8;
    // Integer-valued tensors print "3." and never need the small-value test.
    sci_mode_ = wide_range || (!int_mode_ && min_abs < 1.0e-4);
    for (double v : shown) {
      size_t len = sci_mode_   ? format_sci(v, precision_).size()
                   : int_mode_ ? format_fixed(v, 0).size() + 1  // + 1 for the trailing "."
                               : format_fixed(v, precision_).size();
      width_ = std::max(width_, len);
    }
  }

  size_t width() const { return width_; }

  std::string format(const std::string& text) const { return pad_left(text, width_); }

  std::string format(double value) const {
    std::string text;
    if (sci_mode_) {
      text = format_sci(value, precision_);
    } else if (int_mode_) {
      text = format_fixed(value, 0);
      if (std::isfinite(value)) text += ".";
    } else {
      text = format_fixed(value, precision_);
    }
    return pad_left(text, width_);
  }

 private:
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int precision_ = 4;
  size_t width_ = 1;
};

class Printer {
 public:
  Printer(const void* data, DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
          const PrintOptions& options)
      : data_(static_cast<const char*>(data)), dtype_(dtype), sizes_(sizes), strides_(strides), options_(options) {
    int64_t numel = 1;
    for (int64_t size : sizes_) numel *= size;
    summarize_ = numel > options_.threshold;
  }

  std::string body(int64_t indent) {
    std::vector<int64_t> offsets;
    collect(0, 0, offsets);
    if (is_complex(dtype_)) {
      std::vector<double> reals, imags;
      for (int64_t offset : offsets) {
        reals.push_back(real_at(offset));
        imags.push_back(imag_at(offset));
      }
      real_.emplace(reals, options_.precision);
      imag_.emplace(imags, options_.precision);
    } else if (is_floating_point(dtype_)) {
      std::vector<double> values;
      for (int64_t offset : offsets) values.push_back(real_at(offset));
      real_.emplace(values, options_.precision);
    } else {
      std::vector<std::string> texts;
      for (int64_t offset : offsets) texts.push_back(text_at(offset));
      real_.emplace(texts);
    }
    return nested(0, 0, indent);
  }

 private:
  int64_t ndim() const { return static_cast<int64_t>(sizes_.size()); }

  // Indices shown along a dimension of `size`: all, or the edge items.
  std::vector<int64_t> shown_indices(int64_t size) const {
    std::vector<int64_t> indices;
    int64_t edge = options_.edgeitems;
    if (summarize_ && size > 2 * edge) {
      // Only the edges: a summarised dimension may be huge.
      for (int64_t i = 0; i < edge; ++i) indices.push_back(i);
      for (int64_t i = size - edge; i < size; ++i) indices.push_back(i);
    } else {
      for (int64_t i = 0; i < size; ++i) indices.push_back(i);
    }
    return indices;
  }

  // Offsets of the elements that will be printed (get_summarized_data).
  void collect(int64_t dim, int64_t offset, std::vector<int64_t>& out) const {
    if (dim == ndim()) {
      out.push_back(offset);
      return;
    }
    for (int64_t i : shown_indices(sizes_[dim])) collect(dim + 1, offset + i * strides_[dim], out);
  }

  template <typename T>
  T load(int64_t offset) const {
    T value;
    std::memcpy(&value, data_ + offset * static_cast<int64_t>(sizeof(T)), sizeof(T));
    return value;
  }

  double real_at(int64_t offset) const {
    switch (dtype_) {
      case kFloat16: return static_cast<float>(load<Half>(offset));
      case kBFloat16: return static_cast<float>(load<BFloat16>(offset));
      case kFloat32: return load<float>(offset);
      case kFloat64: return load<double>(offset);
      case kComplex64: return load<std::complex<float>>(offset).real();
      case kComplex128: return load<std::complex<double>>(offset).real();
      default: break;
    }
    assert_failed("floating or complex dtype", __FILE__, __LINE__);
  }
  double imag_at(int64_t offset) const {
    if (dtype_ == kComplex64) return load<std::complex<float>>(offset).imag();
    EMBER_ASSERT(dtype_ == kComplex128);
    return load<std::complex<double>>(offset).imag();
  }
  std::string text_at(int64_t offset) const {
    switch (dtype_) {
      case kBool: return load<uint8_t>(offset) ? "True" : "False";
      case kUInt8: return std::to_string(load<uint8_t>(offset));
      case kInt8: return std::to_string(load<int8_t>(offset));
      case kInt16: return std::to_string(load<int16_t>(offset));
      case kInt32: return std::to_string(load<int32_t>(offset));
      case kInt64: return std::to_string(load<int64_t>(offset));
      default: break;
    }
    assert_failed("integral or bool dtype", __FILE__, __LINE__);
  }

  std::string element(int64_t offset) const {
    if (is_complex(dtype_)) {
      std::string real = real_->format(real_at(offset));
      std::string imag = imag_->format(imag_at(offset)) + "j";
      imag.erase(0, imag.find_first_not_of(' '));
      // A sign on the imaginary part (including "-0.") doubles as the separator.
      return imag[0] == '+' || imag[0] == '-' ? real + imag : real + "+" + imag;
    }
    if (is_floating_point(dtype_)) return real_->format(real_at(offset));
    return real_->format(text_at(offset));
  }

  // _vector_str: one dimension, wrapped to the line width.
  std::string vector(int64_t offset, int64_t indent) const {
    int64_t dim = ndim() - 1;
    int64_t element_length = static_cast<int64_t>(real_->width()) + 2;
    if (imag_) element_length += static_cast<int64_t>(imag_->width()) + 1;
    int64_t per_line = std::max<int64_t>(1, (options_.linewidth - indent) / element_length);

    std::vector<std::string> items;
    int64_t previous = -1;
    for (int64_t i : shown_indices(sizes_[dim])) {
      if (previous >= 0 && i != previous + 1) items.push_back(" ...");
      items.push_back(element(offset + i * strides_[dim]));
      previous = i;
    }
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) {
        out += i % per_line == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
      }
      out += items[i];
    }
    return out + "]";
  }

  // _tensor_str_with_formatter: nested brackets, one more space of indent
  // per level and one blank line per dimension below the innermost two.
  std::string nested(int64_t dim, int64_t offset, int64_t indent) const {
    int64_t remaining = ndim() - dim;
    if (remaining == 0) return element(offset);
    if (remaining == 1) return vector(offset, indent);
    std::string separator = "," + std::string(remaining - 1, '\n') + std::string(indent + 1, ' ');
    std::string out = "[";
    int64_t previous = -1;
    for (int64_t i : shown_indices(sizes_[dim])) {
      if (previous >= 0) out += separator;
      if (previous >= 0 && i != previous + 1) out += "..." + separator;
      out += nested(dim + 1, offset + i * strides_[dim], indent + 1);
      previous = i;
    }
    return out + "]";
  }

  const char* data_;
  DType dtype_;
  const std::vector<int64_t>& sizes_;
  const std::vector<int64_t>& strides_;
  PrintOptions options_;
  bool summarize_ = false;
  std::optional<Formatter> real_;
  std::optional<Formatter> imag_;
};

std::string shape_tuple(const std::vector<int64_t>& sizes) {
  std::string out = "(";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + (sizes.size() == 1 ? ",)" : ")");
}

// _add_suffixes: ", suffix" while the line stays within the width, else a new
// line indented under the opening bracket.
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes, int64_t indent,
                         int64_t linewidth) {
  size_t newline = text.rfind('\n');
  // PyTorch measures the last line plus two.
  int64_t last_line = static_cast<int64_t>(newline == std::string::npos ? text.size() + 2 : text.size() - newline + 1);
  for (const auto& suffix : suffixes) {
    int64_t length = static_cast<int64_t>(suffix.size());
    if (last_line + length + 2 > linewidth) {
      text += ",\n" + std::string(indent, ' ') + suffix;
      last_line = indent + length;
    } else {
      text += ", " + suffix;
      last_line += length + 2;
    }
  }
  return text + ")";
}

}  // namespace

std::string format_tensor(const void* data, DType dtype, const std::vector<int64_t>& sizes,
                          const std::vector<int64_t>& strides, Device device, const PrintOptions& options) {
  std::vector<int64_t> actual_strides = strides;
  if (actual_strides.empty()) {
    actual_strides.assign(sizes.size(), 1);
    for (size_t i = sizes.size(); i-- > 1;) actual_strides[i - 1] = actual_strides[i] * std::max<int64_t>(sizes[i], 1);
  }
  EMBER_CHECK(actual_strides.size() == sizes.size(), ValueError, "format_tensor: got ", sizes.size(), " sizes but ",
              actual_strides.size(), " strides");
  int64_t numel = 1;
  for (int64_t size : sizes) numel *= size;

  const std::string prefix = "tensor(";
  const auto indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  // Note [Print tensor device]: PyTorch names the device unless it is the cpu.
  if (device.is_cuda()) suffixes.push_back("device='" + device.str() + "'");

  std::string body;
  if (numel == 0) {
    // Nothing shows the element type of an empty tensor, so only the default
    // dtype goes unnamed; the shape is named unless it is (0,).
    if (sizes.size() != 1) suffixes.push_back("size=" + shape_tuple(sizes));
    if (dtype != default_dtype()) suffixes.push_back(cat("dtype=", dtype));
    body = "[]";
  } else {
    bool inferred = dtype == default_dtype() || dtype == kComplex64 || dtype == kInt64 || dtype == kBool;
    if (!inferred) suffixes.push_back(cat("dtype=", dtype));
    body = Printer(data, dtype, sizes, actual_strides, options).body(indent);
  }
  return add_suffixes(prefix + body, suffixes, indent, options.linewidth);
}

}  // namespace ember::detail
