// The baseline placement scores the FGD paper compares against (Weng et al., "Beware of
// Fragmentation", USENIX ATC'23, section 6), scored as its public simulator scores them:
//
//   bestfit        least free CPU and GPU left after the task, both normalised by the largest node
//   dotprod        Tetris' alignment score: the smallest dot product of free and requested
//   resources gpupacking     shared GPUs first, then partly used nodes, then the smallest idle node
//   gpuclustering  nodes already running tasks of the same GPU kind (share, 1, 2, ... GPUs) first
//   random         a uniformly random feasible node
//
// The published scores are integers 0..100; each score here is that integer times kPublishedPoint
// (so 100 is kMaxScore), and equal scores go to the lower node id (the framework's rule). The
// integer resolution matters: near-equal nodes tie, which is how the published numbers arise
// (docs/simulator.md).
//
// Each plugin is stateless; thread safety is that of the snapshot they read.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/placement/framework.h"

namespace arbiter::core {

// One point of the published simulator's 0..100 score scale on kMaxScore's scale.
inline constexpr int64_t kPublishedPoint = kMaxScore / 100;

std::vector<std::string_view> BaselineScoreNames();
// The baseline named `name`, or null.
std::unique_ptr<ScorePlugin> MakeBaselineScore(std::string_view name);

// A draw in [0, bound) for node n in the current decision, a pure function of ctx.seed, the
// snapshot's version and n: equal within one placement decision, fresh after any change.
uint64_t DecisionDraw(const PlacementContext& ctx, NodeId n, uint64_t bound);

}  // namespace arbiter::core
