// Directory sign-in over LDAP (POST /api/v1/login/ldap, docs/identity.md "LDAP"): binds to the
// configured directory as the user, then reads the names of the user's groups. OpenLDAP's client
// library (libldap) does the protocol.
//
// Every call opens its own connection and blocks on the network (bounded by a timeout): call it
// without holding any lock. Thread safety: the functions keep no state; they may run on any number
// of threads at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/config.h"
#include "common/result.h"

namespace arbiter::server {

// `v` as an attribute value inside a DN (RFC 4514 section 2.4): '"', '+', ',', ';', '<', '>', '\\'
// anywhere, '#' or ' ' first, ' ' last, and NUL are escaped ("\\2C" form for NUL, '\\' plus the
// character otherwise), so that a user name can never add a DN component.
std::string EscapeDnValue(std::string_view v);

// `v` as an assertion value inside a search filter (RFC 4515 section 3): '*', '(', ')', '\\' and
// NUL become "\\2a", "\\28", "\\29", "\\5c" and "\\00", so that a value can never change the
// filter's structure.
std::string EscapeFilterValue(std::string_view v);

// `tmpl` with every "{name}" of `values` replaced by its (already escaped) value; other text as it
// is.
std::string ExpandTemplate(std::string_view tmpl,
                           const std::vector<std::pair<std::string, std::string>>& values);

// Whom the directory authenticated.
struct DirectoryUser {
  std::string dn;                   // the DN bound as
  std::vector<std::string> groups;  // the group_attribute values of the user's groups, sorted
};

// The most group values read for one user; more are ignored.
inline constexpr int kMaxDirectoryGroups = 1000;

// Binds to `c.url` as c.user_dn with {user} replaced by `user` (escaped), with `password` (a
// simple bind; StartTLS first when c.start_tls), then, when c.group_base is set, searches the
// subtree under it with c.group_filter ({dn} and {user} escaped) and reads c.group_attribute.
// Every network step is bounded by `timeout_ms`.
// Errors: InvalidArgument (field "password") for an empty password, which LDAP would take for an
// unauthenticated bind that "succeeds"; Unauthenticated "invalid user name or password" whatever
// the directory refused (unknown name or wrong password: one answer for both); Unavailable when
// the directory cannot be reached or StartTLS fails; Internal for other directory errors (a group
// search under a base that does not exist, say).
Result<DirectoryUser> BindDirectoryUser(const api::LdapConfig& c, std::string_view user,
                                        std::string_view password, int64_t timeout_ms);

}  // namespace arbiter::server
