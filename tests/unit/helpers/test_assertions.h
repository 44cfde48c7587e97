// Small assertions shared by the unit tests (gmock is not linked, so no HasSubstr matcher).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace kipp::test_support {

inline ::testing::AssertionResult has_substr(const std::string& text, const std::string& needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message: \"" << text << "\"\n  does not contain: \"" << needle << "\"";
}

}  // namespace kipp::test_support
