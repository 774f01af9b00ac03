#include "exec/device_filter.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace arbiter::exec {

namespace {

bpf_insn Insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.src_reg = src & 0xf;
  i.off = off;
  i.imm = imm;
  return i;
}

// The program, over struct bpf_cgroup_dev_ctx {u32 access_type; u32 major; u32 minor;} where
// access_type = (access << 16) | type (BPF_DEVCG_DEV_CHAR = 2):
//   r2 = type; r3 = major; r4 = minor
//   for each denied device: if (r2 == CHAR && r3 == major && r4 == minor) return 0
//   return 1
std::vector<bpf_insn> Program(const std::vector<DeviceNumber>& deny) {
  std::vector<bpf_insn> p;
  p.push_back(Insn(BPF_LDX | BPF_W | BPF_MEM, 2, 1, 0, 0));
  p.push_back(Insn(BPF_ALU | BPF_AND | BPF_K, 2, 0, 0, 0xffff));
  p.push_back(Insn(BPF_LDX | BPF_W | BPF_MEM, 3, 1, 4, 0));
  p.push_back(Insn(BPF_LDX | BPF_W | BPF_MEM, 4, 1, 8, 0));
  for (const DeviceNumber& d : deny) {
    p.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, 2, 0, 4, BPF_DEVCG_DEV_CHAR));
    p.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, 3, 0, 3, static_cast<int32_t>(d.major)));
    p.push_back(Insn(BPF_JMP | BPF_JNE | BPF_K, 4, 0, 2, static_cast<int32_t>(d.minor)));
    p.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0));
    p.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  }
  p.push_back(Insn(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 1));
  p.push_back(Insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
  return p;
}

long Bpf(int cmd, bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof(*attr)); }

}  // namespace

bool AttachDeviceDenyList(const std::string& dir, const std::vector<DeviceNumber>& deny,
                          std::string* error) {
  for (const DeviceNumber& d : deny) {
    if (d.major > 0x7fffffff || d.minor > 0x7fffffff) {
      *error = "device number out of range";
      return false;
    }
  }
  const std::vector<bpf_insn> insns = Program(deny);
  static const char kLicense[] = "Apache-2.0";
  char log[4096] = {0};
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uint64_t>(insns.data());
  load.insn_cnt = static_cast<uint32_t>(insns.size());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  load.log_buf = reinterpret_cast<uint64_t>(log);
  load.log_size = sizeof(log);
  load.log_level = 1;
  const int prog = static_cast<int>(Bpf(BPF_PROG_LOAD, &load));
  if (prog < 0) {
    *error = std::string("cannot load the device program: ") + std::strerror(errno) +
             (log[0] != 0 ? std::string(" (") + log + ")" : "");
    return false;
  }
  const int group = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (group < 0) {
    *error = "cannot open " + dir + ": " + std::strerror(errno);
    ::close(prog);
    return false;
  }
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(group);
  attach.attach_bpf_fd = static_cast<uint32_t>(prog);
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  const bool ok = Bpf(BPF_PROG_ATTACH, &attach) == 0;
  if (!ok) *error = std::string("cannot attach the device program: ") + std::strerror(errno);
  ::close(group);
  ::close(prog);  // the attachment keeps the program while the group exists
  return ok;
}

}  // namespace arbiter::exec
