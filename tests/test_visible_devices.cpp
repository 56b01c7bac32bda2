// CUDA_VISIBLE_DEVICES parsing (PyTorch's torch.cuda._parse_visible_devices table) and
// its application to a machine's physical devices.
#include <gtest/gtest.h>

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
  EXPECT_EQ(ordinals("1gpu2,2ampere"), (std::vector<int>{1, 2}));     // rest of an entry is ignored
  EXPECT_EQ(ordinals("0, 1, 2, -1, 3"), (std::vector<int>{0, 1, 2}));  // a negative ends the list
  EXPECT_EQ(ordinals("0, 1, 2, 1"), (std::vector<int>{}));             // a duplicate empties it
  EXPECT_EQ(ordinals("2, +3, -0, 5"), (std::vector<int>{2, 3, 0, 5}));  // unary signs
  EXPECT_EQ(ordinals("one,two,3,4"), (std::vector<int>{}));            // garbage first: empty
  EXPECT_EQ(ordinals("4,3,two,one"), (std::vector<int>{4, 3}));        // garbage ends the list
  EXPECT_EQ(ordinals(" 3 ,\t1 "), (std::vector<int>{3, 1}));
  EXPECT_EQ(ordinals(""), (std::vector<int>{}));                       // set but empty: no device
  EXPECT_EQ(ordinals("-"), (std::vector<int>{}));
  EXPECT_EQ(ordinals("1,,2"), (std::vector<int>{1}));                   // an empty entry ends it
}

TEST(VisibleDevices, UuidLists) {
  auto v = parse_visible_devices(std::string_view("GPU-9e8d35e3,GPU-47"));
  EXPECT_TRUE(v.uuid_list);
  EXPECT_EQ(v.uuids, (std::vector<std::string>{"GPU-9e8d35e3", "GPU-47"}));
  EXPECT_TRUE(v.ordinals.empty());
  EXPECT_EQ(parse_visible_devices(std::string_view("MIG-a,MIG-a")).uuids, std::vector<std::string>{});
  EXPECT_EQ(parse_visible_devices(std::string_view("GPU-a,3,GPU-b")).uuids, std::vector<std::string>{"GPU-a"});
  // Emulated devices have no UUIDs: a UUID list (meant for the real GPUs) leaves them all visible.
  EXPECT_EQ(apply_visible_devices(v, 2), (std::vector<int>{0, 1}));
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
