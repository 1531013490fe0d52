// The test suites' precompiled header: the product's third-party headers and
// Catch2 (cmake/pch.cmake). Kept apart from third_party_pch.h so product code
// never sees Catch2's macros (CHECK, INFO, WARN, SECTION...).
#pragma once

#include "cmake/third_party_pch.h"

#include <catch2/catch.hpp>
