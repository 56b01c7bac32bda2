// ember-info: what this ember is and what it sees, for bug reports and for checking a
// machine (torch.utils.collect_env, nvidia-smi's summary).
//
//   ember-info            text for people
//   ember-info --json     the same facts as one JSON object
//
// Exit status: 0; 1 when the cuda backend could not be set up (a bad EMBER_EMULATED_*
// value, say: the error is part of the report); 2 on a bad command line. A machine
// without any cuda device is not an error: it is reported as backend "none".
#include <cctype>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "ember/cuda.h"
#include "ember/errors.h"
#include "memory/device_stats.h"
#include "runtime/build_info.h"
#include "runtime/env.h"
#include "runtime/registry.h"

namespace {

// Keys keep the order they were written in, so the JSON reads as the text does.
using json = nlohmann::ordered_json;

std::string key_of(const std::string& name) {
  std::string key = name;
  for (char& c : key) c = c == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

json describe_build() {
  json build = json::object();
  for (const auto& setting : ember::detail::build_options()) build[key_of(setting.name)] = setting.value;
  return {{"version", ember::detail::ember_version()}, {"build", std::move(build)}};
}

json describe_devices(const std::string& backend) {
  json devices = json::array();
  for (int index = 0; index < ember::cuda::device_count(); ++index) {
    const ember::cuda::DeviceProperties props = ember::cuda::get_device_properties(index);
    const auto [free, total] = ember::cuda::mem_get_info(index);
    devices.push_back({{"index", index},
                       {"name", props.name},
                       {"total_memory", total},
                       {"free_memory", free},
                       {"compute_capability", backend == "emulated"
                                                  ? std::string("emulated")
                                                  : std::to_string(props.major) + "." + std::to_string(props.minor)},
                       {"multi_processor_count", props.multi_processor_count}});
  }
  return devices;
}

// The backend ember selects in this environment; a configuration error is reported, not thrown.
json describe_cuda(bool& failed) {
  json cuda = {{"backend", "none"}, {"devices", json::array()}};
  try {
    ember::detail::Runtime& runtime = ember::detail::runtime();
    cuda["backend"] = ember::cuda::backend_name();
    if (!runtime.unavailable_reason.empty()) cuda["reason"] = runtime.unavailable_reason;
    if (ember::cuda::is_available()) cuda["devices"] = describe_devices(cuda["backend"]);
  } catch (const ember::Error& error) {
    cuda["backend"] = "error";
    cuda["error"] = error.what();
    failed = true;
  }
  return cuda;
}

json describe_libraries() {
  json libraries = json::object();
  for (const auto& library : ember::detail::library_versions())
    libraries[library.name] = library.version ? json(*library.version) : json(nullptr);
  return libraries;
}

json describe_environment() {
  json environment = json::object();
  for (const auto& variable : ember::detail::env_variables()) {
    const auto value = ember::detail::env_value(variable.name);
    environment[variable.name] = value ? json(*value) : json(nullptr);
  }
  return environment;
}

void print_text(const json& report) {
  std::cout << "ember " << report["ember"]["version"].get<std::string>() << "\n";
  for (const auto& setting : ember::detail::build_options())
    std::printf("  %-22s %s\n", setting.name.c_str(), setting.value.c_str());

  const json& cuda = report["cuda"];
  std::cout << "\ncuda backend: " << cuda["backend"].get<std::string>();
  if (cuda["backend"] != "error") std::cout << ", " << cuda["devices"].size() << " device(s)";
  std::cout << "\n";
  if (cuda.contains("error")) std::cout << "  error: " << cuda["error"].get<std::string>() << "\n";
  if (cuda.contains("reason")) std::cout << "  " << cuda["reason"].get<std::string>() << "\n";
  for (const json& device : cuda["devices"]) {
    std::printf("  cuda:%d  %s\n", device["index"].get<int>(), device["name"].get<std::string>().c_str());
    std::printf("    compute capability %s, %d multiprocessors\n",
                device["compute_capability"].get<std::string>().c_str(), device["multi_processor_count"].get<int>());
    std::printf("    memory: %s total, %s free\n",
                ember::detail::format_size(device["total_memory"].get<uint64_t>()).c_str(),
                ember::detail::format_size(device["free_memory"].get<uint64_t>()).c_str());
  }

  std::cout << "\nlibraries\n";
  for (const auto& [name, version] : report["libraries"].items())
    std::printf("  %-14s %s\n", name.c_str(),
                version.is_null() ? "not used by this build" : version.get<std::string>().c_str());

  std::cout << "\nenvironment\n";
  for (const auto& variable : ember::detail::env_variables()) {
    const json& value = report["environment"][variable.name];
    const std::string shown = value.is_null() ? "(unset)" : "'" + value.get<std::string>() + "'";
    std::printf("  %-31s %-12s %s\n", variable.name, shown.c_str(), variable.meaning);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool as_json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      as_json = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "usage: ember-info [--json]\n"
                   "Prints ember's version and build options, the cuda backend and its devices,\n"
                   "the libraries ember runs on and the environment variables it reads.\n";
      return 0;
    } else {
      std::cerr << "ember-info: unknown argument '" << argv[i] << "'\nusage: ember-info [--json]\n";
      return 2;
    }
  }
  bool failed = false;
  const json report = {{"ember", describe_build()},
                       {"cuda", describe_cuda(failed)},
                       {"libraries", describe_libraries()},
                       {"environment", describe_environment()}};
  if (as_json) {
    std::cout << report.dump(2) << "\n";
  } else {
    print_text(report);
  }
  return failed ? 1 : 0;
}
