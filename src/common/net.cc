#include "common/net.h"

#include <sys/socket.h>

namespace arbiter {

void SetListenSocketOptions(int fd) {
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

}  // namespace arbiter
