// ember-info, run as a program in chosen environments: emulated devices, no cuda
// backend, a bad configuration, a bad command line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using json = nlohmann::ordered_json;  // keeps the order ember-info wrote
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct ToolRun {
  int status = -1;
  std::string out;  // stdout and stderr
};

// Runs ember-info with the variables it reads cleared, then `assignments` set.
ToolRun run_info(const std::string& assignments, const std::string& arguments) {
  std::string command = "env";
  for (const char* name :
       {"CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUBLAS_WORKSPACE_CONFIG", "EMBER_EMULATED_DEVICES", "EMBER_EMULATED_MEMORY",
        "EMBER_NUM_THREADS", "EMBER_CUDA_SANITIZER"})
    command += std::string(" -u ") + name;
  command += " " + assignments + " '" EMBER_INFO_PATH "' " + arguments + " 2>&1";
  ToolRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

json run_json(const std::string& assignments, int expected_status = 0) {
  ToolRun run = run_info(assignments, "--json");
  EXPECT_EQ(run.status, expected_status) << run.out;
  return json::parse(run.out);
}

TEST(EmberInfo, EmulatedDevicesAsJson) {
  const json report = run_json("EMBER_EMULATED_DEVICES=3 EMBER_EMULATED_MEMORY=1GiB CUDA_VISIBLE_DEVICES=2,0");
  const json& cuda = report.at("cuda");
  EXPECT_EQ(cuda.at("backend"), "emulated");
  EXPECT_FALSE(cuda.contains("reason"));
  ASSERT_EQ(cuda.at("devices").size(), 2u);  // CUDA_VISIBLE_DEVICES keeps two, reordered
  const char* names[] = {"ember emulated GPU 2", "ember emulated GPU 0"};
  for (int i = 0; i < 2; ++i) {
    const json& device = cuda.at("devices").at(i);
    EXPECT_EQ(device.at("index"), i);
    EXPECT_EQ(device.at("name"), names[i]);
    EXPECT_EQ(device.at("total_memory"), 1u << 30);
    EXPECT_EQ(device.at("free_memory"), 1u << 30);  // nothing allocated
    EXPECT_EQ(device.at("compute_capability"), "emulated");
    EXPECT_GE(device.at("multi_processor_count").get<int>(), 1);
  }
  const json& environment = report.at("environment");
  EXPECT_EQ(environment.at("EMBER_EMULATED_DEVICES"), "3");
  EXPECT_EQ(environment.at("EMBER_EMULATED_MEMORY"), "1GiB");
  EXPECT_EQ(environment.at("CUDA_VISIBLE_DEVICES"), "2,0");
  EXPECT_TRUE(environment.at("CUDA_LAUNCH_BLOCKING").is_null());
  EXPECT_TRUE(environment.at("PYTORCH_CUDA_ALLOC_CONF").is_null());
}

TEST(EmberInfo, EmulatedDevicesAsText) {
  const ToolRun run = run_info("EMBER_EMULATED_DEVICES=2 EMBER_EMULATED_MEMORY=512MiB CUDA_LAUNCH_BLOCKING=1", "");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_THAT(run.out, StartsWith("ember " EMBER_VERSION_STRING "\n"));
  EXPECT_THAT(run.out, HasSubstr("cuda backend: emulated, 2 device(s)\n"));
  EXPECT_THAT(run.out, HasSubstr("  cuda:0  ember emulated GPU 0\n"));
  EXPECT_THAT(run.out, HasSubstr("  cuda:1  ember emulated GPU 1\n"));
  EXPECT_THAT(run.out, HasSubstr("    memory: 512.00 MiB total, 512.00 MiB free\n"));
  EXPECT_THAT(run.out, HasSubstr("    compute capability emulated, "));
  EXPECT_THAT(run.out, HasSubstr("  CUDA_LAUNCH_BLOCKING            '1'"));
  EXPECT_THAT(run.out, HasSubstr("  PYTORCH_CUDA_ALLOC_CONF         (unset)"));
}

TEST(EmberInfo, NoCudaBackend) {
  // CUDA_VISIBLE_DEVICES="" hides any GPU, so this holds on every machine.
  const json report = run_json("CUDA_VISIBLE_DEVICES=");
  const json& cuda = report.at("cuda");
  EXPECT_TRUE(cuda.at("devices").empty());
  EXPECT_THAT(cuda.at("reason").get<std::string>(), StartsWith("No CUDA device is available"));
#if !EMBER_TEST_DRIVER_BUILT
  EXPECT_EQ(cuda.at("backend"), "none");
  EXPECT_THAT(cuda.at("reason").get<std::string>(), HasSubstr("set EMBER_EMULATED_DEVICES=N"));
  for (const char* library : {"CUDA runtime", "cuBLAS", "cuFFT"})
    EXPECT_TRUE(report.at("libraries").at(library).is_null());
  EXPECT_EQ(report.at("ember").at("build").at("cuda_driver_backend"), "not built");
#endif
  EXPECT_EQ(report.at("environment").at("CUDA_VISIBLE_DEVICES"), "");

  const ToolRun text = run_info("CUDA_VISIBLE_DEVICES=", "");
  EXPECT_EQ(text.status, 0);
  EXPECT_THAT(text.out, HasSubstr(", 0 device(s)\n  No CUDA device is available"));
}

TEST(EmberInfo, VersionsAndBuild) {
  const json report = run_json("");
  EXPECT_EQ(report.at("ember").at("version"), EMBER_VERSION_STRING);
  const json& build = report.at("ember").at("build");
  for (const char* key : {"build_type", "cuda_driver_backend", "sanitizers", "compiler"})
    EXPECT_FALSE(build.at(key).get<std::string>().empty()) << key;
  // Every library is listed, in this order; the ones ember always links report a version.
  std::vector<std::string> names;
  for (const auto& [name, version] : report.at("libraries").items()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"CUDA runtime", "CUDA driver", "cuBLAS", "cuFFT", "NCCL", "OpenBLAS",
                                             "FFTW", "Gloo"}));
#if EMBER_TEST_DRIVER_BUILT
  // Versions the CUDA libraries report without a GPU; cuBLAS is opened for the question
  // (Note [cuBLAS opened on first use]).
  for (const char* library : {"CUDA runtime", "cuBLAS", "cuFFT", "NCCL"})
    EXPECT_THAT(report.at("libraries").at(library).get<std::string>(), ::testing::MatchesRegex("[0-9]+\\.[0-9]+.*"))
        << library;
#endif
  EXPECT_THAT(report.at("libraries").at("OpenBLAS").get<std::string>(), StartsWith("OpenBLAS 0."));
  EXPECT_THAT(report.at("libraries").at("FFTW").get<std::string>(), StartsWith("fftw-3."));
  EXPECT_THAT(report.at("libraries").at("Gloo").get<std::string>(), StartsWith("0."));
  // The environment lists the variables ember reads (all unset here).
  for (const char* name :
       {"CUDA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_NO_CUDA_MEMORY_CACHING", "CUBLAS_WORKSPACE_CONFIG", "EMBER_EMULATED_DEVICES", "EMBER_EMULATED_MEMORY",
        "EMBER_NUM_THREADS", "EMBER_CUDA_SANITIZER"})
    EXPECT_TRUE(report.at("environment").at(name).is_null()) << name;
}

TEST(EmberInfo, BadConfigurationIsReported) {
  const json report = run_json("EMBER_EMULATED_DEVICES=many", /*expected_status=*/1);
  EXPECT_EQ(report.at("cuda").at("backend"), "error");
  EXPECT_EQ(report.at("cuda").at("error"),
            "EMBER_EMULATED_DEVICES must be a number of devices between 1 and 64, but got 'many'");
  EXPECT_EQ(report.at("environment").at("EMBER_EMULATED_DEVICES"), "many");
  EXPECT_EQ(report.at("ember").at("version"), EMBER_VERSION_STRING);  // the rest is still reported
}

TEST(EmberInfo, BadArgument) {
  const ToolRun run = run_info("", "--jsn");
  EXPECT_EQ(run.status, 2);
  EXPECT_EQ(run.out, "ember-info: unknown argument '--jsn'\nusage: ember-info [--json]\n");
}

}  // namespace
