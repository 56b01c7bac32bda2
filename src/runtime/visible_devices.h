// CUDA_VISIBLE_DEVICES: which physical devices a process sees, and in which order.
//
// Parsing follows PyTorch's torch.cuda._parse_visible_devices, which mirrors what the
// CUDA runtime does: entries are comma-separated and whitespace-stripped; each entry is
// read as the integer it starts with (an optional sign, then digits: "1gpu2" is 1, "+3"
// is 3, "-0" is 0); the first entry that is not an integer, or is negative, ends the
// list; a repeated entry makes the whole list empty. A list starting with "GPU-" or
// "MIG-" is a list of UUIDs (prefix-matched by the driver). Applying an ordinal list to
// a machine drops everything from the first ordinal that does not exist.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::detail {

struct VisibleDevices {
  /// False when the variable is unset: every device is visible.
  bool restricted = false;
  /// Ordinals, in order (when the list is not a UUID list).
  std::vector<int> ordinals;
  /// True for a "GPU-..." / "MIG-..." list; `uuids` holds its entries in order (only the
  /// driver can resolve them).
  bool uuid_list = false;
  std::vector<std::string> uuids;
};

/// Parses a CUDA_VISIBLE_DEVICES value; `value` empty optional means unset.
VisibleDevices parse_visible_devices(std::optional<std::string_view> value);

/// The UUID of physical emulated device `physical` (36 characters, the same in every
/// process), as DeviceProperties::uuid reports it.
std::string emulated_device_uuid(int physical);
/// 16 UUID bytes as "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string format_uuid(const unsigned char (&bytes)[16]);

/// The physical devices, in visible order, out of `physical_count` emulated devices that
/// `visible` exposes. Ordinals past the physical count end the list (CUDA's behaviour).
/// A "GPU-" entry names the device whose "GPU-<uuid>" it is a prefix of, as the driver
/// (and PyTorch's _transform_uuid_to_ordinals) match them: an entry that matches no
/// device or several ends the list, a device named twice empties it. Emulated devices
/// have no MIG instances: a "MIG-" list exposes none.
std::vector<int> apply_visible_devices(const VisibleDevices& visible, int physical_count);

}  // namespace ember::detail
