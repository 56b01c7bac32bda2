// StackTrace: capture keeps raw addresses; frames()/str() name the functions on the stack.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/stack_trace.h"

namespace ember::detail {
namespace {

[[gnu::noinline]] StackTrace capture_from_helper(int skip) {
  StackTrace trace = StackTrace::capture(skip);
  asm volatile("" ::: "memory");  // keeps the call from becoming a tail call
  return trace;
}

bool names(const std::vector<StackFrame>& frames, size_t index, const std::string& text) {
  return index < frames.size() && frames[index].function.find(text) != std::string::npos;
}

TEST(StackTrace, CaptureNamesTheCallingFunction) {
  StackTrace trace = StackTrace::capture();
  ASSERT_FALSE(trace.addresses().empty());
  EXPECT_LE(trace.addresses().size(), 32u);
  std::vector<StackFrame> frames = trace.frames();
  ASSERT_FALSE(frames.empty());
  EXPECT_TRUE(names(frames, 0, "StackTrace_CaptureNamesTheCallingFunction_Test::TestBody")) << trace.str();
}

TEST(StackTrace, SkipDropsInnerFrames) {
  std::vector<StackFrame> kept = capture_from_helper(0).frames();
  EXPECT_TRUE(names(kept, 0, "capture_from_helper")) << capture_from_helper(0).str();
  EXPECT_TRUE(names(kept, 1, "StackTrace_SkipDropsInnerFrames_Test::TestBody"));
  std::vector<StackFrame> skipped = capture_from_helper(1).frames();
  EXPECT_TRUE(names(skipped, 0, "StackTrace_SkipDropsInnerFrames_Test::TestBody")) << capture_from_helper(1).str();
}

TEST(StackTrace, MaxDepthBoundsTheAddresses) {
  EXPECT_EQ(StackTrace::capture(0, 2).addresses().size(), 2u);
  EXPECT_TRUE(StackTrace::capture(0, 0).empty());
  EXPECT_EQ(StackTrace().str(), "");
}

TEST(StackTrace, StrHasOneNumberedLinePerFrame) {
  StackTrace trace = StackTrace::capture(0, 4);
  std::string text = trace.str();
  size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  EXPECT_EQ(lines, trace.frames().size());
  EXPECT_EQ(text.rfind("  #0 ", 0), 0u) << text;
  EXPECT_NE(text.find("StackTrace_StrHasOneNumberedLinePerFrame_Test::TestBody"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  #1 "), std::string::npos) << text;
  EXPECT_EQ(trace.str(), text);  // cached symbols give the same text
}

}  // namespace
}  // namespace ember::detail
