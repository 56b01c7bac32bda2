// What examples/train and examples/charlm set up alike: the device to train on and, under
// ember-run, this process's rank of a DistributedDataParallel run.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "ember/ember.h"

namespace examples {

/// The spec's pattern: `device` if given, else cuda if available, else the cpu;
/// `disable_cuda` picks the cpu. With no GPU, ember's emulated devices stand in for one
/// (two when `data_parallel` wants several).
inline ember::Device choose_device(bool disable_cuda, const std::string& device, bool data_parallel) {
  using namespace ember;
  if (disable_cuda) return Device(kCPU);
  Device wanted = device.empty() ? Device(kCUDA) : Device(device);
  if (wanted.is_cpu()) return wanted;
  if (!std::getenv("EMBER_EMULATED_DEVICES") && !cuda::driver_is_available())
    cuda::emulate(data_parallel ? 2 : 1, size_t{4} << 30);
  if (!cuda::is_available()) return Device(kCPU);
  return wanted.has_index() ? wanted : Device(kCUDA, cuda::current_device());
}

/// --data-parallel's devices: `device` first (the module's, where outputs are gathered), then
/// every other cuda device of the process. `usage` refuses a device that is not cuda.
inline std::vector<int> data_parallel_devices(ember::Device device, void (*usage)(const std::string&)) {
  if (!device.is_cuda()) usage("--data-parallel needs cuda devices; the device is " + device.str());
  std::vector<int> device_ids{device.index()};
  for (int i = 0; i < ember::cuda::device_count(); ++i) {
    if (i != device.index()) device_ids.push_back(i);
  }
  return device_ids;
}

struct DdpRank {
  int rank = 0, world = 1, local_rank = 0;
};

/// Joins ember-run's process group; each local rank gets a device of its own (emulated
/// ones, one per local rank, when there is no GPU). `usage` reports a bad command line.
inline DdpRank init_ddp(bool disable_cuda, int64_t batch_size, void (*usage)(const std::string&)) {
  using namespace ember;
  const char* local_rank = std::getenv("LOCAL_RANK");
  const char* local_world = std::getenv("LOCAL_WORLD_SIZE");
  if (!local_rank || !local_world) usage("--ddp runs under ember-run (LOCAL_RANK and LOCAL_WORLD_SIZE are unset)");
  DdpRank r;
  r.local_rank = std::atoi(local_rank);
  if (!disable_cuda && !cuda::driver_is_available()) ::setenv("EMBER_EMULATED_DEVICES", local_world, /*overwrite=*/0);
  distributed::init_process_group("gloo");
  r.rank = distributed::get_rank();
  r.world = distributed::get_world_size();
  if (batch_size % r.world != 0) usage("--batch-size must be a multiple of the number of ranks");
  return r;
}

}  // namespace examples
