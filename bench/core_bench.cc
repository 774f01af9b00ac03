// Micro benchmarks of the scheduling core (Google Benchmark). The end-to-end figures come from
// `arbiter bench`; these isolate the pieces: one cycle, quota checks, node fragmentation.
#include <benchmark/benchmark.h>

#include "bench/synthetic.h"
#include "core/cycle/cycle.h"

namespace {

using arbiter::bench::MakeSyntheticWorld;
using arbiter::bench::SyntheticSpec;

void BM_Cycle(benchmark::State& state, const char* policy) {
  SyntheticSpec spec;
  spec.nodes = static_cast<int>(state.range(0));
  spec.jobs = static_cast<int>(state.range(1));
  spec.queues = 20;
  auto world = MakeSyntheticWorld(spec);
  auto profile = arbiter::core::Profile::Build(*arbiter::core::Profile::Named(policy));
  arbiter::core::CycleInput in;
  in.cluster = &world->cluster;
  in.tree = &world->tree;
  in.pending = &world->pending;
  for (auto _ : state) {
    auto r = arbiter::core::RunCycle(in, *profile);
    benchmark::DoNotOptimize(r.admissions.data());
  }
  state.SetItemsProcessed(state.iterations() * spec.jobs);
}

void BM_QuotaCheck(benchmark::State& state) {
  SyntheticSpec spec;
  spec.queues = 100;
  spec.jobs = 0;
  auto world = MakeSyntheticWorld(spec);
  arbiter::core::QuotaState q(world->tree, world->cluster.capacity());
  arbiter::core::QuotaVec r;
  r[arbiter::core::kDimGpu] = 8000;
  const arbiter::QueueId leaf(static_cast<uint32_t>(world->tree.size() - 1));
  for (auto _ : state) benchmark::DoNotOptimize(q.Check(leaf, r));
}

BENCHMARK_CAPTURE(BM_Cycle, binpack, "binpack")->Args({1000, 20000})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Cycle, fgd, "fgd")->Args({1000, 20000})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Cycle, default, "default")->Args({1000, 20000})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Cycle, topology, "topology")
    ->Args({1000, 20000})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QuotaCheck);

}  // namespace

BENCHMARK_MAIN();
