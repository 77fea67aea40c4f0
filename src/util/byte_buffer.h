// ByteBuffer: an owned, growable byte array that does not zero its memory on resize.
//
// Used for compressed chunk bytes and decode scratch space. A buffer is reused across chunks:
// Resize only reallocates when the capacity grows, so a worker's steady state makes no allocations.
// Large buffers' memory comes from, and returns to, the block cache (util/block_cache.h), so
// buffers made and dropped per chunk reuse pages already touched.
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

  ~ByteBuffer() { internal::FreeBlock(data_, block_bytes_); }
  ByteBuffer(ByteBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        capacity_(std::exchange(other.capacity_, 0)),
        block_bytes_(std::exchange(other.block_bytes_, 0)) {}
  ByteBuffer& operator=(ByteBuffer&& other) noexcept {
    if (this != &other) {
      internal::FreeBlock(data_, block_bytes_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
      block_bytes_ = std::exchange(other.block_bytes_, 0);
    }
    return *this;
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
  // Makes room for `capacity` bytes; capacity() is then exactly that (the block behind it may be
  // larger).
  void Reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    if (capacity <= block_bytes_) {  // a cached block larger than asked for already has room
      capacity_ = capacity;
      return;
    }
    size_t block_bytes = 0;
    std::byte* fresh = internal::AllocateBlock(capacity, block_bytes);
    if (size_ > 0) std::memcpy(fresh, data_, size_);
    internal::FreeBlock(data_, block_bytes_);
    data_ = fresh;
    capacity_ = capacity;
    block_bytes_ = block_bytes;
  }
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
  std::byte* data_ = nullptr;  // owned: from internal::AllocateBlock
  size_t size_ = 0;
  size_t capacity_ = 0;
  size_t block_bytes_ = 0;  // the block's size, for FreeBlock
};

inline std::string_view AsStringView(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace zarrstream
