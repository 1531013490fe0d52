// The third-party headers nearly every translation unit parses: Boost.Asio and
// Beast (coroutines, sockets, HTTP) and nlohmann_json. Precompiled once
// per build (cmake/pch.cmake) and reused by every target that has the
// project-wide flags, so each .cc starts from a parsed AST instead of ~150k
// lines of headers. Only headers that do not depend on a macro a .cc defines
// before including them belong here. The suites' header adds Catch2
// (test_pch.h).
#pragma once

// Inside a precompiled header clang 19 loses the system-header exemption for
// deprecation warnings raised where a template is instantiated from our code
// (libstdc++'s stable_sort calls the deprecated get_temporary_buffer); a
// plain build never reports them. The pragma's state is kept per location, so
// it silences only warnings located in the headers below, not in our files.
#pragma clang diagnostic ignored "-Wdeprecated-declarations"

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
