#include <gtest/gtest.h>
TEST(StoreBuild, Links) { SUCCEED(); }
