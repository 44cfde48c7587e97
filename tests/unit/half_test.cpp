#include <gtest/gtest.h>

#include "core/half.h"

TEST(Half, Bf16RoundTrip) { EXPECT_EQ(kipp::bf16_to_f32(kipp::f32_to_bf16(1.5f)), 1.5f); }
