// The shim's output relay on real files: each stream's file byte for byte, the combined log line
// by line in the order the lines were completed.
#include "exec/log_pump.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "testing/temp_dir.h"

namespace arbiter::exec {
namespace {

class LogPumpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"out", "err", "log"}) {
      fds_.push_back(::open(dir_.File(name).c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600));
      ASSERT_GE(fds_.back(), 0);
    }
  }
  void TearDown() override {
    for (int fd : fds_) ::close(fd);
  }

  std::string Read(const char* name) const {
    std::ifstream f(dir_.File(name), std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  testing::TempDir dir_{"log-pump-test"};
  std::vector<int> fds_;
  LogPump Pump() const { return LogPump(fds_[0], fds_[1], fds_[2]); }
};

TEST_F(LogPumpTest, InterleavedLinesKeepTheirOrder) {
  LogPump p = Pump();
  p.Add(LogPump::kStdout, "out1\n", 0);
  p.Add(LogPump::kStderr, "err1\n", 1);
  p.Add(LogPump::kStdout, "out2\nout3\n", 2);
  EXPECT_EQ(Read("log"), "out1\nerr1\nout2\nout3\n");
  EXPECT_EQ(Read("out"), "out1\nout2\nout3\n");
  EXPECT_EQ(Read("err"), "err1\n");
  EXPECT_EQ(p.next_flush_ms(), -1);
}

// A stream's unfinished line waits in the combined log, so that the other stream's lines never
// cut it; its own file has it at once.
TEST_F(LogPumpTest, AnUnfinishedLineWaitsForItsEnd) {
  LogPump p = Pump();
  p.Add(LogPump::kStdout, "loading", 0);
  EXPECT_EQ(Read("out"), "loading");
  EXPECT_EQ(p.next_flush_ms(), LogPump::kMaxHoldMs);
  p.Add(LogPump::kStderr, "warning\n", 10);
  p.Add(LogPump::kStdout, "... done\nnext", 20);
  EXPECT_EQ(Read("log"), "warning\nloading... done\n");
  p.End(LogPump::kStdout);  // the stream ended without a newline: its last line is written
  EXPECT_EQ(Read("log"), "warning\nloading... done\nnext");
  EXPECT_EQ(Read("out"), "loading... done\nnext");
}

// A line held too long (a progress bar, a prompt) or grown too big (binary output) is written
// without its end.
TEST_F(LogPumpTest, HeldLinesAreBoundedInTimeAndSize) {
  LogPump p = Pump();
  p.Add(LogPump::kStderr, "\r 10%", 100);
  p.Flush(100 + LogPump::kMaxHoldMs - 1);
  EXPECT_EQ(Read("log"), "");
  p.Flush(100 + LogPump::kMaxHoldMs);
  EXPECT_EQ(Read("log"), "\r 10%");
  EXPECT_EQ(p.next_flush_ms(), -1);
  std::string blob(LogPump::kMaxHeldBytes, '\0');
  blob[7] = '\x7f';
  p.Add(LogPump::kStdout, blob, 200);
  EXPECT_EQ(Read("log"), "\r 10%" + blob);
  EXPECT_EQ(Read("out"), blob);
  EXPECT_EQ(p.lost_bytes(), 0u);
}

// A write that fails (here: a closed file) loses its bytes, counted, and nothing else.
TEST_F(LogPumpTest, FailedWritesAreCounted) {
  LogPump p(fds_[0], -1, 12345);
  p.Add(LogPump::kStdout, "abc\n", 0);
  EXPECT_EQ(Read("out"), "abc\n");
  EXPECT_EQ(p.lost_bytes(), 4u);
  EXPECT_NE(p.first_error(), 0);
}

}  // namespace
}  // namespace arbiter::exec
