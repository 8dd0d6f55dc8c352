"""What sweeper's observing tuner plugin (sweeper/fabric/tuner_observer.c) costs NCCL a call,
on the CPU: a C driver dlopens the plugin as NCCL does, opens a communicator through its v4
entry point and calls getCollInfo with a 7 x 3 cost table, `--calls` times a repeat, timing
each repeat with CLOCK_MONOTONIC; the median over `--repeats` of nanoseconds a call. NCCL
calls it once a collective it enqueues (eagerly, or as a CUDA graph is captured: never in a
graph's replays); where NCCL has a tuner it also looks up the call's buffers' registrations
(enqueue.cc, ncclGetAlgoInfo), which only a GPU run measures: sweeper run --nccl-env
NCCL_TUNER_PLUGIN=none beside the default (docs/TUNING.md).

    python benchmarks/observer_cost.py --calls 1000000 --repeats 9
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

from sweeper.fabric.observer import build

DRIVER = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef int (*init_t)(size_t, size_t, void *, void **);
typedef int (*info_t)(void *, int, size_t, int, float **, int, int, int, int *);
struct tuner { const char *name; init_t init; info_t info; int (*destroy)(void *); };
int main(int argc, char **argv) {
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  struct tuner *t = dlsym(lib, "ncclTunerPlugin_v4");
  long calls = atol(argv[2]);
  void *ctx;
  t->init(2, 1, NULL, &ctx);
  float table[7][3];
  for (int a = 0; a < 7; a++) for (int p = 0; p < 3; p++) table[a][p] = a < 2 ? 10.0f + p : -1.0f;
  int channels = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < calls; i++) t->info(ctx, 4, 8, 1, (float **)table, 7, 3, 0, &channels);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
  printf("%.3f\n", ns / calls);
  t->destroy(ctx);
  return 0;
}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        plugin = build(work / "private")
        (work / "driver.c").write_text(DRIVER)
        driver = work / "driver"
        compile_ = ["cc", "-O2", "-o", str(driver), str(work / "driver.c"), "-ldl"]
        subprocess.run(compile_, check=True)
        ns = [
            float(
                subprocess.run(
                    [str(driver), str(plugin), str(args.calls)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            for _ in range(args.repeats)
        ]
    print(
        f"getCollInfo through sweeper's observer: {statistics.median(ns):.1f} ns a call "
        f"(median of {args.repeats} x {args.calls:,} calls; {min(ns):.1f}-{max(ns):.1f})"
    )


if __name__ == "__main__":
    main()
