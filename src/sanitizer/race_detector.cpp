// RaceDetector: see Note [Stream race detection] in race_detector.h.
#include "sanitizer/race_detector.h"

#include <algorithm>

namespace ember::detail::sanitizer {

namespace {

void join_into(std::vector<uint64_t>& into, const std::vector<uint64_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] = std::max(into[i], from[i]);
}

}  // namespace

namespace {

// `f`'s bytes seen with period `p` (a divisor of f.period): a window holding them all,
// or dense when they fill the period.
Footprint reduced(const Footprint& f, uint64_t p) {
  if (f.width >= p) return Footprint{};
  return Footprint{p, f.phase % p, f.width};
}

}  // namespace

bool Footprint::disjoint(const Footprint& other) const noexcept {
  if (dense() || other.dense()) return false;
  if (period != other.period) {
    // With one period a multiple of the other, compare in the smaller; otherwise assume
    // they meet (Note [Access footprints]).
    if (other.period % period == 0) return disjoint(reduced(other, period));
    if (period % other.period == 0) return reduced(*this, other.period).disjoint(other);
    return false;
  }
  uint64_t distance = (other.phase + period - phase) % period;  // other's window, from this one's start
  return distance >= width && distance + other.width <= period;
}

bool Footprint::covers(const Footprint& other) const noexcept {
  if (dense()) return true;
  if (other.dense() || other.period % period != 0) return false;
  Footprint in_mine = other.period == period ? other : reduced(other, period);
  if (in_mine.dense()) return false;
  uint64_t distance = (in_mine.phase + period - phase) % period;
  return distance + in_mine.width <= width;
}

uint32_t RaceDetector::number_of(StreamKey stream) {
  auto [it, inserted] = numbers_.try_emplace(stream, static_cast<uint32_t>(streams_.size()));
  if (inserted) {
    streams_.emplace_back();
    keys_.push_back(stream);
  }
  return it->second;
}

void RaceDetector::stream_created(StreamKey stream, int device, bool is_default) {
  StreamInfo& info = streams_[number_of(stream)];
  info.device = device;
  info.is_default = is_default;
}

void RaceDetector::stream_destroyed(StreamKey stream) {
  // Destroying a stream waits for its work.
  auto it = numbers_.find(stream);
  if (it == numbers_.end()) return;
  const StreamInfo& info = streams_[it->second];
  if (host_clock_.size() <= it->second) host_clock_.resize(it->second + 1, 0);
  host_clock_[it->second] = std::max(host_clock_[it->second], info.seq);
  numbers_.erase(it);
}

void RaceDetector::event_created(EventKey event) { events_.erase(event); }
void RaceDetector::event_destroyed(EventKey event) { events_.erase(event); }

void RaceDetector::event_record(EventKey event, StreamKey stream) {
  uint32_t n = number_of(stream);
  std::vector<uint64_t> clock = streams_[n].clock;
  if (clock.size() <= n) clock.resize(n + 1, 0);
  clock[n] = streams_[n].seq;
  events_[event] = std::move(clock);
}

void RaceDetector::event_wait(StreamKey stream, EventKey event) {
  auto it = events_.find(event);
  if (it == events_.end()) return;  // never recorded: waiting is a no-op, as in CUDA
  join_into(streams_[number_of(stream)].clock, it->second);
}

void RaceDetector::event_synchronize(EventKey event) {
  auto it = events_.find(event);
  if (it != events_.end()) host_join(it->second);
}

void RaceDetector::stream_synchronize(StreamKey stream) {
  uint32_t n = number_of(stream);
  host_join(streams_[n].clock);
  if (host_clock_.size() <= n) host_clock_.resize(n + 1, 0);
  host_clock_[n] = std::max(host_clock_[n], streams_[n].seq);
}

void RaceDetector::device_synchronize(int device) {
  for (uint32_t n = 0; n < streams_.size(); ++n) {
    const StreamInfo& info = streams_[n];
    if (device >= 0 && info.device >= 0 && info.device != device) continue;
    if (host_clock_.size() <= n) host_clock_.resize(n + 1, 0);
    host_clock_[n] = std::max(host_clock_[n], info.seq);
  }
}

void RaceDetector::host_join(const std::vector<uint64_t>& clock) { join_into(host_clock_, clock); }

template <typename F>
void RaceDetector::for_each_range(uintptr_t begin, uintptr_t end, F&& f) {
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second.end > begin) --it;
  for (; it != ranges_.end() && it->first < end; ++it) f(it->second);
}

void RaceDetector::memory_allocation(uintptr_t, size_t) {
  // Nothing to do: the block's free (or the segment's release) already left only what
  // its next user must be ordered after (Note [Freed blocks]).
}

void RaceDetector::memory_deallocation(uintptr_t pointer, size_t bytes) {
  erase_ranges(pointer, pointer + std::max<size_t>(bytes, 1));
}

void RaceDetector::block_freed(uintptr_t pointer, size_t bytes, StreamKey owner, const std::vector<StreamKey>& waited) {
  uintptr_t end = pointer + std::max<size_t>(bytes, 1);
  // Stream numbers that no longer need ordering: the owner and the recorded streams.
  std::vector<uint32_t> safe;
  for (StreamKey key : waited) {
    if (auto it = numbers_.find(key); it != numbers_.end()) safe.push_back(it->second);
  }
  if (auto it = numbers_.find(owner); owner != 0 && it != numbers_.end()) safe.push_back(it->second);
  auto is_safe = [&](const AccessRecord& r) {
    return std::find(safe.begin(), safe.end(), r.stream) != safe.end() || ordered_by_host(r);
  };
  split_at(pointer);  // records outlive the block only where the block is
  split_at(end);
  for (auto it = ranges_.lower_bound(pointer); it != ranges_.end() && it->first < end;) {
    Range& range = it->second;
    std::erase_if(range.writes, is_safe);
    std::erase_if(range.reads, is_safe);
    it = range.writes.empty() && range.reads.empty() ? ranges_.erase(it) : std::next(it);
  }
}

void RaceDetector::erase_ranges(uintptr_t begin, uintptr_t end) {
  split_at(begin);
  split_at(end);
  auto it = ranges_.lower_bound(begin);
  while (it != ranges_.end() && it->first < end) it = ranges_.erase(it);
}

void RaceDetector::split_at(uintptr_t at) {
  auto it = ranges_.upper_bound(at);
  if (it == ranges_.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Range tail = it->second;  // the records hold for every byte of the range
  it->second.end = at;
  ranges_.emplace_hint(std::next(it), at, std::move(tail));
}

std::map<uintptr_t, RaceDetector::Range>::iterator RaceDetector::cover(uintptr_t begin, uintptr_t end) {
  // The common case, a whole tensor accessed again: one range already is [begin, end).
  auto exact = ranges_.lower_bound(begin);
  if (exact != ranges_.end() && exact->first == begin && exact->second.end == end) return exact;
  split_at(begin);
  split_at(end);
  uintptr_t at = begin;
  auto it = ranges_.lower_bound(begin);
  auto first = ranges_.end();
  while (at < end) {
    if (it == ranges_.end() || it->first > at) {
      uintptr_t gap_end = it == ranges_.end() ? end : std::min(end, it->first);
      it = ranges_.emplace_hint(it, at, Range{gap_end, {}, {}});
    }
    if (first == ranges_.end()) first = it;
    at = it->second.end;
    ++it;
  }
  return first;
}

uint64_t RaceDetector::known(uint32_t stream, uint32_t other) const {
  const std::vector<uint64_t>& clock = streams_[stream].clock;
  uint64_t own = other < clock.size() ? clock[other] : 0;
  uint64_t host = other < host_clock_.size() ? host_clock_[other] : 0;
  return std::max(own, host);
}

bool RaceDetector::ordered(const AccessRecord& previous, uint32_t stream) const {
  return previous.stream == stream || known(stream, previous.stream) >= previous.seq;
}

bool RaceDetector::ordered_by_host(const AccessRecord& previous) const {
  return previous.stream < host_clock_.size() && host_clock_[previous.stream] >= previous.seq;
}

std::vector<DataRace> RaceDetector::find_races(uint32_t n, bool host, const std::vector<MemoryAccess>& accesses,
                                               const char* op, const std::shared_ptr<const StackTrace>& stack) {
  std::vector<DataRace> races;
  // One report per operand (its first race), however many ranges and accesses it meets.
  std::vector<uintptr_t> reported;
  auto report = [&](const MemoryAccess& access, const AccessRecord& previous) {
    if (std::find(reported.begin(), reported.end(), access.begin) != reported.end()) return;
    reported.push_back(access.begin);
    DataRace race;
    race.pointer = access.begin;
    race.current = AccessRecord{
        access.type, n, host ? 0 : streams_[n].seq + 1, op, access.argument, access.index, stack, access.footprint};
    race.previous = previous;
    if (host) {
      race.current_stream.is_host = true;
    } else {
      race.current_stream = describe_number(n);
    }
    race.previous_stream = describe_number(previous.stream);
    races.push_back(std::move(race));
  };
  auto unordered = [&](const AccessRecord& r) { return host ? !ordered_by_host(r) : !ordered(r, n); };
  // Writes first: a write checks everything a read of the same bytes would.
  for (AccessType pass : {AccessType::Write, AccessType::Read}) {
    for (const MemoryAccess& access : accesses) {
      if (access.type != pass || access.begin >= access.end) continue;
      for_each_range(access.begin, access.end, [&](const Range& range) {
        for (const AccessRecord& write : range.writes) {
          if (!write.footprint.disjoint(access.footprint) && unordered(write)) report(access, write);
        }
        if (pass == AccessType::Read) return;
        for (const AccessRecord& read : range.reads) {
          if (!read.footprint.disjoint(access.footprint) && unordered(read)) report(access, read);
        }
      });
    }
  }
  return races;
}

std::vector<DataRace> RaceDetector::check(StreamKey stream, const std::vector<MemoryAccess>& accesses, const char* op,
                                          const std::shared_ptr<const StackTrace>& stack) {
  if (ranges_.empty()) return {};
  return find_races(number_of(stream), /*host=*/false, accesses, op, stack);
}

std::vector<DataRace> RaceDetector::check_host(const std::vector<MemoryAccess>& accesses, const char* op) {
  if (ranges_.empty()) return {};
  return find_races(0, /*host=*/true, accesses, op, nullptr);
}

void RaceDetector::record(StreamKey stream, const std::vector<MemoryAccess>& accesses, const char* op,
                          const std::shared_ptr<const StackTrace>& stack, int device) {
  uint32_t n = number_of(stream);
  StreamInfo& info = streams_[n];
  if (info.device < 0) info.device = device;
  uint64_t seq = ++info.seq;
  if (info.clock.size() <= n) info.clock.resize(n + 1, 0);
  info.clock[n] = seq;
  for (AccessType pass : {AccessType::Write, AccessType::Read}) {
    for (const MemoryAccess& access : accesses) {
      if (access.type != pass || access.begin >= access.end) continue;
      const Footprint& fp = access.footprint;
      AccessRecord record{access.type, n, seq, op, access.argument, access.index, stack, fp};
      for (auto it = cover(access.begin, access.end); it != ranges_.end() && it->first < access.end; ++it) {
        Range& range = it->second;
        if (pass == AccessType::Write) {
          // Whatever this write covers is ordered before it, or was reported.
          std::erase_if(range.writes, [&](const AccessRecord& w) { return fp.covers(w.footprint); });
          std::erase_if(range.reads, [&](const AccessRecord& r) { return fp.covers(r.footprint); });
          range.writes.push_back(record);
          continue;
        }
        bool written_here = std::any_of(range.writes.begin(), range.writes.end(), [&](const AccessRecord& w) {
          return w.stream == n && w.seq == seq && w.footprint.covers(fp);
        });
        if (written_here) continue;  // read and written by this op: the write stands for both
        std::erase_if(range.reads, [&](const AccessRecord& r) { return r.stream == n && fp.covers(r.footprint); });
        range.reads.push_back(record);
      }
    }
  }
}

void RaceDetector::reset() {
  numbers_.clear();
  streams_.clear();
  keys_.clear();
  host_clock_.clear();
  events_.clear();
  ranges_.clear();
}

StreamDescription RaceDetector::describe_number(uint32_t number) const {
  return StreamDescription{keys_[number], number, streams_[number].device, streams_[number].is_default, false};
}

StreamDescription RaceDetector::describe(StreamKey stream) { return describe_number(number_of(stream)); }

}  // namespace ember::detail::sanitizer
