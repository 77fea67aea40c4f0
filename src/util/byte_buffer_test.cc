// ByteBuffer over memory the caller owns (Borrow): written in place while it fits, moved to memory
// of its own when it grows past it, and never freed (the caller's memory stays usable and intact).
#include "util/byte_buffer.h"

#include <gtest/gtest.h>

#include <vector>

namespace zarrstream {
namespace {

TEST(ByteBufferTest, ABorrowedBufferWritesInPlaceUntilItOutgrowsTheMemory) {
  std::vector<std::byte> memory(64, std::byte{0x11});
  {
    ByteBuffer buffer = ByteBuffer::Borrow(memory);
    EXPECT_EQ(buffer.size(), 0u);
    EXPECT_EQ(buffer.capacity(), 64u);
    buffer.Assign("abcdef", 6);
    EXPECT_EQ(buffer.data(), memory.data());
    EXPECT_EQ(static_cast<char>(memory[0]), 'a');
    EXPECT_EQ(static_cast<char>(memory[5]), 'f');

    ByteBuffer moved = std::move(buffer);  // still the caller's memory
    EXPECT_EQ(moved.data(), memory.data());
    moved.Resize(64);
    EXPECT_EQ(moved.data(), memory.data());

    moved.Resize(65);  // past it: memory of its own, what it held kept
    EXPECT_NE(moved.data(), memory.data());
    EXPECT_EQ(static_cast<char>(moved.data()[0]), 'a');
    EXPECT_EQ(static_cast<char>(moved.data()[5]), 'f');
    moved.data()[0] = std::byte{'z'};
    EXPECT_EQ(static_cast<char>(memory[0]), 'a');
  }
  // Neither buffer freed the vector's memory (a sanitizer build would report it) nor wrote past it.
  EXPECT_EQ(memory[6], std::byte{0x11});
  EXPECT_EQ(memory[63], std::byte{0x11});

  ByteBuffer copy;
  {
    ByteBuffer borrowed = ByteBuffer::Borrow(memory);
    borrowed.Assign("xyz", 3);
    copy = borrowed;  // a copy owns its bytes
  }
  EXPECT_NE(copy.data(), memory.data());
  EXPECT_EQ(copy.view(), "xyz");
}

}  // namespace
}  // namespace zarrstream
