// GoogleTest printers for the core's value types, so that failures read "NodeId(3)" and
// "kBorrow" rather than raw bytes. Found by argument-dependent lookup; test code only.
#pragma once

#include <ostream>
#include <string_view>

#include "common/ids.h"
#include "core/cycle/verdict.h"
#include "core/placement/framework.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"

namespace arbiter {

template <typename Tag, typename Rep>
void PrintTo(const StrongId<Tag, Rep>& id, std::ostream* os) {
  *os << "#" << id.value();
}

}  // namespace arbiter

namespace arbiter::core {

inline std::string_view QuotaFailureKindName(QuotaFailure::Kind k) {
  switch (k) {
    case QuotaFailure::Kind::kNone:
      return "kNone";
    case QuotaFailure::Kind::kMax:
      return "kMax";
    case QuotaFailure::Kind::kBorrow:
      return "kBorrow";
    case QuotaFailure::Kind::kCapacity:
      return "kCapacity";
    case QuotaFailure::Kind::kLendDeadline:
      return "kLendDeadline";
  }
  return "?";
}

inline void PrintTo(QuotaFailure::Kind k, std::ostream* os) { *os << QuotaFailureKindName(k); }
inline void PrintTo(VerdictCode c, std::ostream* os) { *os << VerdictCodeName(c); }
inline void PrintTo(FilterCode c, std::ostream* os) { *os << FilterCodeName(c); }
inline void PrintTo(const GpuShare& g, std::ostream* os) {
  *os << "{slot " << g.slot << ", " << g.milli << " milli, " << g.memory_mib << " MiB}";
}
inline void PrintTo(const TaskPlacement& t, std::ostream* os) {
  *os << "{node #" << t.node.value() << ", gpus [";
  for (size_t i = 0; i < t.gpus.size(); ++i) {
    *os << (i == 0 ? "" : ", ");
    PrintTo(t.gpus[i], os);
  }
  *os << "], " << t.cpu_milli << " mCPU, " << t.memory_mib << " MiB}";
}

}  // namespace arbiter::core
