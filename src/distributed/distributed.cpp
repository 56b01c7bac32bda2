// The default process group and the free functions of ember::distributed.
#include <mutex>

#include "distributed/process_group.h"
#include "distributed/rendezvous.h"
#include "ember/errors.h"

namespace ember::distributed {

using detail::distributed::ProcessGroup;

const char* reduce_op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
  }
  return "?";
}

bool Work::is_success() { return is_completed() && !exception(); }

namespace {

enum ErrorKind : int { kNone, kError, kValue, kIndex, kType, kDevice, kMemory, kCuda, kDistributed, kDataRace };

template <typename E>
std::exception_ptr make_error(const std::string& message) {
  return std::make_exception_ptr(E(message));
}

}  // namespace

std::exception_ptr Work::exception() {
  std::lock_guard lock(mutex_);
  switch (error_kind_) {
    case kNone: return nullptr;
    case kValue: return make_error<ValueError>(error_message_);
    case kIndex: return make_error<IndexError>(error_message_);
    case kType: return make_error<TypeError>(error_message_);
    case kDevice: return make_error<DeviceError>(error_message_);
    case kMemory: return make_error<OutOfMemoryError>(error_message_);
    case kCuda: return make_error<CudaError>(error_message_);
    case kDistributed: return make_error<DistributedError>(error_message_);
    case kDataRace: return make_error<DataRaceError>(error_message_);
    default: return make_error<Error>(error_message_);
  }
}

void Work::set_exception(const std::exception_ptr& error) {
  int kind = kError;
  std::string message;
  try {
    std::rethrow_exception(error);
  } catch (const DistributedError& e) {
    kind = kDistributed, message = e.what();
  } catch (const ValueError& e) {
    kind = kValue, message = e.what();
  } catch (const IndexError& e) {
    kind = kIndex, message = e.what();
  } catch (const TypeError& e) {
    kind = kType, message = e.what();
  } catch (const DeviceError& e) {
    kind = kDevice, message = e.what();
  } catch (const OutOfMemoryError& e) {
    kind = kMemory, message = e.what();
  } catch (const CudaError& e) {
    kind = kCuda, message = e.what();
  } catch (const DataRaceError& e) {  // the stream sanitizer refused a collective's stream work
    kind = kDataRace, message = e.what();
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown error";
  }
  std::lock_guard lock(mutex_);
  error_kind_ = kind;
  error_message_ = std::move(message);
}

namespace {

struct DefaultGroup {
  std::string backend;
  std::shared_ptr<Store> store;
  std::shared_ptr<ProcessGroup> group;
};

std::mutex group_mutex;
std::unique_ptr<DefaultGroup> default_group;  // guarded by group_mutex
uint64_t generation = 0;                      // init_process_group calls so far

std::shared_ptr<ProcessGroup> group() {
  std::lock_guard lock(group_mutex);
  EMBER_CHECK(default_group, DistributedError,
              "Default process group has not been initialized, please make sure to call init_process_group.");
  return default_group->group;
}

std::shared_ptr<Work> finish(std::shared_ptr<Work> work, bool async_op) {
  if (!async_op) work->wait();
  return work;
}

}  // namespace

void init_process_group(const std::string& backend, const InitOptions& options) {
  EMBER_CHECK(backend == "gloo" || backend == "nccl", ValueError, "Invalid backend: '", backend,
              "' (ember supports 'gloo' and 'nccl')");
  EMBER_CHECK(options.timeout().count() > 0, ValueError, "init_process_group: the timeout must be positive");
  std::lock_guard lock(group_mutex);
  EMBER_CHECK(!default_group, DistributedError, "trying to initialize the default process group twice!");
  auto meeting = detail::distributed::rendezvous(options);
  detail::distributed::GroupSetup setup;
  setup.store = meeting.store;
  setup.prefix = meeting.key_prefix + "default_pg/" + std::to_string(generation++) + "/";
  setup.rank = meeting.rank;
  setup.world_size = meeting.world_size;
  setup.timeout = options.timeout();
  setup.store_host = meeting.store_host;
  if (auto* tcp = dynamic_cast<TCPStore*>(meeting.store.get())) setup.local_address = tcp->local_address();
  detail::distributed::meet(*setup.store, setup.prefix, setup.rank, setup.world_size, setup.timeout);
  auto made = std::make_unique<DefaultGroup>();
  made->backend = backend;
  made->store = meeting.store;
  made->group =
      backend == "gloo" ? detail::distributed::make_gloo_group(setup) : detail::distributed::make_nccl_group(setup);
  default_group = std::move(made);
}

void destroy_process_group() {
  std::unique_ptr<DefaultGroup> ending;
  {
    std::lock_guard lock(group_mutex);
    EMBER_CHECK(default_group, DistributedError,
                "Default process group has not been initialized, please make sure to call init_process_group.");
    ending = std::move(default_group);
  }
  ending->group.reset();  // drains its queued collectives
  if (auto* tcp = dynamic_cast<TCPStore*>(ending->store.get())) {
    try {
      tcp->leave();
    } catch (const DistributedError&) {
      // The store's host left first; nothing to tell it.
    }
  }
}

bool is_initialized() noexcept {
  std::lock_guard lock(group_mutex);
  return default_group != nullptr;
}

int get_rank() { return group()->rank(); }
int get_world_size() { return group()->world_size(); }
std::string get_backend() {
  std::lock_guard lock(group_mutex);
  EMBER_CHECK(default_group, DistributedError,
              "Default process group has not been initialized, please make sure to call init_process_group.");
  return default_group->backend;
}

std::shared_ptr<Work> all_reduce(const Tensor& tensor, ReduceOp op, bool async_op) {
  return finish(group()->all_reduce(tensor, op, async_op), async_op);
}
std::shared_ptr<Work> broadcast(const Tensor& tensor, int src, bool async_op) {
  return finish(group()->broadcast(tensor, src, async_op), async_op);
}
std::shared_ptr<Work> all_gather(const std::vector<Tensor>& outputs, const Tensor& tensor, bool async_op) {
  return finish(group()->all_gather(outputs, tensor, async_op), async_op);
}
std::shared_ptr<Work> reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                                     bool async_op) {
  return finish(group()->reduce_scatter(output, inputs, op, async_op), async_op);
}
std::shared_ptr<Work> barrier(bool async_op) { return finish(group()->barrier(async_op), async_op); }

}  // namespace ember::distributed
