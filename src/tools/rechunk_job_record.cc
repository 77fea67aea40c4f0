// The rechunk job's records in its destination (see rechunk_job_record.h).
#include "tools/rechunk_job_record.h"

#include "store/file_store.h"
#include "util/byte_buffer.h"

namespace zarrstream::tools {
namespace {

using nlohmann::json;

// Where the parts of a job record their finished slabs, inside the destination.
constexpr std::string_view kStatePrefix = ".zarrstream-rechunk";

}  // namespace

std::string FinishedKey() { return std::string(kStatePrefix) + "/finished.json"; }

std::string StateKey(uint32_t part, uint32_t count) {
  std::string key(kStatePrefix);
  key += "/part-" + std::to_string(part) + "-of-" + std::to_string(count) + ".json";
  return key;
}

Result<std::optional<json>> ReadState(Store& store, uint32_t part, uint32_t count) {
  ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> bytes, store.ReadIfExists(StateKey(part, count)));
  if (!bytes) return std::optional<json>();
  json state = json::parse(bytes->view(), nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("plan") || !state.contains("done")) {
    return MetadataError("the rechunk progress record " + store.url() + "/" +
                         StateKey(part, count) + " is malformed; remove it (or use --overwrite)");
  }
  return std::optional<json>(std::move(state));
}

Result<std::optional<json>> ReadFinishedPlan(Store& store) {
  ZS_ASSIGN_OR_RETURN(std::optional<ByteBuffer> bytes, store.ReadIfExists(FinishedKey()));
  if (!bytes) return std::optional<json>();
  json finished = json::parse(bytes->view(), nullptr, /*allow_exceptions=*/false);
  if (!finished.is_object() || !finished.contains("plan")) {
    return MetadataError("the rechunk record " + store.url() + "/" + FinishedKey() +
                         " is malformed; remove it (or use --overwrite)");
  }
  return std::optional<json>(std::move(finished["plan"]));
}

Status RemoveAbandonedTemporaries(Store& store) {
  Result<std::vector<KeyInfo>> keys = store.List("");
  if (keys.status().code() == ErrorCode::kUnsupported) return Status::Ok();
  ZS_RETURN_IF_ERROR_CTX(keys.status(), "listing the destination for abandoned temporary files");
  for (const KeyInfo& key : *keys) {
    const size_t slash = key.key.rfind('/');
    const std::string_view leaf =
        std::string_view(key.key).substr(slash == std::string::npos ? 0 : slash + 1);
    if (leaf.find(kFileStoreTemporaryMarker) != std::string_view::npos) {
      ZS_RETURN_IF_ERROR(store.Delete(key.key));
    }
  }
  return Status::Ok();
}

Status WriteState(Store& store, uint32_t part, uint32_t count, const json& plan,
                  const SlabProgress& progress, bool complete) {
  json state = {{"plan", plan}, {"done", progress.RangesJson()}, {"complete", complete}};
  std::string text = state.dump();
  return store.Put(StateKey(part, count),
                   {reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

}  // namespace zarrstream::tools
