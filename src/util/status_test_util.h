// Test helpers for Status values (tests only).
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string_view>

#include "zarrstream/status.h"

namespace zarrstream {

// Expects `status` to fail with `code` and a message containing every one of `parts`.
inline void ExpectErrorContains(const Status& status, ErrorCode code,
                                std::initializer_list<std::string_view> parts) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), code) << status.ToString();
  for (std::string_view part : parts) {
    EXPECT_NE(status.message().find(part), std::string::npos)
        << "'" << part << "' not in: " << status.message();
  }
}

}  // namespace zarrstream
