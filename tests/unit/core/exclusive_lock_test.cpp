// ExclusiveLock: one holder at a time (flock conflicts between open file descriptions, even in
// one process), released when the holder goes away.
#include <gtest/gtest.h>

#include <optional>

#include "core/files.h"
#include "unit/helpers/gguf_blueprint.h"
#include "unit/helpers/test_assertions.h"

namespace kipp {
namespace {

TEST(ExclusiveLock, SecondHolderIsRefusedUntilTheFirstReleases) {
  testing::TempDir dir;
  const std::string path = dir.file("run.lock");
  std::optional<Expected<ExclusiveLock>> first;
  first.emplace(ExclusiveLock::acquire(path, "kipp train is using the run"));
  ASSERT_TRUE(first->ok()) << first->message();
  auto second = ExclusiveLock::acquire(path, "kipp train is using the run");
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(test_support::has_substr(second.message(), "another kipp train is using the run"));
  first.reset();
  EXPECT_TRUE(ExclusiveLock::acquire(path, "kipp train is using the run").ok());
  auto unwritable = ExclusiveLock::acquire(dir.file("missing/dir/run.lock"), "x");
  ASSERT_FALSE(unwritable.ok());
  EXPECT_TRUE(test_support::has_substr(unwritable.message(), "cannot create"));
}

}  // namespace
}  // namespace kipp
