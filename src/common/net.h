// Options of the sockets Arbiter's HTTP servers listen on.
#pragma once

namespace arbiter {

// SO_REUSEADDR only: a restarted server binds again at once past TIME_WAIT connections, while a
// second process asking for a port in use is refused. (cpp-httplib's default also sets
// SO_REUSEPORT, with which a second server on the same port starts silently and the kernel
// shares the connections between the two.)
void SetListenSocketOptions(int fd);

}  // namespace arbiter
