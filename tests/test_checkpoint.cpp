// ember::save / ember::load: safetensors files, checked by parsing the bytes by hand
// (Python's safetensors package is not installed here) and by round trips on every
// dtype and backend; corrupt files are ValueErrors that name the file.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "test_support.h"

namespace ember {
namespace {

using ember::testing::ensure_cuda;

class TempFile {
 public:
  explicit TempFile(const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               ("ember_ckpt_" + std::to_string(::getpid()) + "_" + name + ".safetensors"))
                  .string()) {}
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }
  std::string bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write(const std::string& bytes) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  std::string path_;
};

uint64_t le64(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  return n;
}

std::string le64_bytes(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out;
}

// A file as the reference writer would produce it: length, header, data.
std::string file_of(const std::string& header, const std::string& data) {
  return le64_bytes(header.size()) + header + data;
}

std::string float_bytes(std::vector<float> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

TEST(Checkpoint, FileLayoutIsSafetensors) {
  TempFile file("layout");
  nn::StateDict sd;
  sd.insert("fc.weight", tensor({{1.0f, 2.0f}, {3.0f, 4.0f}}));
  sd.insert("fc.bias", tensor({7.0, 8.0}).to(kFloat64));
  sd.insert("steps", tensor(int64_t{5}).to(kInt64));
  save(sd, file.path(), {{"epoch", "3"}});

  const std::string bytes = file.bytes();
  ASSERT_GE(bytes.size(), 8u);
  const uint64_t header_len = le64(bytes);
  EXPECT_EQ(header_len % 8, 0u) << "the header is padded so the data is 8-byte aligned";
  ASSERT_LE(8 + header_len, bytes.size());
  const auto header = nlohmann::json::parse(bytes.substr(8, header_len));
  EXPECT_EQ(header["__metadata__"]["epoch"], "3");
  EXPECT_EQ(header["fc.weight"]["dtype"], "F32");
  EXPECT_EQ(header["fc.weight"]["shape"], nlohmann::json({2, 2}));
  EXPECT_EQ(header["fc.weight"]["data_offsets"], nlohmann::json({0, 16}));
  EXPECT_EQ(header["fc.bias"]["dtype"], "F64");
  EXPECT_EQ(header["fc.bias"]["data_offsets"], nlohmann::json({16, 32}));
  EXPECT_EQ(header["steps"]["dtype"], "I64");
  EXPECT_EQ(header["steps"]["shape"], nlohmann::json::array());
  EXPECT_EQ(header["steps"]["data_offsets"], nlohmann::json({32, 40}));
  ASSERT_EQ(bytes.size(), 8 + header_len + 40);
  const char* data = bytes.data() + 8 + header_len;
  float w[4];
  double b[2];
  int64_t steps;
  std::memcpy(w, data, 16);
  std::memcpy(b, data + 16, 16);
  std::memcpy(&steps, data + 32, 8);
  EXPECT_EQ(std::vector<float>(w, w + 4), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(b[0], 7.0);
  EXPECT_EQ(b[1], 8.0);
  EXPECT_EQ(steps, 5);
  EXPECT_EQ(load_metadata(file.path()).at("epoch"), "3");
}

TEST(Checkpoint, ReadsAFileWrittenByTheReferenceWriter) {
  // Key order, padding and dtype-sorted data as the reference writer emits them.
  TempFile file("reference");
  std::string header = R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]},)"
                       R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  int32_t seven = 7;
  file.write(file_of(header, float_bytes({0.5f, -2.0f}) + std::string(reinterpret_cast<char*>(&seven), 4)));
  nn::StateDict sd = load(file.path());
  ASSERT_EQ(sd.keys(), (std::vector<std::string>{"a", "b"}));  // data order
  EXPECT_EQ(sd["a"].to_vector<float>(), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(sd["b"].dtype(), kInt32);
  EXPECT_EQ(sd["b"].to_vector<int32_t>(), std::vector<int32_t>{7});
}

nn::StateDict every_dtype(Device device) {
  nn::StateDict sd;
  sd.insert("bool", tensor({true, false, true}).to(device));
  sd.insert("uint8", tensor({1, 255, 7}).to(TensorOptions(kUInt8).device(device)));
  sd.insert("int8", tensor({-128, 5}).to(TensorOptions(kInt8).device(device)));
  sd.insert("int16", tensor({-300, 300}).to(TensorOptions(kInt16).device(device)));
  sd.insert("int32", tensor({{1, -2}, {3, 4}}).to(TensorOptions(kInt32).device(device)));
  sd.insert("int64", tensor({int64_t{1} << 40}).to(device));
  sd.insert("float16", tensor({0.5, -1.25, 65504.0}).to(TensorOptions(kFloat16).device(device)));
  sd.insert("bfloat16", tensor({0.5, -3.0}).to(TensorOptions(kBFloat16).device(device)));
  sd.insert("float32", arange(12, TensorOptions(kFloat32).device(device)).view({3, 4}).t());  // non-contiguous
  sd.insert("float64", tensor({1e-300, 3.5}).to(TensorOptions(kFloat64).device(device)));
  sd.insert(
      "complex64",
      tensor({std::complex<double>(1, 2), std::complex<double>(-3, 0.5)}).to(TensorOptions(kComplex64).device(device)));
  sd.insert("complex128", tensor({{std::complex<double>(1e-200, 2)}, {std::complex<double>(-3, 4)}})
                              .to(TensorOptions(kComplex128).device(device)));
  sd.insert("scalar", tensor(2.5).to(device));
  sd.insert("empty", zeros({0, 3}, device));
  return sd;
}

void expect_same(const nn::StateDict& loaded, const nn::StateDict& saved, Device device) {
  ASSERT_EQ(loaded.keys(), saved.keys());
  for (const auto& [name, t] : saved) {
    const Tensor& got = loaded[name];
    EXPECT_EQ(got.dtype(), t.dtype()) << name;
    EXPECT_EQ(got.sizes(), t.sizes()) << name;
    EXPECT_EQ(got.device(), device) << name;
    EXPECT_TRUE(got.cpu().equal(t.cpu())) << name;
  }
}

TEST(Checkpoint, RoundTripsEveryDTypeOnTheCpu) {
  TempFile file("dtypes_cpu");
  nn::StateDict sd = every_dtype(Device(kCPU));
  save(sd, file.path());
  expect_same(load(file.path()), sd, Device(kCPU));
}

TEST(Checkpoint, Complex64IsC64AndComplex128IsF64WithATrailingTwo) {
  TempFile file("complex");
  nn::StateDict sd;
  sd.insert("z64", tensor({std::complex<double>(1, 2)}).to(kComplex64));
  sd.insert("z128", tensor({{std::complex<double>(1, 2), std::complex<double>(3, 4)}}).to(kComplex128));
  save(sd, file.path());
  const std::string bytes = file.bytes();
  const auto header = nlohmann::json::parse(bytes.substr(8, le64(bytes)));
  EXPECT_EQ(header["z64"]["dtype"], "C64");
  EXPECT_EQ(header["z64"]["shape"], nlohmann::json({1}));
  EXPECT_EQ(header["z128"]["dtype"], "F64");
  EXPECT_EQ(header["z128"]["shape"], nlohmann::json({1, 2, 2}));
  EXPECT_EQ(nlohmann::json::parse(header["__metadata__"]["ember.complex128"].get<std::string>()),
            nlohmann::json({"z128"}));
  nn::StateDict loaded = load(file.path());
  EXPECT_EQ(loaded["z128"].dtype(), kComplex128);
  EXPECT_EQ(loaded["z128"].sizes(), (IntList{1, 2}));
  EXPECT_EQ(loaded["z128"].to_vector<std::complex<double>>()[1], std::complex<double>(3, 4));
}

TEST(Checkpoint, CudaTensorsAreCopiedToTheHostAndLoadOntoADevice) {
  ensure_cuda();
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs 2 devices";
  TempFile file("dtypes_cuda");
  nn::StateDict sd = every_dtype(Device("cuda:1"));
  save(sd, file.path());
  expect_same(load(file.path()), sd, Device(kCPU));
  expect_same(load(file.path(), Device("cuda:0")), sd, Device("cuda:0"));
  {
    cuda::DeviceGuard guard(1);
    expect_same(load(file.path(), Device("cuda")), sd, Device("cuda:1"));  // the current device
  }
}

TEST(Checkpoint, SaveRejectsUndefinedTensorsAndReservedNames) {
  TempFile file("bad_save");
  nn::StateDict sd;
  sd.insert("w", Tensor());
  EXPECT_THROW_MSG(save(sd, file.path()), ValueError, "tensor 'w' is undefined");
  nn::StateDict reserved;
  reserved.insert("__metadata__", ones({1}));
  EXPECT_THROW_MSG(save(reserved, file.path()), ValueError, "'__metadata__' is reserved");
  EXPECT_FALSE(std::filesystem::exists(file.path()));
  EXPECT_THROW_MSG(save(nn::StateDict{{"w", ones({1})}}, "/nonexistent-dir/x.safetensors"), ValueError,
                   "/nonexistent-dir/x.safetensors");
}

// Each corrupt file must be a ValueError that names the file and the problem.
void expect_corrupt(const TempFile& file, const std::string& problem) {
  try {
    load(file.path());
    ADD_FAILURE() << "expected a ValueError for " << problem;
  } catch (const ValueError& err) {
    std::string message = err.what();
    EXPECT_NE(message.find("'" + file.path() + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(problem), std::string::npos) << message;
  }
}

TEST(Checkpoint, CorruptFilesAreValueErrorsNamingTheFile) {
  TempFile file("corrupt");
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = float_bytes({1.0f, 2.0f});
  file.write(file_of(good_header, data));
  ASSERT_EQ(load(file.path())["a"].to_vector<float>(), (std::vector<float>{1, 2}));

  const std::string whole = file_of(good_header, data);
  file.write(whole.substr(0, 5));
  expect_corrupt(file, "fewer than the 8-byte header length");
  file.write(whole.substr(0, 20));
  expect_corrupt(file, "the file is truncated");
  file.write(whole.substr(0, whole.size() - 1));
  expect_corrupt(file, "outside the 7 bytes of data");
  file.write(whole + "xx");
  expect_corrupt(file, "the tensors cover 8 bytes of data but the file holds 10");
  file.write(le64_bytes(uint64_t{1} << 40) + good_header);
  expect_corrupt(file, "exceeds the limit of 100000000 bytes");
  file.write(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", data));  // unbalanced
  expect_corrupt(file, "the header is not valid JSON");
  file.write(file_of(R"([1, 2])", data));
  expect_corrupt(file, "the header is not a JSON object");
  file.write(file_of(R"({"a":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})", data));
  expect_corrupt(file, "unsupported dtype 'F8_E4M3'");
  file.write(file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data));
  expect_corrupt(file, "needs 12 bytes but its data offsets span 8");
  file.write(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data));
  expect_corrupt(file, "starts at data offset 4, expected 0");
  file.write(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     data));
  expect_corrupt(file, "starts at data offset 4, expected 8");
  file.write(file_of(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data));
  expect_corrupt(file, "invalid shape");
  file.write(file_of(R"({"a":{"dtype":"F32","shape":[2]}})", data));
  expect_corrupt(file, "no valid \"data_offsets\"");
  file.write(file_of(R"({"a":{"dtype":"BOOL","shape":[8],"data_offsets":[0,8]}})", data));
  expect_corrupt(file, "holds bytes other than 0 and 1");
  file.write(file_of(R"({"__metadata__":{"n":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data));
  expect_corrupt(file, "metadata entry 'n' is not a string");
  file.write(file_of(R"({"__metadata__":{"ember.complex128":"[\"a\"]"},)"
                     R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                     data));
  expect_corrupt(file, "is marked complex128");
}

TEST(Checkpoint, AMissingFileIsAValueErrorNamingIt) {
  EXPECT_THROW_MSG(load("/nonexistent/model.safetensors"), ValueError, "'/nonexistent/model.safetensors'");
}

TEST(Checkpoint, ALoadThatFailsOnTheDeviceReturnsNothing) {
  ensure_cuda();
  TempFile file("device_fail");
  save(nn::StateDict{{"a", ones({2})}}, file.path());
  EXPECT_THROW(load(file.path(), Device(kCUDA, cuda::device_count())), IndexError);
}

}  // namespace
}  // namespace ember
