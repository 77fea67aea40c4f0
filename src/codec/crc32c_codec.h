// crc32c: the Zarr v3 "crc32c" bytes→bytes codec, a 4-byte little-endian CRC-32C (Castagnoli)
// appended on encode, checked and stripped on decode. Crc32c() is also the checksum of sharding
// indexes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "codec/codec.h"

namespace zarrstream {

// The CRC-32C of `data` (as iSCSI, ext4 and Zarr use it: reflected, initial and final XOR
// 0xFFFFFFFF). Uses the SSE4.2 crc32 instruction when the CPU has it, else tables. Thread-safe.
uint32_t Crc32c(std::span<const std::byte> data);

// Configuration: {} (no fields). Registered as "crc32c".
Result<std::unique_ptr<BytesToBytesCodec>> MakeCrc32cCodec(
    const nlohmann::json& configuration, const ChunkRepresentation& array_representation);

namespace internal {
// The portable table (slice-by-8) implementation, exposed so tests can compare it with the
// hardware path on machines that have one.
uint32_t Crc32cPortable(std::span<const std::byte> data);
}  // namespace internal

}  // namespace zarrstream
