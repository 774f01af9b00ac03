// The Boost.Asio and Boost.Beast headers the gateway's sources use, in one place. Internal to
// src/gateway: the public header (gateway.h) does not include Boost.
#pragma once

// Before Asio: Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on

namespace arbiter::gateway {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

}  // namespace arbiter::gateway
