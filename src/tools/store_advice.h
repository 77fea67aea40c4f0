// `zarrstream doctor URL`: whether a store's layout and codecs suit training reads on this
// machine, and the `zarrstream rechunk` command that would make them suit.
//
// For every array of the dataset with a time dimension (the fields a loader samples by time step)
// it looks at what a random-time-step read costs: time steps per chunk (a loader reading one step
// decodes all of them), chunk size (per-request overhead of chunks below ~256 KiB that cut a field
// into pieces, memory and latency above ~64 MiB), levels per chunk (a channel of one level decodes
// all of them), whether the GPU path decodes the codecs, and how many requests opening the dataset
// takes (consolidated metadata).
// These rules are the only layout advice zarrstream gives: `inspect` shows ArrayFindings per array
// and the store's rechunk command, `doctor` the same findings gathered per kind; the command is
// always `--gpu-friendly` (the README's recommendation: the layout both the CPU and nvCOMP decode
// fastest, docs/rechunk.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "zarrstream/array.h"
#include "zarrstream/status.h"

namespace zarrstream::tools {

// The findings about one array, as [{"severity" ("warning"|"info"), "message"}]: empty for arrays
// a loader does not sample by time step (coordinates, static fields) and for layouts that suit.
// `gpu`: a GPU batch path is usable here (chunks it leaves to the CPU are then a warning).
nlohmann::json ArrayFindings(const Array& array, bool gpu);

// {"url", "kind" ("group"|"array"), "consolidated" (bool; arrays: null), "open_requests" (metadata
// reads a loader makes to open it), "gpu" (a GPU batch path is usable here), "arrays": [{"name",
// "shape", "dims", "chunks" (read chunks), "shard_shape" (or null), "dtype", "codecs",
// "chunk_bytes" (decoded), "time_steps_per_chunk", "levels_per_chunk" (or null), "gpu_decodable"
// and "gpu_decode" (gpu/gpu_chunk_codec.h: PlanGpuDecode's answer and its description, as `inspect`
// gives them)}], "findings":
// [{"severity" ("warning"|"info"), "array" (or null), "message"}], "rechunk_command" (null when the
// layout already suits)}. The report and errors show `url` without the user:password it may carry
// (the suggested rechunk command too: the user adds them back).
Result<nlohmann::json> StoreAdvice(std::string_view url);

}  // namespace zarrstream::tools
