// Shared checks for codec tests: round trips through every decode entry point, truncated and
// corrupted input, and guard bytes that catch a decoder writing past its output.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "codec/codec.h"
#include "codec/decoded_size.h"
#include "metadata/v2_metadata.h"

namespace zarrstream::testing {

inline std::span<const std::byte> AsBytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

template <typename T>
std::span<const std::byte> AsBytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

// Uniformly random bytes (incompressible).
inline std::vector<std::byte> RandomBytes(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xFF);
  return out;
}

// Float32 samples of a smooth field with a little noise: compressible like real chunks.
inline std::vector<std::byte> FieldBytes(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (size_t i = 0; i + 4 <= n; i += 4) {
    float v = 280.0f + 10.0f * std::sin(static_cast<float>(i) * 1e-3f) +
              static_cast<float>(rng() % 16) * 0.01f;
    std::memcpy(out.data() + i, &v, 4);
  }
  for (size_t i = n - n % 4; i < n; ++i) out[i] = std::byte{0x5A};
  return out;
}

inline std::vector<std::byte> FromHex(std::string_view hex) {
  std::vector<std::byte> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::byte>(std::stoi(std::string(hex.substr(2 * i, 2)), nullptr, 16));
  }
  return out;
}

// The fixtures store little-endian values; the codec works on native ones.
inline std::vector<std::byte> Native(std::vector<std::byte> bytes, DataType type) {
  const size_t size = DataTypeSize(type);
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i + size <= bytes.size(); i += size) {
      std::reverse(bytes.begin() + i, bytes.begin() + i + size);
    }
  }
  return bytes;
}

inline DataType TypeOf(std::string_view numpy) {
  auto parsed = ParseV2DataType(numpy);
  EXPECT_TRUE(parsed.ok()) << numpy;
  return parsed->first;
}

inline ChunkRepresentation Representation(DataType type, std::vector<uint64_t> shape) {
  ChunkRepresentation r;
  r.data_type = type;
  r.shape = std::move(shape);
  r.fill_value.assign(DataTypeSize(type), std::byte{0});
  return r;
}

inline ::testing::AssertionResult IsCorrupt(const Status& status) {
  if (status.code() == ErrorCode::kCorruptChunk) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected a CorruptChunk error, got " << status.ToString();
}

inline ::testing::AssertionResult IsMetadataError(const Status& status) {
  if (status.code() == ErrorCode::kMetadata) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "expected a Metadata error, got " << status.ToString();
}

// An array → array filter against numcodecs' output (little-endian hex): encoding `x` of
// `decoded_type` gives `enc` of the codec's encoded type.
inline void ExpectFilterEncodes(const ArrayToArrayCodec& codec, DataType decoded_type,
                                std::string_view x, std::string_view enc) {
  const DataType encoded_type = codec.encoded_representation().data_type;
  const std::vector<std::byte> want = Native(FromHex(enc), encoded_type);
  std::vector<std::byte> encoded(want.size());
  Status status = codec.Encode(Native(FromHex(x), decoded_type), encoded);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(encoded, want) << "encode";
}

// Decoding `enc_in` (of the codec's encoded type) gives `dec` of `decoded_type`.
inline void ExpectFilterDecodes(const ArrayToArrayCodec& codec, DataType decoded_type,
                                std::string_view enc_in, std::string_view dec) {
  const DataType encoded_type = codec.encoded_representation().data_type;
  const std::vector<std::byte> want = Native(FromHex(dec), decoded_type);
  std::vector<std::byte> decoded(want.size());
  Status status = codec.Decode(Native(FromHex(enc_in), encoded_type), decoded);
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(decoded, want) << "decode";
}

// DecodeInto a buffer followed by guard bytes; fails the test if a guard byte changed.
inline Status DecodeIntoGuarded(const BytesToBytesCodec& codec, std::span<const std::byte> encoded,
                                size_t size, std::vector<std::byte>* out) {
  constexpr size_t kGuard = 64;
  std::vector<std::byte> buffer(size + kGuard, std::byte{0xCD});
  CodecScratch scratch;
  Status status = codec.DecodeInto(encoded, std::span(buffer).first(size), &scratch);
  for (size_t i = size; i < buffer.size(); ++i) {
    if (buffer[i] != std::byte{0xCD}) {
      ADD_FAILURE() << "DecodeInto wrote past its output at byte " << i - size;
      break;
    }
  }
  buffer.resize(size);
  *out = std::move(buffer);
  return status;
}

// Encodes `data`; decoding it with the size known (Decode, DecodeInto) or bounded gives it back.
// Returns the encoded bytes.
inline std::vector<std::byte> ExpectRoundTrip(const BytesToBytesCodec& codec,
                                              std::span<const std::byte> data) {
  ByteBuffer encoded;
  Status status = codec.Encode(data, &encoded);
  EXPECT_TRUE(status.ok()) << status.ToString();
  if (!status.ok()) return {};
  if (auto size = codec.EncodedSize(data.size())) {
    EXPECT_EQ(*size, encoded.size());
  }

  ByteBuffer decoded;
  status = codec.Decode(encoded.span(), data.size(), &decoded);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.span().begin(), decoded.span().end()));

  // With only a bound (a codec behind a variable-size one): a generous one, one that is exactly
  // the size, and one a byte short, which must fail rather than truncate or grow past it.
  for (uint64_t limit : {uint64_t{data.size()}, MaxCompressedSize(data.size())}) {
    status = codec.Decode(encoded.span(), DecodedSize::AtMost(limit), &decoded);
    EXPECT_TRUE(status.ok()) << "at most " << limit << ": " << status.ToString();
    EXPECT_TRUE(std::equal(data.begin(), data.end(), decoded.span().begin(), decoded.span().end()));
  }
  if (!data.empty()) {
    status = codec.Decode(encoded.span(), DecodedSize::AtMost(data.size() - 1), &decoded);
    EXPECT_TRUE(IsCorrupt(status));
    EXPECT_NE(status.message().find("more than " + std::to_string(data.size() - 1)),
              std::string::npos)
        << status.ToString();
  }

  std::vector<std::byte> into;
  status = DecodeIntoGuarded(codec, encoded.span(), data.size(), &into);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(std::equal(data.begin(), data.end(), into.begin(), into.end()));
  return {encoded.data(), encoded.data() + encoded.size()};
}

// Every strict prefix of `encoded` (sampled) fails to decode with the size known, and (if
// `detects_without_size`) also with only a bound. Decoding the whole with a wrong expected
// size fails too.
inline void ExpectTruncationFails(const BytesToBytesCodec& codec,
                                  std::span<const std::byte> encoded, size_t decoded_size,
                                  bool detects_without_size = true) {
  std::vector<size_t> lengths = {
      0, 1, 2, 3, 4, 5, 8, 16, 17, encoded.size() / 2, encoded.size() - 4, encoded.size() - 1};
  for (size_t length : lengths) {
    if (length >= encoded.size()) continue;
    SCOPED_TRACE("prefix of " + std::to_string(length) + " bytes");
    std::span<const std::byte> prefix = encoded.first(length);
    ByteBuffer decoded;
    EXPECT_TRUE(IsCorrupt(codec.Decode(prefix, decoded_size, &decoded)));
    std::vector<std::byte> into;
    EXPECT_TRUE(IsCorrupt(DecodeIntoGuarded(codec, prefix, decoded_size, &into)));
    if (detects_without_size) {
      EXPECT_TRUE(IsCorrupt(codec.Decode(prefix, DecodedSize::AtMost(decoded_size), &decoded)));
    }
  }
  ByteBuffer decoded;
  EXPECT_TRUE(IsCorrupt(codec.Decode(encoded, decoded_size + 1, &decoded)));
  if (decoded_size > 0) {
    EXPECT_TRUE(IsCorrupt(codec.Decode(encoded, decoded_size - 1, &decoded)));
    std::vector<std::byte> into;
    EXPECT_TRUE(IsCorrupt(DecodeIntoGuarded(codec, encoded, decoded_size - 1, &into)));
  }
  std::vector<std::byte> into;
  EXPECT_TRUE(IsCorrupt(DecodeIntoGuarded(codec, encoded, decoded_size + 1, &into)));
}

// Decodes `encoded` with random bytes overwritten, many times. A decoder must never crash or write
// past its output: it fails with kCorruptChunk or, lacking a checksum, succeeds with the right
// size. Run under ASan to catch reads past the input.
inline void FuzzDecode(const BytesToBytesCodec& codec, std::span<const std::byte> encoded,
                       size_t decoded_size, int iterations = 300) {
  std::mt19937 rng(1234);
  for (int i = 0; i < iterations; ++i) {
    std::vector<std::byte> damaged(encoded.begin(), encoded.end());
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips && !damaged.empty(); ++f) {
      // Headers are where damage is most interesting; aim half the flips at the first 32 bytes.
      size_t limit = (rng() % 2 == 0) ? std::min<size_t>(32, damaged.size()) : damaged.size();
      damaged[rng() % limit] = static_cast<std::byte>(rng() & 0xFF);
    }
    std::vector<std::byte> into;
    Status status = DecodeIntoGuarded(codec, damaged, decoded_size, &into);
    if (!status.ok()) {
      EXPECT_TRUE(IsCorrupt(status));
    }
    ByteBuffer decoded;
    status = codec.Decode(damaged, DecodedSize::AtMost(MaxCompressedSize(decoded_size)), &decoded);
    if (!status.ok()) {
      EXPECT_TRUE(IsCorrupt(status));
    }
  }
}

// A decompression bomb: `encoded` decodes to (or its header declares) more than `limit` bytes.
// Decoding it with only that bound, as a codec behind a variable-size one is, must fail with
// kCorruptChunk, a message containing `message`, and no output buffer larger than the bound.
inline void ExpectBombRefused(const BytesToBytesCodec& codec, std::span<const std::byte> encoded,
                              uint64_t limit, std::string_view message) {
  ByteBuffer decoded;
  Status status = codec.Decode(encoded, DecodedSize::AtMost(limit), &decoded);
  EXPECT_TRUE(IsCorrupt(status));
  EXPECT_NE(status.message().find(message), std::string::npos) << status.ToString();
  EXPECT_LE(decoded.capacity(), limit);
}

// Several threads decode the same encoded chunk with one codec at once (decoders are const and keep
// per-thread state); each must get `data` back every time.
inline void ExpectConcurrentDecode(const BytesToBytesCodec& codec,
                                   std::span<const std::byte> encoded,
                                   std::span<const std::byte> data) {
  constexpr int kThreads = 4, kRepeats = 20;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      CodecScratch scratch;
      std::vector<std::byte> out(data.size());
      ByteBuffer buffer;
      for (int i = 0; i < kRepeats; ++i) {
        Status a = codec.DecodeInto(encoded, out, &scratch);
        Status b = codec.Decode(
            encoded, (i % 2 == 0) ? DecodedSize(data.size()) : DecodedSize::AtMost(data.size()),
            &buffer);
        if (!a.ok() || !b.ok() || !std::equal(data.begin(), data.end(), out.begin()) ||
            !std::equal(data.begin(), data.end(), buffer.span().begin(), buffer.span().end())) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

}  // namespace zarrstream::testing
