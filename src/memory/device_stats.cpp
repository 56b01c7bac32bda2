// memory_stats() keys, format_size and the memory_summary() table (PyTorch's layout).
#include "memory/device_stats.h"

#include <cstdio>
#include <sstream>
#include <utility>
#include <vector>

namespace ember::detail {
namespace {

constexpr const char* kPoolNames[kNumStatTypes] = {"all", "small_pool", "large_pool"};

void put(std::map<std::string, int64_t>& out, const std::string& prefix, const Stat& stat) {
  out[prefix + ".current"] = stat.current;
  out[prefix + ".peak"] = stat.peak;
  out[prefix + ".allocated"] = stat.allocated;
  out[prefix + ".freed"] = stat.freed;
}

template <typename F>
void for_each_array(DeviceStats& stats, F&& f) {
  for (StatArray* array :
       {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split, &stats.allocated_bytes,
        &stats.reserved_bytes, &stats.active_bytes, &stats.inactive_split_bytes, &stats.requested_bytes})
    for (Stat& stat : *array) f(stat);
  f(stats.oversize_allocations);
  f(stats.oversize_segments);
}

// The unit is chosen from the "all pools" value so a row's columns line up.
std::string size_cell(int64_t value, double scale_by) {
  static constexpr const char* kPrefixes[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  while (unit + 1 < std::size(kPrefixes) && scale_by >= 768 * 1024) {
    ++unit;
    value /= 1024;
    scale_by /= 1024;
  }
  char cell[32];
  std::snprintf(cell, sizeof cell, "%6lld %s", static_cast<long long>(value), kPrefixes[unit]);
  return cell;
}

std::string count_cell(int64_t value, double scale_by) {
  static constexpr const char* kPrefixes[] = {" ", "K", "M"};
  size_t unit = 0;
  while (unit + 1 < std::size(kPrefixes) && scale_by >= 750 * 1000) {
    ++unit;
    value /= 1000;
    scale_by /= 1000;
  }
  char cell[32];
  std::snprintf(cell, sizeof cell, "%7lld %s ", static_cast<long long>(value), kPrefixes[unit]);
  return cell;
}

}  // namespace

void DeviceStats::reset_accumulated() noexcept {
  for_each_array(*this, [](Stat& stat) { stat.reset_accumulated(); });
  num_alloc_retries = num_ooms = num_sync_all_streams = num_device_alloc = num_device_free = 0;
}

void DeviceStats::reset_peak() noexcept {
  for_each_array(*this, [](Stat& stat) { stat.reset_peak(); });
}

std::map<std::string, int64_t> DeviceStats::to_map() const {
  std::map<std::string, int64_t> out;
  const std::pair<const char*, const StatArray*> arrays[] = {{"allocation", &allocation},
                                                             {"segment", &segment},
                                                             {"active", &active},
                                                             {"inactive_split", &inactive_split},
                                                             {"allocated_bytes", &allocated_bytes},
                                                             {"reserved_bytes", &reserved_bytes},
                                                             {"active_bytes", &active_bytes},
                                                             {"inactive_split_bytes", &inactive_split_bytes},
                                                             {"requested_bytes", &requested_bytes}};
  for (const auto& [name, array] : arrays)
    for (size_t type = 0; type < kNumStatTypes; ++type)
      put(out, std::string(name) + "." + kPoolNames[type], (*array)[type]);
  out["num_alloc_retries"] = num_alloc_retries;
  out["num_ooms"] = num_ooms;
  out["num_sync_all_streams"] = num_sync_all_streams;
  out["num_device_alloc"] = num_device_alloc;
  out["num_device_free"] = num_device_free;
  out["max_split_size"] = max_split_size;
  put(out, "oversize_allocations", oversize_allocations);
  put(out, "oversize_segments", oversize_segments);
  return out;
}

std::string format_size(uint64_t bytes) {
  char text[64];
  if (bytes <= 1024) {
    std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  } else if (bytes <= (uint64_t{1} << 20)) {
    std::snprintf(text, sizeof text, "%.2f KiB", static_cast<double>(bytes) / 1024.0);
  } else if (bytes <= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / 1048576.0);
  } else {
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / 1073741824.0);
  }
  return text;
}

std::string format_memory_summary(const std::map<std::string, int64_t>& stats, int device) {
  auto get = [&](const std::string& key) {
    auto it = stats.find(key);
    return it == stats.end() ? int64_t{0} : it->second;
  };
  const std::string rule(75, '-'), double_rule(75, '=');
  std::vector<std::string> lines;
  char line[160];
  lines.push_back(double_rule);
  std::snprintf(line, sizeof line, " %16s ember CUDA memory summary, device ID %-19d ", "", device);
  lines.push_back(line);
  lines.push_back(rule);
  std::snprintf(line, sizeof line, "  %9s CUDA OOMs: %-12lld | %6s cudaMalloc retries: %-8lld  ", "",
                static_cast<long long>(get("num_ooms")), "", static_cast<long long>(get("num_alloc_retries")));
  lines.push_back(line);
  lines.push_back(double_rule);
  lines.push_back("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");

  struct Metric {
    const char* key;
    const char* name;
    bool bytes;
  };
  const Metric metrics[] = {{"allocated_bytes", "Allocated memory", true},
                            {"active_bytes", "Active memory", true},
                            {"requested_bytes", "Requested memory", true},
                            {"reserved_bytes", "GPU reserved memory", true},
                            {"inactive_split_bytes", "Non-releasable memory", true},
                            {"allocation", "Allocations", false},
                            {"active", "Active allocs", false},
                            {"segment", "GPU reserved segments", false},
                            {"inactive_split", "Non-releasable allocs", false}};
  static constexpr const char* kFields[] = {"current", "peak", "allocated", "freed"};
  for (const Metric& metric : metrics) {
    lines.push_back(rule);
    int64_t scale[4] = {};
    const std::pair<const char*, const char*> rows[] = {
        {"all", metric.name}, {"large_pool", "      from large pool"}, {"small_pool", "      from small pool"}};
    for (const auto& [pool, label] : rows) {
      std::string cells[4];
      for (int f = 0; f < 4; ++f) {
        int64_t value = get(std::string(metric.key) + "." + pool + "." + kFields[f]);
        if (std::string_view(pool) == "all") scale[f] = value;
        cells[f] = metric.bytes ? size_cell(value, static_cast<double>(scale[f]))
                                : count_cell(value, static_cast<double>(scale[f]));
      }
      std::snprintf(line, sizeof line, " %-21s | %s | %s | %s | %s ", label, cells[0].c_str(), cells[1].c_str(),
                    cells[2].c_str(), cells[3].c_str());
      lines.push_back(line);
    }
  }
  const std::pair<const char*, const char*> oversize[] = {{"oversize_allocations", "Oversize allocations"},
                                                          {"oversize_segments", "Oversize GPU segments"}};
  for (const auto& [key, name] : oversize) {
    lines.push_back(rule);
    std::string cells[4];
    for (int f = 0; f < 4; ++f) {
      int64_t value = get(std::string(key) + "." + kFields[f]);
      cells[f] = count_cell(value, static_cast<double>(value));
    }
    std::snprintf(line, sizeof line, " %-21s | %s | %s | %s | %s ", name, cells[0].c_str(), cells[1].c_str(),
                  cells[2].c_str(), cells[3].c_str());
    lines.push_back(line);
  }
  lines.push_back(double_rule);
  std::ostringstream out;
  for (const std::string& text : lines) out << '|' << text << "|\n";
  return out.str();
}

}  // namespace ember::detail
