#include "gateway/headers.h"

#include <cctype>
#include <vector>

namespace arbiter::gateway {

bool SplitServiceTarget(std::string_view target, std::string_view* name, std::string* forwarded) {
  constexpr std::string_view kPrefix = "/s/";
  if (target.substr(0, kPrefix.size()) != kPrefix) return false;
  const std::string_view rest = target.substr(kPrefix.size());
  const size_t end = rest.find_first_of("/?");
  *name = rest.substr(0, end);
  if (name->empty()) return false;
  // Built by appending: GCC 12 warns (-Wrestrict, wrongly) about "/" + std::string.
  forwarded->clear();
  if (end == std::string_view::npos || rest[end] == '?') forwarded->push_back('/');
  if (end != std::string_view::npos) forwarded->append(rest.substr(end));
  return true;
}

void RemoveHopByHop(http::fields& fields) {
  // One pass: most messages have none of these, and then nothing else is done.
  bool any = false;
  bool connection = false;
  for (const auto& f : fields) {
    switch (f.name()) {
      case http::field::connection:
        connection = true;
        [[fallthrough]];
      case http::field::keep_alive:
      case http::field::proxy_connection:
      case http::field::te:
      case http::field::trailer:
      case http::field::transfer_encoding:
      case http::field::upgrade:
        any = true;
        break;
      default:
        break;
    }
  }
  if (!any) return;
  // The fields Connection names ("Connection: close, X-Secret").
  std::vector<std::string> named;
  if (connection) {
    const auto range = fields.equal_range(http::field::connection);
    for (auto it = range.first; it != range.second; ++it) {
      const std::string_view v = it->value();
      size_t i = 0;
      while (i < v.size()) {
        size_t j = v.find(',', i);
        if (j == std::string_view::npos) j = v.size();
        std::string_view token = v.substr(i, j - i);
        while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) {
          token.remove_prefix(1);
        }
        while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) {
          token.remove_suffix(1);
        }
        if (!token.empty()) named.emplace_back(token);
        i = j + 1;
      }
    }
  }
  for (const std::string& n : named) fields.erase(n);
  for (const http::field f : {http::field::connection, http::field::keep_alive,
                              http::field::proxy_connection, http::field::te, http::field::trailer,
                              http::field::transfer_encoding, http::field::upgrade}) {
    fields.erase(f);
  }
}

void PrepareUpstreamRequest(http::request<http::string_body>& req, std::string target,
                            std::string_view client_ip) {
  const bool had_length = req.has_content_length() || req.chunked();
  RemoveHopByHop(req.base());
  req.erase(http::field::expect);  // the whole body is here: no 100 Continue to wait for
  req.target(target);
  req.version(11);
  // X-Forwarded-For: the chain the client sent, then the client.
  std::string xff;
  const auto range = req.equal_range("X-Forwarded-For");
  for (auto it = range.first; it != range.second; ++it) {
    if (!xff.empty()) xff += ", ";
    xff += std::string(it->value());
  }
  if (!xff.empty()) xff += ", ";
  xff += client_ip;
  req.set("X-Forwarded-For", xff);
  const auto host = req.find(http::field::host);
  if (host != req.end()) {
    req.set("X-Forwarded-Host", host->value());
  } else {
    req.erase("X-Forwarded-Host");
  }
  req.set("X-Forwarded-Proto", "http");
  if (!req.body().empty() || had_length) {
    req.content_length(req.body().size());
  } else {
    req.erase(http::field::content_length);
  }
}

void PrepareClientResponseHeader(http::response_header<>& header, unsigned client_version,
                                 std::string_view revision, std::string_view replica) {
  RemoveHopByHop(header);
  header.version(client_version);
  header.set("X-Arbiter-Revision", revision);
  header.set("X-Arbiter-Replica", replica);
}

}  // namespace arbiter::gateway
