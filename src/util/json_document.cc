#include "util/json_document.h"

#include <string>

namespace zarrstream {
namespace {

using nlohmann::json;

// Nesting depth of a JSON text, counting brackets outside strings. Malformed text is left to the
// real parser to report; this only has to be right for text that parses.
bool NestingExceeds(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

Result<json> ParseJsonDocument(std::string_view text, std::string_view document) {
  if (NestingExceeds(text, kMaxJsonNesting)) {
    return MetadataError("invalid JSON in " + std::string(document) + ": nested deeper than " +
                         std::to_string(kMaxJsonNesting) + " levels");
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return MetadataError("invalid JSON in " + std::string(document) + ": " + e.what());
  }
}

}  // namespace zarrstream
