#include "runtime/stream_pool.h"

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "ember/errors.h"
#include "runtime/registry.h"

namespace ember::detail {
namespace {

struct PriorityPool {
  std::atomic<uint32_t> next{0};                                    // round-robin counter, as c10's priority_counters
  std::array<std::shared_ptr<StreamState>, kStreamsPerPool> slots;  // guarded by DevicePools::mutex
};

struct DevicePools {
  std::mutex mutex;
  uint64_t generation = 0;  // the device's reset generation the slots were made under
  std::array<PriorityPool, kMaxStreamPriorities> pools;
};

// Never destroyed, like the registry: its streams' workers may outlive static destruction.
std::array<DevicePools, kMaxDevices>& all_pools() {
  static auto* pools = new std::array<DevicePools, kMaxDevices>();
  return *pools;
}

std::atomic<uint64_t> g_next_stream_id{1};  // 0 is the default streams' id

}  // namespace

std::shared_ptr<StreamState> pooled_stream(int device, int priority) {
  EMBER_ASSERT(device >= 0 && device < kMaxDevices);
  Backend& b = backend();
  int least = b.priority_range().first;
  int level = least - priority;  // 0: the default priority
  EMBER_ASSERT(level >= 0 && level < kMaxStreamPriorities);
  DevicePools& device_pools = all_pools()[static_cast<size_t>(device)];
  PriorityPool& pool = device_pools.pools[static_cast<size_t>(level)];
  size_t index = pool.next.fetch_add(1, std::memory_order_relaxed) % kStreamsPerPool;

  std::vector<std::shared_ptr<StreamState>> stale;  // released outside the lock
  std::lock_guard lock(device_pools.mutex);
  uint64_t generation = device_generation(device);
  if (device_pools.generation != generation) {
    for (PriorityPool& p : device_pools.pools) {
      for (auto& slot : p.slots) {
        if (slot) stale.push_back(std::move(slot));
      }
    }
    device_pools.generation = generation;
  }
  std::shared_ptr<StreamState>& slot = pool.slots[index];
  if (!slot) {
    BackendStream* native = b.create_stream(device, priority);  // CudaError on failure; the slot stays empty
    slot = std::make_shared<StreamState>(device, priority, g_next_stream_id.fetch_add(1), native, /*owned=*/true,
                                         generation);
  }
  return slot;
}

}  // namespace ember::detail
