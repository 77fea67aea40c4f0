// IcechunkStore over a spec 1 repository built here in a memory store (tests/test_icechunk.py
// reads repositories the icechunk package writes): refs, keys, the three kinds of chunk, errors.
#include "store/icechunk_store.h"

#include <flatbuffers/flatbuffers.h>
#include <flatbuffers/flexbuffers.h>
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "store/memory_store.h"
#include "store/store_registry.h"
#include "util/status_test_util.h"

namespace zarrstream {
namespace {

using icechunk::ObjectId12;
using icechunk::ObjectId8;
using Offset = flatbuffers::Offset<flatbuffers::Table>;

constexpr flatbuffers::voffset_t Slot(int id) {
  return static_cast<flatbuffers::voffset_t>(4 + 2 * id);
}

ObjectId12 Id12(uint8_t fill) {
  ObjectId12 id;
  id.fill(fill);
  return id;
}

std::string File(const flatbuffers::FlatBufferBuilder& b, icechunk::FileType type,
                 char spec_version = 1) {
  std::string out =
      "ICE\xF0\x9F\xA7\x8A"
      "CHUNK";
  std::string name = "test";
  name.resize(24, ' ');
  out += name;
  out.push_back(spec_version);
  out.push_back(static_cast<char>(type));
  out.push_back(0);  // uncompressed
  out.append(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  return out;
}

// A snapshot: root group "/" and array "/t" (shape [4], chunks [2]) in manifest 0x22...
std::string Snapshot(const ObjectId12& id, const ObjectId8& array_id, char spec_version = 1) {
  flatbuffers::FlatBufferBuilder b;
  auto node = [&](const char* path, const std::string& zarr_json, bool array) {
    auto path_offset = b.CreateString(path);
    auto user_data =
        b.CreateVector(reinterpret_cast<const uint8_t*>(zarr_json.data()), zarr_json.size());
    Offset data;
    if (array) {
      const uint64_t shape[2] = {4, 2};    // DimensionShape {array_length, chunk_length}
      const uint32_t extents[2] = {0, 2};  // ChunkIndexRange {from, to}
      // Vectors of one struct each.
      b.StartVector(1, 16);
      b.PushBytes(reinterpret_cast<const uint8_t*>(shape), 16);
      auto shape_structs = b.EndVector(1);
      b.StartVector(1, 8);
      b.PushBytes(reinterpret_cast<const uint8_t*>(extents), 8);
      auto extent_structs = b.EndVector(1);
      const ObjectId12 manifest = Id12(0x22);
      auto ref_start = b.StartTable();
      b.AddStruct(Slot(0), &manifest);
      b.AddOffset(Slot(1), flatbuffers::Offset<flatbuffers::Vector<uint8_t>>(extent_structs));
      Offset ref(b.EndTable(ref_start));
      auto refs = b.CreateVector(std::vector<Offset>{ref});
      auto array_start = b.StartTable();
      b.AddOffset(Slot(0), flatbuffers::Offset<flatbuffers::Vector<uint8_t>>(shape_structs));
      b.AddOffset(Slot(2), refs);
      data = Offset(b.EndTable(array_start));
    } else {
      data = Offset(b.EndTable(b.StartTable()));
    }
    auto start = b.StartTable();
    const ObjectId8 node_id = array ? array_id : ObjectId8{};
    b.AddStruct(Slot(0), &node_id);
    b.AddOffset(Slot(1), path_offset);
    b.AddOffset(Slot(2), user_data);
    b.AddElement<uint8_t>(Slot(3), array ? 1 : 2, 0);
    b.AddOffset(Slot(4), data);
    return Offset(b.EndTable(start));
  };
  auto root = node("/", R"({"zarr_format":3,"node_type":"group","attributes":{}})", false);
  auto t = node("/t", R"({"zarr_format":3,"node_type":"array","shape":[4]})", true);
  auto nodes = b.CreateVector(std::vector<Offset>{root, t});
  auto message = b.CreateString("a commit");
  auto metadata = b.CreateVector(std::vector<Offset>{});
  b.StartVector(0, 32);
  auto files = b.EndVector(0);
  auto start = b.StartTable();
  b.AddStruct(Slot(0), &id);
  b.AddOffset(Slot(2), nodes);
  b.AddElement<uint64_t>(Slot(3), 1'700'000'000'000'000, 0);
  b.AddOffset(Slot(4), message);
  b.AddOffset(Slot(5), metadata);
  b.AddOffset(Slot(6), flatbuffers::Offset<flatbuffers::Vector<uint8_t>>(files));
  b.Finish(Offset(b.EndTable(start)));
  return File(b, icechunk::FileType::kSnapshot, spec_version);
}

// Manifest 0x22...: chunk [0] inline "ab", chunk [1] virtual, 2 bytes at offset 3 of `location`.
std::string Manifest(const ObjectId8& array_id, const std::string& location) {
  flatbuffers::FlatBufferBuilder b;
  auto chunk = [&](uint32_t i, bool virtual_ref) {
    auto index = b.CreateVector(std::vector<uint32_t>{i});
    flatbuffers::Offset<flatbuffers::Vector<uint8_t>> data;
    flatbuffers::Offset<flatbuffers::String> where;
    if (virtual_ref) {
      where = b.CreateString(location);
    } else {
      data = b.CreateVector(std::vector<uint8_t>{'a', 'b'});
    }
    auto start = b.StartTable();
    b.AddOffset(Slot(0), index);
    if (virtual_ref) {
      b.AddElement<uint64_t>(Slot(2), 3, 0);
      b.AddElement<uint64_t>(Slot(3), 2, 0);
      b.AddOffset(Slot(5), where);
    } else {
      b.AddOffset(Slot(1), data);
    }
    return Offset(b.EndTable(start));
  };
  auto refs = b.CreateVector(std::vector<Offset>{chunk(0, false), chunk(1, true)});
  auto array_start = b.StartTable();
  b.AddStruct(Slot(0), &array_id);
  b.AddOffset(Slot(1), refs);
  auto arrays = b.CreateVector(std::vector<Offset>{Offset(b.EndTable(array_start))});
  auto start = b.StartTable();
  const ObjectId12 id = Id12(0x22);
  b.AddStruct(Slot(0), &id);
  b.AddOffset(Slot(1), arrays);
  b.Finish(Offset(b.EndTable(start)));
  return File(b, icechunk::FileType::kManifest);
}

// icechunk's RepositoryConfig as a FlexBuffer (as spec 2 repo info files hold it), with one
// virtual chunk container per prefix; no prefixes: "virtual_chunk_containers" is null.
std::vector<uint8_t> FlexConfig(const std::vector<std::string>& prefixes) {
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Null("caching");
    fbb.UInt("inline_chunk_threshold_bytes", 512);
    if (prefixes.empty()) {
      fbb.Null("virtual_chunk_containers");
    } else {
      fbb.Map("virtual_chunk_containers", [&] {
        for (const std::string& prefix : prefixes) {
          fbb.Map(prefix.c_str(), [&] {
            fbb.Null("name");
            fbb.Map("store", [&] { fbb.Map("s3", [] {}); });
            fbb.String("url_prefix", prefix);
          });
        }
      });
    }
  });
  fbb.Finish();
  return fbb.GetBuffer();
}

// A spec 2 repo info: snapshots [first 0x10..., second 0x11... (parent: first)], branch main at
// the second, tag v1 at the first, tag gone deleted; `config` its configuration, if any.
std::string RepoInfo(const std::optional<std::vector<uint8_t>>& config = std::nullopt) {
  flatbuffers::FlatBufferBuilder b;
  auto ref = [&](const char* name, uint32_t index) {
    auto n = b.CreateString(name);
    auto start = b.StartTable();
    b.AddOffset(Slot(0), n);
    b.AddElement<uint32_t>(Slot(1), index, 0);
    return Offset(b.EndTable(start));
  };
  auto info = [&](uint8_t fill, int32_t parent) {
    auto message = b.CreateString("m");
    auto start = b.StartTable();
    const ObjectId12 id = Id12(fill);
    b.AddStruct(Slot(0), &id);
    b.AddElement<int32_t>(Slot(1), parent, 0);
    b.AddOffset(Slot(3), message);
    return Offset(b.EndTable(start));
  };
  auto tags = b.CreateVector(std::vector<Offset>{ref("v1", 0)});
  auto branches = b.CreateVector(std::vector<Offset>{ref("main", 1)});
  auto deleted = b.CreateVectorOfStrings(std::vector<std::string>{"gone"});
  auto snapshots = b.CreateVector(std::vector<Offset>{info(0x10, -1), info(0x11, 0)});
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> config_bytes;
  if (config) config_bytes = b.CreateVector(*config);
  auto start = b.StartTable();
  b.AddElement<uint8_t>(Slot(0), 2, 0);
  b.AddOffset(Slot(1), tags);
  b.AddOffset(Slot(2), branches);
  b.AddOffset(Slot(3), deleted);
  b.AddOffset(Slot(4), snapshots);
  if (config) b.AddOffset(Slot(9), config_bytes);
  b.Finish(Offset(b.EndTable(start)));
  return File(b, icechunk::FileType::kRepoInfo, 2);
}

class IcechunkStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = std::dynamic_pointer_cast<MemoryStore>(OpenStore("memory://ic-target").value());
    ASSERT_TRUE(target_->Put("data.bin", "0123456789").ok());
    repository_ = std::make_shared<MemoryStore>();
    ObjectId8 array_id;
    array_id.fill(5);
    const ObjectId12 snapshot = Id12(0x11);
    const std::string name = icechunk::EncodeObjectId(snapshot);
    ASSERT_TRUE(
        repository_->Put("refs/branch.main/ref.json", R"({"snapshot":")" + name + "\"}").ok());
    ASSERT_TRUE(repository_->Put("refs/tag.old/ref.json", R"({"snapshot":")" + name + "\"}").ok());
    ASSERT_TRUE(repository_->Put("refs/tag.old/ref.json.deleted", "").ok());
    ASSERT_TRUE(repository_->Put("snapshots/" + name, Snapshot(snapshot, array_id)).ok());
    ASSERT_TRUE(repository_
                    ->Put("manifests/" + icechunk::EncodeObjectId(Id12(0x22)),
                          Manifest(array_id, "memory://ic-target/data.bin"))
                    .ok());
  }

  void AllowTarget() {
    ASSERT_TRUE(repository_
                    ->Put("config.yaml",
                          "virtual_chunk_containers:\n  memory://ic-target/:\n    name: null\n"
                          "    url_prefix: memory://ic-target/\n    store: !s3_compatible {}\n")
                    .ok());
  }

  std::shared_ptr<IcechunkStore> Open(std::string_view ref = "") {
    Result<std::shared_ptr<IcechunkStore>> store = IcechunkStore::Open(repository_, ref);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? *store : nullptr;
  }

  static std::string Read(Store& store, std::string_view key) {
    Result<ByteBuffer> bytes = store.ReadAll(key);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return bytes.ok() ? std::string(AsStringView(bytes->span())) : "";
  }

  std::shared_ptr<MemoryStore> target_;
  std::shared_ptr<MemoryStore> repository_;
};

TEST_F(IcechunkStoreTest, ReadsMetadataAndChunks) {
  Result<bool> is_repository = IcechunkStore::IsRepository(*repository_);
  ASSERT_TRUE(is_repository.ok() && *is_repository);
  AllowTarget();
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->snapshot().ref_kind, "branch");
  EXPECT_EQ(store->snapshot().message, "a commit");
  EXPECT_EQ(store->snapshot().id, icechunk::EncodeObjectId(Id12(0x11)));
  EXPECT_NE(Read(*store, "zarr.json").find("group"), std::string::npos);
  EXPECT_NE(Read(*store, "t/zarr.json").find("array"), std::string::npos);
  EXPECT_EQ(Read(*store, "t/c/0"), "ab");
  EXPECT_EQ(Read(*store, "t/c/1"), "34");
  ByteBuffer part;
  ASSERT_TRUE(store->ReadInto("t/c/1", ByteRange::Bounded(1, 1), &part).ok());
  EXPECT_EQ(AsStringView(part.span()), "4");
  // Not referenced: the fill value.
  EXPECT_EQ(store->ReadAll("t/c/2").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store->ReadAll("u/zarr.json").status().code(), ErrorCode::kNotFound);
  Result<DirectoryListing> root = store->ListDirectory("");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->prefixes, std::vector<std::string>{"t"});
  Result<std::vector<KeyInfo>> keys = store->List("t");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 3u);  // t/zarr.json, t/c/0, t/c/1
  ExpectErrorContains(store->Put("t/c/0", std::span<const std::byte>()), ErrorCode::kUnsupported,
                      {"read-only"});
  // The snapshot by id, too.
  auto by_id = Open(icechunk::EncodeObjectId(Id12(0x11)));
  ASSERT_NE(by_id, nullptr);
  EXPECT_EQ(by_id->snapshot().ref_kind, "snapshot");
}

TEST_F(IcechunkStoreTest, VirtualChunkOutsideContainersIsRefused) {
  auto store = Open("main");
  ASSERT_NE(store, nullptr);
  ExpectErrorContains(
      store->ReadAll("t/c/1").status(), ErrorCode::kInvalidArgument,
      {"t/c/1", "memory://ic-target/data.bin", "virtual chunk container", "branch 'main'"});
}

TEST_F(IcechunkStoreTest, RefErrors) {
  ExpectErrorContains(IcechunkStore::Open(repository_, "nope").status(), ErrorCode::kNotFound,
                      {"'nope'", "branch.main", "tag.old"});
  ExpectErrorContains(IcechunkStore::Open(repository_, "old").status(), ErrorCode::kNotFound,
                      {"tag 'old'", "deleted"});
  ExpectErrorContains(IcechunkStore::Open(repository_, "a/b").status(), ErrorCode::kInvalidArgument,
                      {"no '/'"});
  ExpectErrorContains(IcechunkStore::Open(repository_, std::string(20, '0')).status(),
                      ErrorCode::kNotFound, {"does not exist"});
  auto empty = std::make_shared<MemoryStore>();
  Result<bool> is_repository = IcechunkStore::IsRepository(*empty);
  ASSERT_TRUE(is_repository.ok());
  EXPECT_FALSE(*is_repository);
}

TEST_F(IcechunkStoreTest, SpecTwoReadsRefsFromTheRepoInfo) {
  auto repository = std::make_shared<MemoryStore>();
  ObjectId8 array_id;
  array_id.fill(5);
  ASSERT_TRUE(repository->Put("repo", RepoInfo()).ok());
  for (uint8_t fill : {0x10, 0x11}) {
    ASSERT_TRUE(repository
                    ->Put("snapshots/" + icechunk::EncodeObjectId(Id12(fill)),
                          Snapshot(Id12(fill), array_id, 2))
                    .ok());
  }
  ASSERT_TRUE(repository
                  ->Put("manifests/" + icechunk::EncodeObjectId(Id12(0x22)),
                        Manifest(array_id, "memory://ic-target/data.bin"))
                  .ok());
  Result<bool> is_repository = IcechunkStore::IsRepository(*repository);
  ASSERT_TRUE(is_repository.ok() && *is_repository);
  Result<std::shared_ptr<IcechunkStore>> main = IcechunkStore::Open(repository, "");
  ASSERT_TRUE(main.ok()) << main.status().ToString();
  EXPECT_EQ((*main)->snapshot().spec_version, 2);
  EXPECT_EQ((*main)->snapshot().ref_kind, "branch");
  EXPECT_EQ((*main)->snapshot().id, icechunk::EncodeObjectId(Id12(0x11)));
  EXPECT_EQ((*main)->snapshot().parent_id, icechunk::EncodeObjectId(Id12(0x10)));
  EXPECT_EQ(Read(**main, "t/c/0"), "ab");
  // A repository without a configuration has no virtual chunk containers: none is read.
  ExpectErrorContains((*main)->ReadAll("t/c/1").status(), ErrorCode::kInvalidArgument,
                      {"t/c/1", "no virtual chunk container", "it has none"});
  Result<std::shared_ptr<IcechunkStore>> tag = IcechunkStore::Open(repository, "v1");
  ASSERT_TRUE(tag.ok()) << tag.status().ToString();
  EXPECT_EQ((*tag)->snapshot().ref_kind, "tag");
  EXPECT_EQ((*tag)->snapshot().id, icechunk::EncodeObjectId(Id12(0x10)));
  EXPECT_EQ((*tag)->snapshot().parent_id, "");
  ExpectErrorContains(IcechunkStore::Open(repository, "gone").status(), ErrorCode::kNotFound,
                      {"'gone'", "deleted", "main", "v1"});
}

TEST_F(IcechunkStoreTest, SpecTwoReadsVirtualChunkContainersFromTheConfiguration) {
  auto open = [&](const std::optional<std::vector<uint8_t>>& config) {
    auto repository = std::make_shared<MemoryStore>();
    ObjectId8 array_id;
    array_id.fill(5);
    EXPECT_TRUE(repository->Put("repo", RepoInfo(config)).ok());
    EXPECT_TRUE(repository
                    ->Put("snapshots/" + icechunk::EncodeObjectId(Id12(0x11)),
                          Snapshot(Id12(0x11), array_id, 2))
                    .ok());
    EXPECT_TRUE(repository
                    ->Put("manifests/" + icechunk::EncodeObjectId(Id12(0x22)),
                          Manifest(array_id, "memory://ic-target/data.bin"))
                    .ok());
    return IcechunkStore::Open(repository, "");
  };
  Result<std::shared_ptr<IcechunkStore>> allowed =
      open(FlexConfig({"s3://elsewhere/", "memory://ic-target/"}));
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_EQ((*allowed)->virtual_chunk_prefixes(),
            (std::vector<std::string>{"memory://ic-target/", "s3://elsewhere/"}));
  EXPECT_EQ(Read(**allowed, "t/c/1"), "34");

  Result<std::shared_ptr<IcechunkStore>> other = open(FlexConfig({"s3://elsewhere/"}));
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ExpectErrorContains((*other)->ReadAll("t/c/1").status(), ErrorCode::kInvalidArgument,
                      {"t/c/1", "s3://elsewhere/", "no virtual chunk container"});

  Result<std::shared_ptr<IcechunkStore>> none = open(FlexConfig({}));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE((*none)->virtual_chunk_prefixes().empty());

  // A configuration that is no FlexBuffer, or one whose container has no prefix, is corrupt.
  ExpectErrorContains(open(std::vector<uint8_t>{0xff, 0x00, 0x13}).status(),
                      ErrorCode::kCorruptChunk, {"configuration", "does not verify"});
  flexbuffers::Builder fbb;
  fbb.Map([&] {
    fbb.Map("virtual_chunk_containers", [&] { fbb.Map("s3://x/", [&] { fbb.Null("name"); }); });
  });
  fbb.Finish();
  ExpectErrorContains(open(fbb.GetBuffer()).status(), ErrorCode::kCorruptChunk,
                      {"virtual chunk container 's3://x/'", "no url_prefix"});
}

}  // namespace
}  // namespace zarrstream
