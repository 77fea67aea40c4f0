#include "util/populate_pages.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "util/address_space_test_util.h"

namespace zarrstream {
namespace {

// Fresh anonymous memory: no page is in until touched.
class FreshMapping {
 public:
  explicit FreshMapping(size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  ~FreshMapping() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  FreshMapping(const FreshMapping&) = delete;
  FreshMapping& operator=(const FreshMapping&) = delete;
  std::byte* data() const { return data_; }

  // How many of the pages in [offset, offset + bytes) are resident.
  size_t ResidentPages(size_t offset, size_t bytes) const {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> in((bytes + page - 1) / page);
    if (::mincore(data_ + offset, bytes, in.data()) != 0) return 0;
    size_t resident = 0;
    for (unsigned char c : in) resident += c & 1;
    return resident;
  }

 private:
  std::byte* data_ = nullptr;
  size_t bytes_;
};

TEST(PopulatePagesTest, FaultsEveryWholePageInAndKeepsTheContents) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t bytes = size_t{96} << 20;
  FreshMapping mapping(bytes);
  ASSERT_NE(mapping.data(), nullptr);
  ASSERT_LT(mapping.ResidentPages(0, bytes), bytes / page / 2);
  const char pattern[] = "kept";
  for (size_t offset : {page + 7, bytes / 2, bytes - page}) {
    std::memcpy(mapping.data() + offset, pattern, sizeof(pattern));
  }

  // From a start one byte into the first page to one byte short of the end: the whole pages.
  PopulatePages(mapping.data() + 1, bytes - 2, 4);

  EXPECT_EQ(mapping.ResidentPages(page, bytes - 2 * page), bytes / page - 2);
  for (size_t offset : {page + 7, bytes / 2, bytes - page}) {
    EXPECT_EQ(std::memcmp(mapping.data() + offset, pattern, sizeof(pattern)), 0) << offset;
  }
  for (size_t offset : {size_t{0} + page, bytes / 4, bytes - 2 * page}) {
    EXPECT_EQ(mapping.data()[offset + 100], std::byte{0}) << offset;  // fresh pages stay zero
  }
}

TEST(PopulatePagesTest, LeavesARangeTooSmallToShareToTheFirstTouch) {
  const size_t bytes = size_t{48} << 20;  // one 32 MiB slice: no second thread to share it with
  FreshMapping mapping(bytes);
  ASSERT_NE(mapping.data(), nullptr);
  PopulatePages(mapping.data(), bytes, 8);
  EXPECT_EQ(mapping.ResidentPages(0, bytes), 0u);
  PopulatePages(mapping.data(), bytes, 1);  // one thread: nothing gained over the first touch
  EXPECT_EQ(mapping.ResidentPages(0, bytes), 0u);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ZARRSTREAM_UNDER_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define ZARRSTREAM_UNDER_SANITIZER 1
#endif
#endif

// Maps `bytes` afresh, limits the process's address space to about what it has mapped (so that no
// thread's stack can be mapped), faults the mapping in with up to 4 threads and exits 0 if every
// page is in. Exits with another code if the premise does not hold (3: no mapping; 4: no limit;
// 5: a thread could still start) or a page is missing (6).
[[noreturn]] void PopulateWhereNoThreadCanStart(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  FreshMapping mapping(bytes);
  if (mapping.data() == nullptr) std::_Exit(3);
  if (!LimitAddressSpaceToMappedPlus(size_t{2} << 20)) std::_Exit(4);
  try {
    std::thread probe([] {});
    probe.join();
    std::_Exit(5);
  } catch (const std::system_error&) {
  }
  PopulatePages(mapping.data(), bytes, 4);
  std::_Exit(mapping.ResidentPages(0, bytes) == bytes / page ? 0 : 6);
}

// A process at a limit still gets every page faulted in, by the calling thread, rather than
// std::system_error out of CudaDriver::RegisterHost. In a process of its own (the limit would
// outlive the test), started afresh ("threadsafe" death tests re-execute the binary) so that no
// stack freed by an earlier test's threads is cached for reuse.
TEST(PopulatePagesTest, FaultsEveryPageInOnTheCallingThreadWhenNoThreadCanStart) {
#ifdef ZARRSTREAM_UNDER_SANITIZER
  GTEST_SKIP() << "a sanitizer's runtime needs address space beyond the limit this test sets";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Four 32 MiB slices: three threads asked for, none started.
  EXPECT_EXIT(PopulateWhereNoThreadCanStart(size_t{128} << 20), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace zarrstream
