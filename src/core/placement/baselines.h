// The baseline placement scores the FGD paper compares against (Weng et al., "Beware of
// Fragmentation", USENIX ATC'23, section 6), scored as its public simulator scores them:
//
//   bestfit        least free CPU and GPU left after the task, both normalised by the largest node
//   dotprod        Tetris' alignment score: the smallest dot product of free and requested resources
//   gpupacking     shared GPUs first, then partly used nodes, then the smallest idle node
//   gpuclustering  nodes already running tasks of the same GPU kind (share, 1, 2, ... GPUs) first
//   random         a uniformly random feasible node
//
// The published scores are integers 0..100 and Kubernetes breaks ties between equal best scores at
// random. Each score here is that integer in the high digits (published x kTieBreakStep) plus a draw
// in [0, kTieBreakStep) from the context's seed, the snapshot's version and the node (DecisionDraw),
// so that equal published scores are tied-broken uniformly and reproducibly.
//
// Each plugin is stateless; thread safety is that of the snapshot they read.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/placement/framework.h"

namespace arbiter::core {

// One point of the published 0..100 scale on kMaxScore's scale (100 points plus a tie-break fit).
inline constexpr int64_t kTieBreakStep = kMaxScore / 101;

std::vector<std::string_view> BaselineScoreNames();
// The baseline named `name`, or null.
std::unique_ptr<ScorePlugin> MakeBaselineScore(std::string_view name);

// A draw in [0, bound) for node n in the current decision, a pure function of ctx.seed, the
// snapshot's version and n: equal within one placement decision, fresh after any change.
uint64_t DecisionDraw(const PlacementContext& ctx, NodeId n, uint64_t bound);

}  // namespace arbiter::core
