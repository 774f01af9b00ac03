// Strong ids: a JobId is not a NodeId, even though both are integers underneath.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace arbiter {

template <typename Tag, typename Rep = uint32_t>
class StrongId {
 public:
  using rep_type = Rep;
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep value) : value_(value) {}
  constexpr Rep value() const { return value_; }
  constexpr auto operator<=>(const StrongId&) const = default;

 private:
  Rep value_ = 0;
};

struct JobIdTag {};
struct NodeIdTag {};
struct QueueIdTag {};
struct GpuModelIdTag {};

// Jobs are numbered by the store; 64 bits so they never wrap.
using JobId = StrongId<JobIdTag, uint64_t>;
// Dense indices into the snapshot's arrays.
using NodeId = StrongId<NodeIdTag, uint32_t>;
using QueueId = StrongId<QueueIdTag, uint32_t>;
using GpuModelId = StrongId<GpuModelIdTag, uint16_t>;

}  // namespace arbiter

template <typename Tag, typename Rep>
struct std::hash<arbiter::StrongId<Tag, Rep>> {
  size_t operator()(const arbiter::StrongId<Tag, Rep>& id) const noexcept {
    return std::hash<Rep>{}(id.value());
  }
};
