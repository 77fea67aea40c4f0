// What a rechunk copies: each output array with the source arrays (and regions of them) its values
// come from. Resolves the options' variables, label selections and stacking against the source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/extended_array_copy.h"
#include "tools/rechunk.h"
#include "zarrstream/array.h"

namespace zarrstream::tools {

// One source array feeding an output array (or one channel of a stacked array).
struct ChannelSource {
  Array array;
  // Per source dimension j: the output dimension it maps to, or -1 when it is fixed at
  // offset[j] (a pressure level picked for a channel).
  std::vector<int> out_dim;
  // Per source dimension j: added to the output index (the selection's start), or the fixed
  // index when out_dim[j] == -1.
  std::vector<uint64_t> offset;
};

struct OutputArraySource {
  std::string path;  // relative to the destination ("" when the destination is the array)
  std::vector<std::string> dims;
  std::vector<uint64_t> shape;
  DataType dtype = DataType::kFloat32;
  std::vector<uint64_t> default_chunks;  // used when --chunks is not given
  std::string fill_value_json = "null";
  std::string attributes_json = "{}";
  bool is_coordinate = false;  // a 1-D coordinate array: copied as one chunk
  int channel_dim = -1;        // stacked arrays: the channel dimension; channels[c] feeds it
  std::vector<ChannelSource> channels;
  // Stacked arrays: channels[c]'s name ("temperature@500"), the labels of the "channel"
  // coordinate array written beside the stacked array.
  std::vector<std::string> channel_names;

  // The largest source read-chunk extent along output dimension `d` (for a stacked array's channel
  // dimension: along the sources' level dimensions; 1 where no source dimension maps to it):
  // slabs grow to cover it.
  uint64_t source_chunk_extent(size_t d) const;
};

struct SourceLayout {
  bool is_group = true;
  std::string group_attributes_json = "{}";
  std::vector<OutputArraySource> outputs;  // coordinates first, then data arrays
  // Members of a text or time type: copied whole (see extended_array_copy.h).
  std::vector<ExtendedArrayCopy> extended_copies;
  // Members not copied, each "name: why" (an unknown data type, JSON objects).
  std::vector<std::string> skipped;
};

Result<SourceLayout> ResolveSources(const RechunkOptions& options);

}  // namespace zarrstream::tools
