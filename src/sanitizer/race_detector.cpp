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

void RaceDetector::memory_allocation(uintptr_t pointer, size_t bytes) {
  erase_ranges(pointer, pointer + std::max<size_t>(bytes, 1));
  ranges_.emplace(pointer, Range{pointer + std::max<size_t>(bytes, 1), std::nullopt, {}});
}

void RaceDetector::memory_deallocation(uintptr_t pointer, size_t bytes) {
  erase_ranges(pointer, pointer + std::max<size_t>(bytes, 1));
}

void RaceDetector::erase_ranges(uintptr_t begin, uintptr_t end) {
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second.end > begin) --it;
  while (it != ranges_.end() && it->first < end) it = ranges_.erase(it);
}

template <typename F>
void RaceDetector::for_each_range(uintptr_t begin, uintptr_t end, F&& f) {
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second.end > begin) --it;
  for (; it != ranges_.end() && it->first < end; ++it) f(it->first, it->second);
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

std::vector<DataRace> RaceDetector::check(StreamKey stream, const std::vector<MemoryAccess>& accesses, const char* op,
                                          const std::shared_ptr<const StackTrace>& stack) {
  std::vector<DataRace> races;
  if (ranges_.empty()) return races;
  uint32_t n = number_of(stream);
  std::vector<uintptr_t> reported;  // one report per range and op
  auto report = [&](uintptr_t begin, const MemoryAccess& access, const AccessRecord& previous) {
    if (std::find(reported.begin(), reported.end(), begin) != reported.end()) return;
    reported.push_back(begin);
    DataRace race;
    race.pointer = begin;
    race.current = AccessRecord{access.type, n, streams_[n].seq + 1, op, access.argument, access.index, stack};
    race.previous = previous;
    race.current_stream = describe_number(n);
    race.previous_stream = describe_number(previous.stream);
    races.push_back(std::move(race));
  };
  // Writes first: a write checks everything a read of the same range would.
  for (AccessType pass : {AccessType::Write, AccessType::Read}) {
    for (const MemoryAccess& access : accesses) {
      if (access.type != pass || access.begin >= access.end) continue;
      for_each_range(access.begin, access.end, [&](uintptr_t begin, const Range& range) {
        if (range.write && !ordered(*range.write, n)) {
          report(begin, access, *range.write);
          return;
        }
        if (pass == AccessType::Read) return;
        for (const AccessRecord& read : range.reads) {
          if (!ordered(read, n)) {
            report(begin, access, read);
            return;
          }
        }
      });
    }
  }
  return races;
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
      bool covered = false;
      auto update = [&](uintptr_t, Range& range) {
        covered = true;
        AccessRecord record{access.type, n, seq, op, access.argument, access.index, stack};
        if (pass == AccessType::Write) {
          range.write = std::move(record);
          range.reads.clear();
          return;
        }
        if (range.write && range.write->stream == n && range.write->seq == seq) return;  // written by this op
        auto same = std::find_if(range.reads.begin(), range.reads.end(),
                                 [&](const AccessRecord& r) { return r.stream == n; });
        if (same != range.reads.end()) {
          *same = std::move(record);
        } else {
          range.reads.push_back(std::move(record));
        }
      };
      for_each_range(access.begin, access.end, update);
      if (!covered) {
        // Memory never reported by an allocator: it gets a range of its own.
        auto [it, inserted] = ranges_.emplace(access.begin, Range{access.end, std::nullopt, {}});
        update(it->first, it->second);
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
  return StreamDescription{keys_[number], number, streams_[number].device, streams_[number].is_default};
}

StreamDescription RaceDetector::describe(StreamKey stream) { return describe_number(number_of(stream)); }

}  // namespace ember::detail::sanitizer
