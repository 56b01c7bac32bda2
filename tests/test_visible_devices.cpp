// CUDA_VISIBLE_DEVICES parsing (PyTorch's torch.cuda._parse_visible_devices table) and
// its application to a machine's physical devices.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "runtime/visible_devices.h"

using ember::detail::apply_visible_devices;
using ember::detail::parse_visible_devices;

namespace {

std::vector<int> ordinals(const char* value) { return parse_visible_devices(std::string_view(value)).ordinals; }

TEST(VisibleDevices, UnsetShowsEverything) {
  auto v = parse_visible_devices(std::nullopt);
  EXPECT_FALSE(v.restricted);
  EXPECT_EQ(apply_visible_devices(v, 3), (std::vector<int>{0, 1, 2}));
}

TEST(VisibleDevices, PyTorchTable) {
  EXPECT_EQ(ordinals("1gpu2,2ampere"), (std::vector<int>{1, 2}));       // rest of an entry is ignored
  EXPECT_EQ(ordinals("0, 1, 2, -1, 3"), (std::vector<int>{0, 1, 2}));   // a negative ends the list
  EXPECT_EQ(ordinals("0, 1, 2, 1"), (std::vector<int>{}));              // a duplicate empties it
  EXPECT_EQ(ordinals("2, +3, -0, 5"), (std::vector<int>{2, 3, 0, 5}));  // unary signs
  EXPECT_EQ(ordinals("one,two,3,4"), (std::vector<int>{}));             // garbage first: empty
  EXPECT_EQ(ordinals("4,3,two,one"), (std::vector<int>{4, 3}));         // garbage ends the list
  EXPECT_EQ(ordinals(" 3 ,\t1 "), (std::vector<int>{3, 1}));
  EXPECT_EQ(ordinals(""), (std::vector<int>{}));  // set but empty: no device
  EXPECT_EQ(ordinals("-"), (std::vector<int>{}));
  EXPECT_EQ(ordinals("1,,2"), (std::vector<int>{1}));  // an empty entry ends it
}

TEST(VisibleDevices, UuidLists) {
  auto v = parse_visible_devices(std::string_view("GPU-9e8d35e3,GPU-47"));
  EXPECT_TRUE(v.uuid_list);
  EXPECT_EQ(v.uuids, (std::vector<std::string>{"GPU-9e8d35e3", "GPU-47"}));
  EXPECT_TRUE(v.ordinals.empty());
  EXPECT_EQ(parse_visible_devices(std::string_view("MIG-a,MIG-a")).uuids, std::vector<std::string>{});
  EXPECT_EQ(parse_visible_devices(std::string_view("GPU-a,3,GPU-b")).uuids, std::vector<std::string>{"GPU-a"});
  // UUIDs of no emulated device: the first entry ends the list, nothing is visible.
  EXPECT_EQ(apply_visible_devices(v, 2), std::vector<int>{});
}

TEST(VisibleDevices, EmulatedDeviceUuids) {
  using ember::detail::emulated_device_uuid;
  std::set<std::string> seen;
  for (int d = 0; d < 64; ++d) {
    std::string uuid = emulated_device_uuid(d);
    ASSERT_EQ(uuid.size(), 36u) << uuid;
    for (size_t i : {8u, 13u, 18u, 23u}) EXPECT_EQ(uuid[i], '-') << uuid;
    EXPECT_EQ(uuid[14], '4') << uuid;          // shaped as a version-4 UUID
    EXPECT_EQ(uuid, emulated_device_uuid(d));  // stable
    seen.insert(uuid);
  }
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_EQ(emulated_device_uuid(0), "3d139b0f-11e3-4947-ab61-7a157c675a10");  // the same in every process
}

TEST(VisibleDevices, GpuUuidPrefixesSelectEmulatedDevices) {
  using ember::detail::emulated_device_uuid;
  auto apply = [](const std::string& value, int count) {
    return apply_visible_devices(parse_visible_devices(std::string_view(value)), count);
  };
  const std::string u0 = "GPU-" + emulated_device_uuid(0), u2 = "GPU-" + emulated_device_uuid(2);
  EXPECT_EQ(apply(u2 + "," + u0, 4), (std::vector<int>{2, 0}));                             // full UUIDs, in order
  EXPECT_EQ(apply(u2.substr(0, 9) + ", " + u0.substr(0, 7), 4), (std::vector<int>{2, 0}));  // unique prefixes
  EXPECT_EQ(apply(u2 + ",GPU-zzz," + u0, 4), (std::vector<int>{2}));                        // no match ends the list
  EXPECT_EQ(apply(u2 + ",GPU-," + u0, 4), (std::vector<int>{2}));             // "GPU-" matches all: ambiguous
  EXPECT_EQ(apply(u2 + "," + u2.substr(0, 10), 4), std::vector<int>{});       // the same device twice
  EXPECT_EQ(apply(u2, 2), std::vector<int>{});                                // device 2 does not exist
  EXPECT_EQ(apply("MIG-" + emulated_device_uuid(0), 4), std::vector<int>{});  // no MIG instances
}

TEST(VisibleDevices, ApplyFiltersAndReorders) {
  auto apply = [](const char* value, int count) {
    return apply_visible_devices(parse_visible_devices(std::string_view(value)), count);
  };
  EXPECT_EQ(apply("2,0", 4), (std::vector<int>{2, 0}));
  EXPECT_EQ(apply("1, 0", 2), (std::vector<int>{1, 0}));
  EXPECT_EQ(apply("1, 5, 0", 2), (std::vector<int>{1}));  // an ordinal past the count ends the list
  EXPECT_EQ(apply("7", 4), (std::vector<int>{}));
  EXPECT_EQ(apply("", 4), (std::vector<int>{}));
}

}  // namespace
