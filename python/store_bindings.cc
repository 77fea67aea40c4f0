#include "store_bindings.h"

#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "errors.h"
#include "gil.h"
#include "store/http_store.h"
#include "store/store.h"
#include "store/store_registry.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace zarrstream::python {

namespace {

// A range as Python passes it: ("bounded", offset, length), ("suffix", length, 0) or
// ("from", offset, 0).
ByteRange ToByteRange(const std::tuple<std::string, uint64_t, uint64_t>& r) {
  const auto& [kind, a, b] = r;
  if (kind == "bounded") return ByteRange::Bounded(a, b);
  if (kind == "suffix") return ByteRange::Suffix(a);
  if (kind == "from") return ByteRange::FromOffset(a);
  throw StatusError(InvalidArgumentError("unknown byte range kind '" + kind + "'"));
}

std::span<const std::byte> AsBytes(const nb::bytes& b) {
  return {reinterpret_cast<const std::byte*>(b.c_str()), b.size()};
}

// Every key of `keys` read whole, `in_flight` reads outstanding while keys are left (a slot
// starts its next read as soon as its last one completes, in whatever order they complete), the
// bytes dropped as they arrive: what receiving costs without decoding. The total bytes received,
// or the first error, naming its key.
Result<uint64_t> ReceiveAll(Store& store, const std::vector<std::string>& keys, size_t in_flight) {
  struct Slot {
    size_t key = 0;
    ByteRange range = ByteRange::Full();
    ByteBuffer out;  // reused by the slot's reads
  };
  // Completions, pushed by the I/O threads' continuations: (slot, bytes or error).
  struct Completions {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::pair<size_t, Result<uint64_t>>> done;
  };
  if (keys.empty()) return uint64_t{0};
  std::vector<Slot> slots(std::min(in_flight, keys.size()));
  auto completions = std::make_shared<Completions>();
  size_t next_key = 0;
  auto start = [&](size_t s) {
    Slot& slot = slots[s];
    slot.key = next_key++;
    store
        .Read(keys[slot.key], std::span<const ByteRange>(&slot.range, 1),
              std::span<ByteBuffer>(&slot.out, 1))
        .OnReady([completions, s](Result<uint64_t>& bytes) {
          std::lock_guard<std::mutex> lock(completions->mutex);
          completions->done.emplace_back(s, std::move(bytes));
          completions->cv.notify_one();
        });
  };
  for (size_t s = 0; s < slots.size(); ++s) start(s);
  uint64_t total = 0;
  Status first_error;
  for (size_t outstanding = slots.size(); outstanding > 0;) {
    std::unique_lock<std::mutex> lock(completions->mutex);
    completions->cv.wait(lock, [&] { return !completions->done.empty(); });
    auto [s, bytes] = std::move(completions->done.front());
    completions->done.pop_front();
    lock.unlock();
    --outstanding;
    if (bytes.ok()) {
      total += *bytes;
    } else if (first_error.ok()) {
      first_error = std::move(bytes).status().WithContext("key '" + keys[slots[s].key] + "'");
    }
    if (next_key < keys.size() && first_error.ok()) {
      start(s);
      ++outstanding;
    }
  }
  if (!first_error.ok()) return first_error;
  return total;
}

nb::dict MetricsDict(const Store& store) {
  nb::dict d;
  const StoreMetrics* metrics = MetricsOf(store);
  if (metrics == nullptr) return d;
  StoreMetricsSnapshot s = metrics->Snapshot();
  d["requests"] = s.requests;
  d["failed_requests"] = s.failed_requests;
  d["retries"] = s.retries;
  d["bytes_received"] = s.bytes_received;
  d["bytes_sent"] = s.bytes_sent;
  d["latency_us_log2"] = std::vector<uint64_t>(s.latency_us_log2.begin(), s.latency_us_log2.end());
  return d;
}

}  // namespace

void RegisterStoreBindings(nb::module_& m) {
  nb::class_<Store>(m, "Store")
      .def_prop_ro("url", &Store::url)
      .def(
          "read",
          [](Store& store, const std::string& key,
             const std::vector<std::tuple<std::string, uint64_t, uint64_t>>& ranges) {
            std::vector<ByteRange> byte_ranges;
            byte_ranges.reserve(ranges.size());
            for (const auto& r : ranges) byte_ranges.push_back(ToByteRange(r));
            std::vector<ByteBuffer> outs(byte_ranges.size());
            Result<uint64_t> total =
                WithoutGil([&] { return store.Read(key, byte_ranges, outs).Wait(); });
            ThrowIfError(total.status());
            std::vector<nb::bytes> values;
            values.reserve(outs.size());
            for (const ByteBuffer& b : outs) values.emplace_back(b.data(), b.size());
            return values;
          },
          "key"_a, "ranges"_a)
      .def(
          "put",
          [](Store& store, const std::string& key, const nb::bytes& value) {
            ThrowIfError(WithoutGil([&] { return store.Put(key, AsBytes(value)); }));
          },
          "key"_a, "value"_a)
      .def(
          "delete",
          [](Store& store, const std::string& key) {
            ThrowIfError(WithoutGil([&] { return store.Delete(key); }));
          },
          "key"_a)
      .def(
          "list",
          [](Store& store, const std::string& prefix) {
            Result<std::vector<KeyInfo>> keys = WithoutGil([&] { return store.List(prefix); });
            std::vector<std::pair<std::string, uint64_t>> out;
            for (const KeyInfo& k : ValueOrThrow(std::move(keys))) out.emplace_back(k.key, k.size);
            return out;
          },
          "prefix"_a = "")
      .def(
          "list_dir",
          [](Store& store, const std::string& prefix) {
            Result<DirectoryListing> listing =
                WithoutGil([&] { return store.ListDirectory(prefix); });
            DirectoryListing l = ValueOrThrow(std::move(listing));
            std::vector<std::pair<std::string, uint64_t>> keys;
            for (const KeyInfo& k : l.keys) keys.emplace_back(k.key, k.size);
            return std::make_pair(keys, l.prefixes);
          },
          "prefix"_a = "")
      .def(
          "receive",
          [](Store& store, const std::vector<std::string>& keys, size_t in_flight) {
            if (in_flight == 0) {
              throw StatusError(InvalidArgumentError("receive: in_flight must be at least 1"));
            }
            return ValueOrThrow(WithoutGil([&] { return ReceiveAll(store, keys, in_flight); }));
          },
          "keys"_a, "in_flight"_a = 64,
          "Reads every key whole, up to `in_flight` requests outstanding, and returns the bytes "
          "received, keeping none of them: what fetching costs without decoding (a transport-only "
          "measurement; bench/object_store_bench.py's zarrstream-transport row).")
      .def("metrics", &MetricsDict);

  m.def(
      "open_store",
      [](const std::string& url) {
        return ValueOrThrow(WithoutGil([&] { return OpenStore(url); }));
      },
      "url"_a);
}

}  // namespace zarrstream::python
