// Test-only: writes small Zarr v3 datasets (groups of arrays with named dimensions and attributes)
// straight into a memory store, chunk by chunk, uncompressed ("bytes" codec, little endian). It
// depends on nothing but the store, so tests of coordinates, channels and statistics do not lean
// on the write path they are not testing. Peer-written datasets are tested from Python (tests/).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/memory_store.h"
#include "store/store_registry.h"
#include "zarrstream/data_type.h"

namespace zarrstream::testing {

class MemoryDataset {
 public:
  // A fresh, empty group at memory://<name> (the name must be unique in the test binary).
  explicit MemoryDataset(const std::string& name) : url_("memory://" + name) {
    auto store = OpenStore(url_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::static_pointer_cast<MemoryStore>(*store);
    Put("zarr.json", nlohmann::json{{"zarr_format", 3}, {"node_type", "group"}}.dump());
  }

  const std::string& url() const { return url_; }

  // Writes array `name` of `T` values (C order, `shape`), chunked by `chunks`, with dimension
  // names `dims` and `attributes`.
  template <typename T>
  void AddArray(const std::string& name, const std::vector<uint64_t>& shape,
                const std::vector<uint64_t>& chunks, const std::vector<std::string>& dims,
                const std::vector<T>& values,
                const nlohmann::json& attributes = nlohmann::json::object()) {
    const DataType dtype = DataTypeOf<T>();
    nlohmann::json meta = {
        {"zarr_format", 3},
        {"node_type", "array"},
        {"shape", shape},
        {"data_type", std::string(DataTypeName(dtype))},
        {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", chunks}}}}},
        {"chunk_key_encoding", {{"name", "default"}}},
        {"fill_value", 0},
        {"codecs", {{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}}}},
        {"attributes", attributes},
    };
    if (!dims.empty()) meta["dimension_names"] = dims;
    Put(name + "/zarr.json", meta.dump());
    const size_t rank = shape.size();
    std::vector<uint64_t> grid(rank);
    uint64_t num_chunks = 1, chunk_elements = 1;
    for (size_t d = 0; d < rank; ++d) {
      grid[d] = (shape[d] + chunks[d] - 1) / chunks[d];
      num_chunks *= grid[d];
      chunk_elements *= chunks[d];
    }
    for (uint64_t c = 0; c < num_chunks; ++c) {
      std::vector<uint64_t> coords(rank);
      for (size_t d = rank, rest = c; d-- > 0;) {
        coords[d] = rest % grid[d];
        rest /= grid[d];
      }
      std::vector<T> chunk(chunk_elements, T{});
      for (uint64_t i = 0; i < chunk_elements; ++i) {
        uint64_t flat = 0;
        bool inside = true;
        for (size_t d = 0, rest = i, stride = chunk_elements; d < rank; ++d) {
          stride /= chunks[d];
          const uint64_t g = coords[d] * chunks[d] + rest / stride;
          rest %= stride;
          inside &= g < shape[d];
          flat = flat * shape[d] + g;
        }
        if (inside) chunk[i] = values[flat];
      }
      std::string key = name + "/c";
      for (uint64_t x : coords) key += "/" + std::to_string(x);
      EXPECT_TRUE(store_->Put(key, std::as_bytes(std::span<const T>(chunk))).ok());
    }
  }

 private:
  template <typename T>
  static DataType DataTypeOf() {
    if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
    if constexpr (std::is_same_v<T, double>) return DataType::kFloat64;
    if constexpr (std::is_same_v<T, int64_t>) return DataType::kInt64;
    if constexpr (std::is_same_v<T, int32_t>) return DataType::kInt32;
    if constexpr (std::is_same_v<T, int16_t>) return DataType::kInt16;
    if constexpr (std::is_same_v<T, int8_t>) return DataType::kInt8;
    if constexpr (std::is_same_v<T, uint8_t>) return DataType::kUInt8;
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t> ||
                  std::is_same_v<T, int16_t> || std::is_same_v<T, int8_t> ||
                  std::is_same_v<T, uint8_t>);
    return DataType::kFloat64;
  }

  void Put(const std::string& key, const std::string& value) {
    EXPECT_TRUE(store_->Put(key, value).ok()) << key;
  }

  std::string url_;
  std::shared_ptr<MemoryStore> store_;
};

}  // namespace zarrstream::testing
