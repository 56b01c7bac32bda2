// FashionMNIST: the gzipped IDX files of Fashion-MNIST, read with zlib.
//
// IDX: a big-endian header (magic 0x00000803 for images, 0x00000801 for labels, then the
// count, then rows and columns for images) followed by one unsigned byte per pixel or label.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "ember/data.h"
#include "ember/errors.h"
#include "ember/factories.h"

namespace ember::data {
namespace {

constexpr uint32_t kLabelsMagic = 0x00000801;
constexpr uint32_t kImagesMagic = 0x00000803;
constexpr int64_t kSide = 28;

struct GzCloser {
  void operator()(gzFile_s* file) const { gzclose(file); }
};

// A whole gzipped file, decompressed.
class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    EMBER_CHECK(file_ != nullptr, Error, "FashionMNIST: cannot open ", path, ": ", std::strerror(errno),
                " (Debian's dataset-fashion-mnist package installs the files in ", FashionMNIST::kDefaultRoot, ")");
  }

  void read(void* out, size_t bytes) {
    auto* dst = static_cast<unsigned char*>(out);
    while (bytes > 0) {
      unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes, size_t{1} << 30));
      int got = gzread(file_.get(), dst, chunk);
      if (got <= 0) {
        int code = 0;
        const char* message = gzerror(file_.get(), &code);
        ::ember::detail::fail<Error>("FashionMNIST: ", path_, " ends early or is corrupt (",
                                     code == Z_OK ? "unexpected end" : message, ")");
      }
      dst += got;
      bytes -= static_cast<size_t>(got);
    }
  }

  uint32_t read_u32() {
    std::array<unsigned char, 4> b{};
    read(b.data(), b.size());
    return uint32_t{b[0]} << 24 | uint32_t{b[1]} << 16 | uint32_t{b[2]} << 8 | uint32_t{b[3]};
  }

  void expect_magic(uint32_t expected, const char* what) {
    uint32_t magic = read_u32();
    EMBER_CHECK(magic == expected, ValueError, "FashionMNIST: ", path_, " is not an IDX file of ", what, " (magic ",
                magic, ", expected ", expected, ")");
  }

  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::unique_ptr<gzFile_s, GzCloser> file_;
};

Tensor read_images(const std::string& path) {
  GzReader in(path);
  in.expect_magic(kImagesMagic, "images");
  auto count = static_cast<int64_t>(in.read_u32());
  uint32_t rows = in.read_u32(), cols = in.read_u32();
  EMBER_CHECK(rows == kSide && cols == kSide, ValueError, "FashionMNIST: ", path, " holds ", rows, "x", cols,
              " images, expected 28x28");
  std::vector<unsigned char> bytes(static_cast<size_t>(count * kSide * kSide));
  in.read(bytes.data(), bytes.size());
  // As torchvision's ToTensor: byte / 255 in float32.
  Tensor images = empty({count, 1, kSide, kSide}, kFloat32);
  float* out = images.data_ptr<float>();
  for (size_t i = 0; i < bytes.size(); ++i) out[i] = static_cast<float>(bytes[i]) / 255.0f;
  return images;
}

Tensor read_labels(const std::string& path) {
  GzReader in(path);
  in.expect_magic(kLabelsMagic, "labels");
  auto count = static_cast<int64_t>(in.read_u32());
  std::vector<unsigned char> bytes(static_cast<size_t>(count));
  in.read(bytes.data(), bytes.size());
  Tensor labels = empty({count}, kInt64);
  int64_t* out = labels.data_ptr<int64_t>();
  for (size_t i = 0; i < bytes.size(); ++i) out[i] = bytes[i];
  return labels;
}

}  // namespace

FashionMNIST::FashionMNIST(const std::string& root, bool train) {
  std::string prefix = root + (train ? "/train" : "/t10k");
  images_ = read_images(prefix + "-images-idx3-ubyte.gz");
  targets_ = read_labels(prefix + "-labels-idx1-ubyte.gz");
  EMBER_CHECK(images_.size(0) == targets_.size(0), ValueError, "FashionMNIST: ", images_.size(0), " images but ",
              targets_.size(0), " labels in ", root);
}

size_t FashionMNIST::size() const { return static_cast<size_t>(images_.size(0)); }

Example FashionMNIST::get(size_t index) const {
  EMBER_CHECK(index < size(), IndexError, "index ", index, " is out of bounds for dimension 0 with size ", size());
  auto i = static_cast<int64_t>(index);
  return {images_.select(0, i), targets_.select(0, i)};
}

}  // namespace ember::data
