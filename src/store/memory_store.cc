#include "store/memory_store.h"

#include <cstring>
#include <set>

namespace zarrstream {

MemoryStore::MemoryStore(std::string name) : url_("memory://" + std::move(name)) {}

Future<uint64_t> MemoryStore::Read(std::string_view key, std::span<const ByteRange> ranges,
                                   std::span<ByteBuffer> outs) {
  auto read = [&]() -> Result<uint64_t> {
    ZS_RETURN_IF_ERROR(ValidateKey(key));
    if (ranges.size() != outs.size())
      return InternalError("MemoryStore::Read: ranges/outs mismatch");
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(key);
    if (it == values_.end()) return NotFoundError("no such key: " + url_ + "/" + std::string(key));
    const ByteBuffer& value = it->second;
    uint64_t total = 0;
    for (size_t i = 0; i < ranges.size(); ++i) {
      uint64_t begin = 0, end = 0;
      ZS_RETURN_IF_ERROR_CTX(ResolveByteRange(ranges[i], value.size(), &begin, &end),
                             url_ + "/" + std::string(key));
      outs[i].Assign(value.data() + begin, end - begin);
      total += end - begin;
    }
    return total;
  };
  return Future<uint64_t>::Ready(read());
}

Result<std::vector<KeyInfo>> MemoryStore::List(std::string_view prefix) {
  std::string dir = prefix.empty() ? "" : std::string(prefix) + "/";
  std::vector<KeyInfo> keys;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = values_.lower_bound(dir); it != values_.end(); ++it) {
    if (it->first.compare(0, dir.size(), dir) != 0) break;
    keys.push_back({it->first, it->second.size()});
  }
  return keys;
}

Result<DirectoryListing> MemoryStore::ListDirectory(std::string_view prefix) {
  std::string dir = prefix.empty() ? "" : std::string(prefix) + "/";
  DirectoryListing listing;
  std::set<std::string> prefixes;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = values_.lower_bound(dir); it != values_.end(); ++it) {
    if (it->first.compare(0, dir.size(), dir) != 0) break;
    std::string_view rest = std::string_view(it->first).substr(dir.size());
    size_t slash = rest.find('/');
    if (slash == std::string_view::npos) {
      listing.keys.push_back({it->first, it->second.size()});
    } else {
      prefixes.insert(dir + std::string(rest.substr(0, slash)));
    }
  }
  listing.prefixes.assign(prefixes.begin(), prefixes.end());
  return listing;
}

Status MemoryStore::Put(std::string_view key, std::span<const std::byte> value) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard<std::mutex> lock(mutex_);
  values_[std::string(key)].Assign(value.data(), value.size());
  return Status::Ok();
}

Status MemoryStore::Delete(std::string_view key) {
  ZS_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = values_.find(key);
  if (it != values_.end()) values_.erase(it);
  return Status::Ok();
}

}  // namespace zarrstream
