// How a request and its answer change on their way through the gateway: the service's part of
// the path goes, hop-by-hop fields (RFC 9110 section 7.6.1) stay on their hop, X-Forwarded-For,
// -Host and -Proto tell the replica who asked, X-Arbiter-Revision and -Replica tell the client
// who answered.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <string>
#include <string_view>

#include "gateway/asio.h"

namespace arbiter::gateway {

// "/s/NAME/rest?q" -> NAME and "/rest?q"; "/s/NAME" -> "/", "/s/NAME?q" -> "/?q". false when
// the target is not under /s/ or names no service.
bool SplitServiceTarget(std::string_view target, std::string_view* name, std::string* forwarded);

// Removes Connection, the fields it names, Keep-Alive, Proxy-Connection, TE, Trailer,
// Transfer-Encoding and Upgrade.
void RemoveHopByHop(http::fields& fields);

// Makes `req` (as read from the client, body complete) the request to send to a replica:
// `target` as its target, HTTP/1.1 keep-alive, hop-by-hop fields and Expect removed,
// Content-Length from the body, X-Forwarded-For (the client's address appended to any the
// client sent), X-Forwarded-Host (the client's Host) and X-Forwarded-Proto ("http").
void PrepareUpstreamRequest(http::request<http::string_body>& req, std::string target,
                            std::string_view client_ip);

// Makes a replica's answer header the client's: hop-by-hop fields removed, the client's HTTP
// version, X-Arbiter-Revision and X-Arbiter-Replica. Framing (Content-Length, chunked) and
// keep-alive are the caller's.
void PrepareClientResponseHeader(http::response_header<>& header, unsigned client_version,
                                 std::string_view revision, std::string_view replica);

}  // namespace arbiter::gateway
