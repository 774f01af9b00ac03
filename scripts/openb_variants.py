#!/usr/bin/env python3
"""Resamples an openb pod list into workloads with other mixes of task kinds.

Used to check that a placement policy is not fitted to the published trace files
(docs/simulator.md, "Why it should carry over"). Each output task is drawn with replacement from
the input: CPU-only with probability --cpu, else a GPU task that shares a GPU with probability
--share, asks for several GPUs with probability --multi, or takes one whole GPU; with probability
--spec a GPU task gets a gpu_spec drawn from the specs of --spec-source (else none). Tasks are
renamed; every other column is kept.

  scripts/openb_variants.py --pods openb_pod_list_default.csv --spec-source \\
      openb_pod_list_gpuspec10.csv --cpu 0.25 --seed 1 --out cpu250.csv

The variants in docs/simulator.md (8152 tasks each, from openb_pod_list_default.csv):
  cpu250 --cpu 0.25 --seed 1      cpu020 --cpu 0.02 --seed 2
  share60 --share 0.60 --seed 3   share80 --share 0.80 --seed 4
  multi05 --multi 0.05 --seed 5   spec25 --spec 0.25 --seed 6
  mix --cpu 0.20 --share 0.55 --multi 0.03 --spec 0.15 --seed 7
(the other shares at their defaults, which are the input's: 13.3% CPU-only tasks, 43.6% of GPU
tasks sharing, 1.1% multi-GPU).

--cpu-only-share P builds a variant the way the published cpuNNN files were built (cpu050 is
openb_pod_list_default.csv's GPU tasks, all of them, unchanged, and 375 of its 1,088 CPU-only tasks):
every GPU task of the input is kept and CPU-only tasks are drawn from the input's until they are P
of all tasks (without replacement while there are enough, then each once and the rest with
replacement). --tasks, --cpu, --share, --multi and --spec do not apply.

  scripts/openb_variants.py --pods openb_pod_list_default.csv --cpu-only-share 0.20 --out cpu200.csv
"""
import argparse
import csv
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", required=True, help="openb pod list to draw from (11-column form)")
    ap.add_argument("--spec-source", help="pod list whose non-empty gpu_spec values are drawn")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tasks", type=int, default=8152)
    ap.add_argument("--cpu", type=float, default=0.133)
    ap.add_argument("--share", type=float, default=0.436)
    ap.add_argument("--multi", type=float, default=0.011)
    ap.add_argument("--spec", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cpu-only-share", type=float,
                    help="keep every GPU task; CPU-only tasks drawn until they are this share")
    a = ap.parse_args()

    with open(a.pods, newline="") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0].keys())
    cpu = [r for r in rows if int(r["num_gpu"]) == 0]
    share = [r for r in rows if int(r["num_gpu"]) == 1 and int(r["gpu_milli"]) < 1000]
    one = [r for r in rows if int(r["num_gpu"]) == 1 and int(r["gpu_milli"]) == 1000]
    multi = [r for r in rows if int(r["num_gpu"]) > 1]
    specs = []
    if a.spec_source:
        with open(a.spec_source, newline="") as f:
            specs = [r["gpu_spec"] for r in csv.DictReader(f) if r.get("gpu_spec")]
    if a.spec > 0 and not specs:
        ap.error("--spec needs --spec-source with some gpu_spec values")

    rnd = random.Random(a.seed)
    if a.cpu_only_share is not None:
        if not 0 <= a.cpu_only_share < 1:
            ap.error("--cpu-only-share must be in [0, 1)")
        gpu = [r for r in rows if int(r["num_gpu"]) > 0]
        want = round(len(gpu) * a.cpu_only_share / (1 - a.cpu_only_share))
        if want and not cpu:
            ap.error("--cpu-only-share needs CPU-only tasks in --pods")
        if want <= len(cpu):
            drawn = rnd.sample(cpu, want)
        else:
            drawn = list(cpu) + [rnd.choice(cpu) for _ in range(want - len(cpu))]
        out = [dict(r) for r in gpu + drawn]
        rnd.shuffle(out)
        for i, r in enumerate(out):
            r["name"] = f"variant-pod-{i:05d}"
        write(a.out, header, out)
        return

    out = []
    for i in range(a.tasks):
        if rnd.random() < a.cpu:
            r = dict(rnd.choice(cpu))
        else:
            v = rnd.random()
            if v < a.share:
                r = dict(rnd.choice(share))
            elif v < a.share + a.multi:
                r = dict(rnd.choice(multi))
            else:
                r = dict(rnd.choice(one))
            r["gpu_spec"] = rnd.choice(specs) if rnd.random() < a.spec else ""
        r["name"] = f"variant-pod-{i:05d}"
        out.append(r)
    write(a.out, header, out)


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
