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

  // Writes 1-D array `name` of variable-length UTF-8 strings (v3 "string", vlen-utf8 chunks, as
  // zarr-python writes them), chunked by `chunk`, along `dim`.
  void AddStringArray(const std::string& name, const std::vector<std::string>& values,
                      uint64_t chunk, const std::string& dim) {
    nlohmann::json meta = {
        {"zarr_format", 3},
        {"node_type", "array"},
        {"shape", {values.size()}},
        {"data_type", "string"},
        {"chunk_grid", {{"name", "regular"}, {"configuration", {{"chunk_shape", {chunk}}}}}},
        {"chunk_key_encoding", {{"name", "default"}}},
        {"fill_value", ""},
        {"codecs", {{{"name", "vlen-utf8"}}}},
        {"dimension_names", {dim}},
    };
    Put(name + "/zarr.json", meta.dump());
    for (uint64_t c = 0; c * chunk < values.size(); ++c) {
      std::string encoded;
      auto put_u32 = [&encoded](uint32_t v) {
        for (int k = 0; k < 4; ++k) encoded.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
      };
      put_u32(static_cast<uint32_t>(chunk));
      for (uint64_t i = c * chunk; i < (c + 1) * chunk; ++i) {
        const std::string value = i < values.size() ? values[i] : "";
        put_u32(static_cast<uint32_t>(value.size()));
        encoded += value;
      }
      Put(name + "/c/" + std::to_string(c), encoded);
    }
  }

  // Writes 1-D array `name` of numpy datetime64 values (`ticks` of `unit`), zarr-python's
  // "numpy.datetime64" data type.
  void AddDateTime64Array(const std::string& name, const std::vector<int64_t>& ticks,
                          const std::string& unit, const std::string& dim) {
    AddArray<int64_t>(name, {ticks.size()}, {ticks.size()}, {dim}, ticks);
    nlohmann::json meta = nlohmann::json::parse(Get(name + "/zarr.json"));
    meta["data_type"] = {{"name", "numpy.datetime64"},
                         {"configuration", {{"unit", unit}, {"scale_factor", 1}}}};
    meta["fill_value"] = "NaT";
    Put(name + "/zarr.json", meta.dump());
  }

  void Put(const std::string& key, const std::string& value) {
    EXPECT_TRUE(store_->Put(key, value).ok()) << key;
  }

 private:
  std::string Get(const std::string& key) {
    auto value = store_->ReadAll(key);
    EXPECT_TRUE(value.ok()) << key;
    return std::string(value->view());
  }

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

  std::string url_;
  std::shared_ptr<MemoryStore> store_;
};

}  // namespace zarrstream::testing
