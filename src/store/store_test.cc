// The store conformance suite: every backend must pass the same tests.
#include "store/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "store/file_store.h"
#include "store/memory_store.h"
#include "store/store_registry.h"

namespace zarrstream {
namespace {

std::span<const std::byte> Bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

struct StoreFactoryParam {
  std::string name;
  std::function<std::shared_ptr<Store>(const std::string& dir)> make;
};

class StoreConformanceTest : public ::testing::TestWithParam<StoreFactoryParam> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("zarrstream_store_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    store_ = GetParam().make(dir_.string());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreConformanceTest, DeleteRemovesTheValueAndToleratesMissingKeys) {
  ASSERT_TRUE(store_->Put("d/k", Bytes("value")).ok());
  ASSERT_TRUE(store_->Delete("d/k").ok());
  auto read = store_->ReadIfExists("d/k");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_FALSE(read->has_value());
  EXPECT_TRUE(store_->Delete("d/k").ok());
  EXPECT_TRUE(store_->Delete("never/stored").ok());
  EXPECT_EQ(store_->Delete("../escape").code(), ErrorCode::kInvalidArgument);
}

TEST_P(StoreConformanceTest, DeletingTheLastKeyUnderAPrefixLeavesNoPrefix) {
  ASSERT_TRUE(store_->Put("p/q/only", Bytes("1")).ok());
  ASSERT_TRUE(store_->Put("p/other", Bytes("2")).ok());
  ASSERT_TRUE(store_->Delete("p/q/only").ok());
  auto listing = store_->ListDirectory("p");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_TRUE(listing->prefixes.empty());
  ASSERT_EQ(listing->keys.size(), 1u);
  EXPECT_EQ(listing->keys[0].key, "p/other");
  // The prefix can be written again at once.
  ASSERT_TRUE(store_->Put("p/q/again", Bytes("3")).ok());
}

TEST_P(StoreConformanceTest, PutThenReadWholeValue) {
  ASSERT_TRUE(store_->Put("a/b/c", Bytes("hello world")).ok());
  auto value = store_->ReadAll("a/b/c");
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(value->view(), "hello world");
}

TEST_P(StoreConformanceTest, ReadsSeveralRangesInOneCall) {
  ASSERT_TRUE(store_->Put("k", Bytes("0123456789")).ok());
  std::vector<ByteRange> ranges = {ByteRange::Bounded(2, 3), ByteRange::Suffix(4),
                                   ByteRange::FromOffset(8), ByteRange::Bounded(0, 0)};
  std::vector<ByteBuffer> outs(ranges.size());
  auto total = store_->Read("k", ranges, outs).Wait();
  ASSERT_TRUE(total.ok()) << total.status().ToString();
  EXPECT_EQ(*total, 3u + 4u + 2u);
  EXPECT_EQ(outs[0].view(), "234");
  EXPECT_EQ(outs[1].view(), "6789");
  EXPECT_EQ(outs[2].view(), "89");
  EXPECT_EQ(outs[3].view(), "");
}

TEST_P(StoreConformanceTest, RangePastTheEndIsAnError) {
  ASSERT_TRUE(store_->Put("k", Bytes("0123")).ok());
  ByteBuffer out;
  EXPECT_EQ(store_->ReadInto("k", ByteRange::Bounded(2, 10), &out).code(),
            ErrorCode::kCorruptChunk);
  EXPECT_EQ(store_->ReadInto("k", ByteRange::Suffix(5), &out).code(), ErrorCode::kCorruptChunk);
}

TEST_P(StoreConformanceTest, MissingKeyIsNotFound) {
  ByteBuffer out;
  EXPECT_EQ(store_->ReadInto("nope", ByteRange::Full(), &out).code(), ErrorCode::kNotFound);
  auto maybe = store_->ReadIfExists("nope/deeper");
  ASSERT_TRUE(maybe.ok());
  EXPECT_FALSE(maybe->has_value());
}

TEST_P(StoreConformanceTest, KeysCannotEscapeTheRoot) {
  for (std::string_view key : {"../x", "a/../../x", "/etc/passwd", "a//b", "./a", "", "a\\b"}) {
    ByteBuffer out;
    EXPECT_EQ(store_->ReadInto(key, ByteRange::Full(), &out).code(), ErrorCode::kInvalidArgument)
        << key;
    EXPECT_EQ(store_->Put(key, Bytes("x")).code(), ErrorCode::kInvalidArgument) << key;
  }
  std::string with_nul("a\0b", 3);
  EXPECT_EQ(store_->Put(with_nul, Bytes("x")).code(), ErrorCode::kInvalidArgument);
}

TEST_P(StoreConformanceTest, ListsRecursivelyAndByDirectory) {
  ASSERT_TRUE(store_->Put("g/zarr.json", Bytes("{}")).ok());
  ASSERT_TRUE(store_->Put("g/a/c/0/0", Bytes("12345")).ok());
  ASSERT_TRUE(store_->Put("g/a/c/0/1", Bytes("1")).ok());
  ASSERT_TRUE(store_->Put("g/b/zarr.json", Bytes("{}")).ok());
  auto all = store_->List("g/a");
  ASSERT_TRUE(all.ok());
  uint64_t bytes = 0;
  for (const auto& k : *all) bytes += k.size;
  EXPECT_EQ(all->size(), 2u);
  EXPECT_EQ(bytes, 6u);
  auto dir = store_->ListDirectory("g");
  ASSERT_TRUE(dir.ok());
  ASSERT_EQ(dir->keys.size(), 1u);
  EXPECT_EQ(dir->keys[0].key, "g/zarr.json");
  std::vector<std::string> prefixes = dir->prefixes;
  std::sort(prefixes.begin(), prefixes.end());
  EXPECT_EQ(prefixes, (std::vector<std::string>{"g/a", "g/b"}));
}

TEST_P(StoreConformanceTest, PutReplaces) {
  ASSERT_TRUE(store_->Put("k", Bytes("first value")).ok());
  ASSERT_TRUE(store_->Put("k", Bytes("second")).ok());
  EXPECT_EQ(store_->ReadAll("k")->view(), "second");
}

INSTANTIATE_TEST_SUITE_P(
    Backends, StoreConformanceTest,
    ::testing::Values(
        StoreFactoryParam{"file",
                          [](const std::string& dir) { return std::make_shared<FileStore>(dir); }},
        StoreFactoryParam{"memory",
                          [](const std::string&) { return std::make_shared<MemoryStore>(); }}),
    [](const auto& param_info) { return param_info.param.name; });

// FileStore beyond the conformance suite: links planted below the root (writes and removals never
// go through them; reads do) and writers racing removals that prune directories.
class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::filesystem::temp_directory_path() /
            ("zarrstream_link_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(base_);
    std::filesystem::create_directories(base_ / "root");
    std::filesystem::create_directories(base_ / "outside");
    store_ = std::make_shared<FileStore>((base_ / "root").string());
  }
  void TearDown() override { std::filesystem::remove_all(base_); }

  std::string Contents(const std::filesystem::path& path) {
    ByteBuffer out;
    auto file = std::make_shared<FileStore>(path.parent_path().string());
    EXPECT_TRUE(file->ReadInto(path.filename().string(), ByteRange::Full(), &out).ok());
    return std::string(out.view());
  }

  std::filesystem::path base_;
  std::shared_ptr<FileStore> store_;
};

TEST_F(FileStoreTest, ALinkAtTheKeyIsReplacedNotWrittenThrough) {
  ASSERT_TRUE(std::make_shared<FileStore>((base_ / "outside").string())
                  ->Put("precious", Bytes("precious"))
                  .ok());
  std::filesystem::create_directories(base_ / "root" / "a");
  std::filesystem::create_symlink(base_ / "outside" / "precious", base_ / "root" / "a" / "k");
  EXPECT_EQ(store_->ReadAll("a/k")->view(), "precious");  // reads follow links
  ASSERT_TRUE(store_->Put("a/k", Bytes("new")).ok());
  EXPECT_FALSE(std::filesystem::is_symlink(base_ / "root" / "a" / "k"));
  EXPECT_EQ(store_->ReadAll("a/k")->view(), "new");
  EXPECT_EQ(Contents(base_ / "outside" / "precious"), "precious");
}

TEST_F(FileStoreTest, ALinkedDirectoryRefusesWritesAndRemovals) {
  ASSERT_TRUE(std::make_shared<FileStore>((base_ / "outside").string())
                  ->Put("c/0", Bytes("precious"))
                  .ok());
  std::filesystem::create_symlink(base_ / "outside", base_ / "root" / "arr");
  for (Status s : {store_->Put("arr/c/1", Bytes("x")), store_->Delete("arr/c/0")}) {
    EXPECT_EQ(s.code(), ErrorCode::kStorage) << s.ToString();
    EXPECT_NE(s.message().find((base_ / "root" / "arr").string() + " is a symbolic link"),
              std::string::npos)
        << s.ToString();
  }
  EXPECT_FALSE(std::filesystem::exists(base_ / "outside" / "c" / "1"));
  EXPECT_EQ(Contents(base_ / "outside" / "c" / "0"), "precious");
  // Listing names the link's keys by the link, not by where it points.
  auto keys = store_->List("arr");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].key, "arr/c/0");
}

TEST_F(FileStoreTest, TheRootItselfMayBeALink) {
  std::filesystem::create_symlink(base_ / "outside", base_ / "linked-root");
  FileStore linked((base_ / "linked-root").string());
  ASSERT_TRUE(linked.Put("x/y", Bytes("ok")).ok());
  EXPECT_EQ(Contents(base_ / "outside" / "x" / "y"), "ok");
  ASSERT_TRUE(linked.Delete("x/y").ok());
  EXPECT_FALSE(std::filesystem::exists(base_ / "outside" / "x"));  // emptied directory pruned
}

TEST_F(FileStoreTest, PutsRacingDeletesThatPruneTheirDirectoryAllSucceed) {
  // Each Delete removes the directories it empties, the ones the other threads are writing into.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "a/b/c/k" + std::to_string(t);
      for (int i = 0; i < 300; ++i) {
        if (Status s = store_->Put(key, Bytes("v")); !s.ok()) {
          ADD_FAILURE() << s.ToString();
          ++failures;
        }
        if (Status s = store_->Delete(key); !s.ok()) {
          ADD_FAILURE() << s.ToString();
          ++failures;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_FALSE(std::filesystem::exists(base_ / "root" / "a"));
}

TEST_F(FileStoreTest, ReadHintsActOnlyAfterAReadFromTheDiskAndChangeNothing) {
  ASSERT_TRUE(store_->Put("arr/c/0", Bytes("stored value")).ok());
  const ByteRange full = ByteRange::Full();
  const ByteRange part = ByteRange::Bounded(7, 5);
  const std::span<const ByteRange> ranges(&full, 1);
  // Every read so far came from the page cache: a hint does nothing.
  EXPECT_FALSE(store_->WillRead("arr/c/0", ranges));
  store_->NoteReadFromDiskForTesting();
  // Acted on now, for any key: a missing one, a directory, a named pipe (opened without blocking
  // and left alone), a bad key, a range past the end are the reads' business.
  std::filesystem::create_directories(base_ / "root" / "dir");
  ASSERT_EQ(::mkfifo((base_ / "root" / "pipe").c_str(), 0644), 0);
  for (const std::string key : {"arr/c/0", "arr/c/9", "dir", "pipe", "../escape"}) {
    EXPECT_TRUE(store_->WillRead(key, ranges)) << key;
  }
  const ByteRange past = ByteRange::Bounded(100, 5);
  EXPECT_TRUE(store_->WillRead("arr/c/0", std::span<const ByteRange>(&past, 1)));
  ByteBuffer out;
  ASSERT_TRUE(store_->ReadInto("arr/c/0", part, &out).ok());
  EXPECT_EQ(out.view(), "value");
}

TEST_F(FileStoreTest, AHintToAStoreWithNoReadFromTheDiskYetActsWhereTheValueIsNotCached) {
  ASSERT_TRUE(store_->Put("cold", Bytes(std::string(1 << 16, 'x'))).ok());
  const ByteRange full = ByteRange::Full();
  auto fresh = std::make_shared<FileStore>((base_ / "root").string());
  EXPECT_FALSE(fresh->WillRead("cold", std::span<const ByteRange>(&full, 1)));  // just written
  // Dropped from the page cache (where the file system can: not tmpfs), the value's first page
  // is not there, and the hint is acted on.
  const std::string path = (base_ / "root" / "cold").string();
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  char byte = 0;
  iovec into{&byte, 1};
  const bool dropped = ::preadv2(fd, &into, 1, 0, RWF_NOWAIT) < 0 && errno == EAGAIN;
  ::close(fd);
  if (dropped) {
    EXPECT_TRUE(fresh->WillRead("cold", std::span<const ByteRange>(&full, 1)));
    // And on later hints too, for a while: a read came from the disk.
    EXPECT_TRUE(fresh->WillRead("arr-none", std::span<const ByteRange>(&full, 1)));
  }
  ByteBuffer out;
  ASSERT_TRUE(fresh->ReadInto("cold", full, &out).ok());
  EXPECT_EQ(out.size(), size_t{1} << 16);
}

TEST_F(FileStoreTest, SpecialFilesAreRefusedWithoutBlockingAndNotListed) {
  const std::filesystem::path dir = base_ / "root" / "arr" / "c";
  std::filesystem::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "0").c_str(), 0644), 0);
  ASSERT_EQ(::mkfifo((base_ / "root" / "zarr.json").c_str(), 0644), 0);
  ASSERT_TRUE(store_->Put("arr/c/1", Bytes("v")).ok());
  // A read that blocked on the pipe would never return: run it on a thread, and should it not end
  // in time, open the pipe's other end to release it, so that the test fails instead of hanging.
  for (const std::string key : {"arr/c/0", "zarr.json"}) {
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> result = done->get_future();
    std::thread([store = store_, key, done] {
      ByteBuffer out;
      done->set_value(store->ReadInto(key, ByteRange::Full(), &out));
    }).detach();
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      const std::string path = (base_ / "root" / key).string();
      ::close(::open(path.c_str(), O_WRONLY | O_NONBLOCK));
      FAIL() << "reading the named pipe at " << key << " blocked";
    }
    const Status s = result.get();
    EXPECT_EQ(s.code(), ErrorCode::kStorage) << s.ToString();
    EXPECT_NE(s.message().find("refusing to read key '" + key + "'"), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find("a named pipe"), std::string::npos) << s.ToString();
  }
  auto keys = store_->List("");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].key, "arr/c/1");
  auto listing = store_->ListDirectory("arr/c");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  ASSERT_EQ(listing->keys.size(), 1u);
  EXPECT_EQ(listing->keys[0].key, "arr/c/1");
  // A device reached through a link is refused the same way.
  std::filesystem::create_symlink("/dev/zero", base_ / "root" / "arr" / "c" / "2");
  EXPECT_EQ(store_->ReadAll("arr/c/2").status().code(), ErrorCode::kStorage);
  ASSERT_TRUE(store_->Delete("arr/c/0").ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "0"));
}

// A worker reads chunk after chunk into one scratch buffer: each read holds exactly that object's
// bytes, and a buffer that must grow again keeps room for a somewhat larger object to come.
TEST_F(FileStoreTest, AReusedBufferHoldsEachObjectAndGrowsWithRoomToSpare) {
  const std::string small(1000, 's'), large(4000, 'l'), larger(4400, 'L');
  ASSERT_TRUE(store_->Put("small", Bytes(small)).ok());
  ASSERT_TRUE(store_->Put("large", Bytes(large)).ok());
  ASSERT_TRUE(store_->Put("larger", Bytes(larger)).ok());
  ByteBuffer out;
  ASSERT_TRUE(store_->ReadInto("small", ByteRange::Full(), &out).ok());
  EXPECT_EQ(out.view(), small);
  EXPECT_EQ(out.capacity(), small.size());  // a first read takes what it needs
  ASSERT_TRUE(store_->ReadInto("large", ByteRange::Full(), &out).ok());
  EXPECT_EQ(out.view(), large);
  EXPECT_EQ(out.capacity(), large.size() + large.size() / 8);
  ASSERT_TRUE(store_->ReadInto("small", ByteRange::Full(), &out).ok());
  EXPECT_EQ(out.view(), small);
  ASSERT_TRUE(store_->ReadInto("larger", ByteRange::Full(), &out).ok());  // fits: no new memory
  EXPECT_EQ(out.view(), larger);
  EXPECT_EQ(out.capacity(), large.size() + large.size() / 8);
}

TEST(StoreRegistryTest, PlainPathsAndFileUrlsOpenFileStores) {
  auto a = OpenStore("/tmp/some/dir");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->url(), "file:///tmp/some/dir");
  auto b = OpenStore("file:///tmp/other/");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->url(), "file:///tmp/other");
}

TEST(StoreRegistryTest, ANulByteAnywhereInAUrlIsRefused) {
  using namespace std::string_literals;
  for (const std::string& url :
       {"/tmp/victim\0.zarr"s, "file:///tmp/victim\0/x"s, "memory://a\0b"s,
        "http://user:secret@host/a\0b"s, "s3://bucket/a\0b"s, "gs://bucket\0/x"s, "\0"s}) {
    auto store = OpenStore(url);
    ASSERT_FALSE(store.ok()) << EscapeNul(url);
    EXPECT_EQ(store.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(store.status().message().find("contains a NUL byte"), std::string::npos)
        << store.status().ToString();
    EXPECT_EQ(store.status().message().find('\0'), std::string::npos);
    EXPECT_EQ(store.status().message().find("secret"), std::string::npos);
  }
}

TEST(StoreRegistryTest, UnknownSchemeIsUnsupported) {
  auto s = OpenStore("ftp://host/x");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.status().message().find("ftp"), std::string::npos);
}

TEST(StoreRegistryTest, MemoryUrlsNameOneSharedStore) {
  auto a = OpenStore("memory://shared-test");
  auto b = OpenStore("memory://shared-test");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
}

}  // namespace
}  // namespace zarrstream
