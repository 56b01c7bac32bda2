// Deadlines from timeouts that may be huge.
//
// A timeout of milliseconds::max() (or 300 years) means "wait as long as it takes", as
// in PyTorch; now() + timeout would overflow the clock's representation and yield a
// deadline in the past, so every wait in ember::distributed computes its deadline here,
// saturating at time_point::max() instead.
#pragma once

#include <chrono>

namespace ember::detail {

/// `now + timeout`, or Clock::time_point::max() when that does not fit; a negative
/// timeout is now.
template <typename Clock = std::chrono::steady_clock, typename Rep, typename Period>
typename Clock::time_point deadline_after(std::chrono::duration<Rep, Period> timeout,
                                          typename Clock::time_point now = Clock::now()) {
  using Duration = typename Clock::duration;
  if (timeout <= timeout.zero()) return now;
  // Compare in the timeout's own unit before converting, so the conversion cannot overflow.
  auto room = Clock::time_point::max() - now;
  if (timeout >= std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(room)) return Clock::time_point::max();
  return now + std::chrono::duration_cast<Duration>(timeout);
}

/// `a + b` for non-negative millisecond counts, saturating at milliseconds::max().
inline std::chrono::milliseconds saturating_add(std::chrono::milliseconds a, std::chrono::milliseconds b) {
  if (a > std::chrono::milliseconds::max() - b) return std::chrono::milliseconds::max();
  return a + b;
}

}  // namespace ember::detail
