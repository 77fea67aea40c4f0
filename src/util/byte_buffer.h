// ByteBuffer: a growable byte array that does not zero its memory on resize.
//
// Used for compressed chunk bytes and decode scratch space. A buffer is reused across chunks:
// Resize only reallocates when the capacity grows, so a worker's steady state makes no allocations.
// Memory grown with ReserveReusable comes from, and returns to, the block cache
// (util/block_cache.h), so buffers made and dropped per chunk (remote reads' response bodies)
// reuse pages already touched; other growth uses new[].
//
// A buffer made by Borrow writes into memory its caller owns (a GPU workspace's pinned staging,
// so that a store reads stored bytes straight where they are copied to the GPU from): it never
// frees it, and growing past it moves the buffer to memory of its own, as any growth does. Whoever
// reads it must therefore look at data() rather than assume the borrowed memory holds the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "util/block_cache.h"

namespace zarrstream {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  explicit ByteBuffer(size_t size) { Resize(size); }
  ByteBuffer(const void* data, size_t size) { Assign(data, size); }
  static ByteBuffer FromString(std::string_view s) { return ByteBuffer(s.data(), s.size()); }

  ~ByteBuffer() { Free(); }
  ByteBuffer(ByteBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)),
        block_bytes_(std::exchange(other.block_bytes_, 0)),
        memory_(std::exchange(other.memory_, Memory::kNew)) {}
  ByteBuffer& operator=(ByteBuffer&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
      block_bytes_ = std::exchange(other.block_bytes_, 0);
      memory_ = std::exchange(other.memory_, Memory::kNew);
    }
    return *this;
  }
  // An empty buffer over `memory`, which the caller owns and keeps valid while the buffer uses it
  // (see the header comment).
  static ByteBuffer Borrow(std::span<std::byte> memory) {
    ByteBuffer buffer;
    buffer.data_ = memory.data();
    buffer.capacity_ = buffer.block_bytes_ = memory.size();
    buffer.memory_ = Memory::kBorrowed;
    return buffer;
  }
  ByteBuffer(const ByteBuffer& other) { Assign(other.data(), other.size()); }
  ByteBuffer& operator=(const ByteBuffer& other) {
    if (this != &other) Assign(other.data(), other.size());
    return *this;
  }

  // Sets the size to `size`. Contents up to min(old size, size) are kept; new bytes are
  // uninitialised.
  void Resize(size_t size) {
    if (size > capacity_) Reserve(size);
    size_ = size;
  }
  // Makes room for `capacity` bytes; capacity() is then exactly that.
  void Reserve(size_t capacity) { Grow(capacity, false); }
  // Reserve, with the memory from the block cache (and back to it when the buffer lets it go).
  void ReserveReusable(size_t capacity) { Grow(capacity, true); }
  void Assign(const void* data, size_t size) {
    Resize(size);
    if (size > 0) std::memcpy(data_, data, size);
  }
  void Clear() { size_ = 0; }

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }

  std::span<std::byte> span() { return {data(), size_}; }
  std::span<const std::byte> span() const { return {data(), size_}; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data()), size_}; }

 private:
  void Grow(size_t capacity, bool reusable) {
    if (capacity <= capacity_) return;
    if (capacity <= block_bytes_) {  // a cached block larger than asked for already has room
      capacity_ = capacity;
      return;
    }
    size_t block_bytes = capacity;
    std::byte* fresh =
        reusable ? internal::AllocateBlock(capacity, block_bytes) : new std::byte[capacity];
    if (size_ > 0) std::memcpy(fresh, data_, size_);
    Free();
    data_ = fresh;
    capacity_ = capacity;
    block_bytes_ = block_bytes;
    memory_ = reusable ? Memory::kCachedBlock : Memory::kNew;
  }
  void Free() {
    switch (memory_) {
      case Memory::kNew:
        delete[] data_;
        break;
      case Memory::kCachedBlock:
        internal::FreeBlock(data_, block_bytes_);
        break;
      case Memory::kBorrowed:
        break;
    }
  }

  // Where data_ comes from: new[], the block cache, or the caller (Borrow; never freed here).
  enum class Memory : uint8_t { kNew, kCachedBlock, kBorrowed };

  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
  size_t block_bytes_ = 0;  // the memory's size (at least capacity_)
  Memory memory_ = Memory::kNew;
};

inline std::string_view AsStringView(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace zarrstream
