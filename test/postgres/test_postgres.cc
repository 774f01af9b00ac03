// arbiter-test-postgres start|stop DIR: the throw-away PostgreSQL server that `make test` shares
// between its test binaries (ctest fixture "postgres"): `start` runs initdb and pg_ctl start in DIR
// (removing what a previous run left there) and leaves the server running; `stop` stops it and
// removes DIR. Tests find it through ARBITER_TEST_POSTGRES=DIR (testing/postgres_cluster.h).
#include <cstdio>
#include <string>

#include "testing/postgres_cluster.h"

int main(int argc, char** argv) {
  using arbiter::testing::PostgresCluster;
  const std::string verb = argc == 3 ? argv[1] : "";
  if (verb != "start" && verb != "stop") {
    std::fprintf(stderr, "usage: arbiter-test-postgres start|stop DIR\n");
    return 2;
  }
  const std::string dir = argv[2];
  PostgresCluster::StopAt(dir);
  if (verb == "stop") return 0;
  std::string error;
  auto cluster = PostgresCluster::Start(&error, dir);
  if (cluster == nullptr) {
    std::fprintf(stderr, "arbiter-test-postgres: %s\n", error.c_str());
    return 1;
  }
  cluster->Detach();
  std::printf("PostgreSQL on 127.0.0.1:%d in %s\n", cluster->port(), dir.c_str());
  return 0;
}
