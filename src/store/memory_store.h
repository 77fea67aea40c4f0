// MemoryStore: a store held in process memory. For tests, and as the reference backend the store
// conformance suite is written against.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "store/store.h"

namespace zarrstream {

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(std::string name = "memory");

  const std::string& url() const override { return url_; }
  Future<uint64_t> Read(std::string_view key, std::span<const ByteRange> ranges,
                        std::span<ByteBuffer> outs) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override;
  Result<DirectoryListing> ListDirectory(std::string_view prefix) override;
  Status Put(std::string_view key, std::span<const std::byte> value) override;

  Status Put(std::string_view key, std::string_view value) {
    return Put(key, std::span<const std::byte>(reinterpret_cast<const std::byte*>(value.data()),
                                               value.size()));
  }
  // Removes `key`; true if it existed.
  Status Delete(std::string_view key) override;

 private:
  std::string url_;
  mutable std::mutex mutex_;
  std::map<std::string, ByteBuffer, std::less<>> values_;
};

}  // namespace zarrstream
