// The pool behind parallel_for; see Note [CPU parallelism] in parallel.h.
#include "kernels/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ember::detail {
namespace {

// True on pool workers always and on a caller while it runs a region: a nested
// parallel_for then runs inline (the pool is taken, and its mutex is not recursive).
thread_local bool t_in_parallel_region = false;

// Note [Pool spin-wait]
// A training step runs dozens of parallel regions back to back, each of well under a
// millisecond; waking a sleeping worker (a futex wake, then the scheduler) costs tens of
// microseconds, as does putting the caller to sleep while a worker finishes. So, as
// OpenMP's runtime does, a worker that finished a region polls for the next one, and a
// caller polls for its workers' chunks, for a short while (kSpinWait) before sleeping on
// the condition variables. Polling yields the core each time, so on a machine with more
// runnable threads than cores (OpenBLAS's own workers, other processes) it takes little
// from them.
constexpr std::chrono::microseconds kSpinWait{50};

// Polls `ready` until it holds (true) or kSpinWait passes (false).
template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinWait;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// A positive thread count from `name`, or 0 when it is unset or not one.
int threads_from(const char* name) {
  const char* env = std::getenv(name);
  if (!env) return 0;
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  return end != env && *end == '\0' && n >= 1 ? static_cast<int>(std::min(n, 1024L)) : 0;
}

// EMBER_NUM_THREADS, else OMP_NUM_THREADS (as LibTorch's intra-op pool: torchrun and
// ember-run set it to 1 for each of several ranks on a node), else one per core.
int configured_threads() {
  for (const char* name : {"EMBER_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (int n = threads_from(name)) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// One parallel region: chunks are claimed with an atomic counter by the caller and
// by whichever workers wake in time.
struct Job {
  Job(RangeFn f, int64_t b, int64_t e, int64_t c, int64_t n) : fn(f), begin(b), end(e), chunk(c), num_chunks(n) {}
  RangeFn fn;
  int64_t begin, end, chunk;
  int64_t num_chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex error_mutex;
  std::exception_ptr error;

  // Runs chunks until none are left.
  void work() {
    for (int64_t c = next.fetch_add(1); c < num_chunks; c = next.fetch_add(1)) {
      int64_t b = begin + c * chunk, e = std::min(end, b + chunk);
      try {
        fn(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(true);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Returns false (and does nothing) when another region is running.
  bool try_run(Job& job) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    t_in_parallel_region = true;
    job.work();
    t_in_parallel_region = false;
    // The job lives on the caller's stack: retire it only when no worker holds it.
    auto retired = [&] { return active_.load() == 0 && job.done.load(std::memory_order_acquire) == job.num_chunks; };
    spin_until(retired);  // Note [Pool spin-wait]
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, retired);
    job_ = nullptr;
    return true;
  }

 private:
  void worker_loop() {
    t_in_parallel_region = true;
    uint64_t seen = 0;
    for (;;) {
      // Note [Pool spin-wait]
      spin_until([&] { return stopping_.load() || generation_.load(std::memory_order_acquire) != seen; });
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_.load() || (job_ != nullptr && generation_.load() != seen); });
      if (stopping_.load()) return;
      seen = generation_.load();
      Job* job = job_;
      active_.fetch_add(1);
      lock.unlock();
      job->work();
      lock.lock();
      if (active_.fetch_sub(1) == 1) finished_.notify_all();
    }
  }

  std::mutex busy_;   // held by the caller running a region
  std::mutex mutex_;  // guards job_ and the changes of generation_, active_ and stopping_
  std::condition_variable wake_, finished_;
  Job* job_ = nullptr;
  // Atomic so that the spin-waits may read them without the mutex.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_;
};

ThreadPool& pool() {
  // Leaked on purpose: kernels may run from threads that outlive static destruction.
  static ThreadPool* instance = new ThreadPool(configured_threads());
  return *instance;
}

}  // namespace

int num_threads() { return pool().size(); }

void parallel_for_impl(int64_t begin, int64_t end, int64_t grain, RangeFn fn) {
  int64_t n = end - begin;
  int threads = t_in_parallel_region ? 1 : num_threads();
  int64_t chunks = std::min<int64_t>(threads, (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1) {
    fn(begin, end);
    return;
  }
  int64_t chunk = (n + chunks - 1) / chunks;
  Job job(fn, begin, end, chunk, (n + chunk - 1) / chunk);
  if (!pool().try_run(job)) {
    fn(begin, end);  // pool busy: run inline rather than wait
    return;
  }
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace ember::detail
