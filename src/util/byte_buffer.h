// ByteBuffer: an owned, growable byte array that does not zero its memory on resize.
//
// Used for compressed chunk bytes and decode scratch space. A buffer is reused across chunks:
// Resize only reallocates when the capacity grows, so a worker's steady state makes no allocations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string_view>

namespace zarrstream {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  explicit ByteBuffer(size_t size) { Resize(size); }
  ByteBuffer(const void* data, size_t size) { Assign(data, size); }
  static ByteBuffer FromString(std::string_view s) { return ByteBuffer(s.data(), s.size()); }

  ByteBuffer(ByteBuffer&&) noexcept = default;
  ByteBuffer& operator=(ByteBuffer&&) noexcept = default;
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
  void Reserve(size_t capacity) {
    if (capacity <= capacity_) return;
    std::unique_ptr<std::byte[]> fresh(new std::byte[capacity]);
    if (size_ > 0) std::memcpy(fresh.get(), data_.get(), size_);
    data_ = std::move(fresh);
    capacity_ = capacity;
  }
  void Assign(const void* data, size_t size) {
    Resize(size);
    if (size > 0) std::memcpy(data_.get(), data, size);
  }
  void Clear() { size_ = 0; }

  std::byte* data() { return data_.get(); }
  const std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }

  std::span<std::byte> span() { return {data(), size_}; }
  std::span<const std::byte> span() const { return {data(), size_}; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data()), size_}; }

 private:
  std::unique_ptr<std::byte[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

inline std::string_view AsStringView(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace zarrstream
