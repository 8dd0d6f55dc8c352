"""Where sweeper's eager time goes beyond the bare loop's, on one GPU (world size 1): the
process a step runs in, or the step itself.

fidelity.py's ratio is sweeper (its whole harness) over the bare loop (a plain process). This
splits it. The same steps of each operation, bare.py's and sweeper's own (ops/registry.py's
bind, on a stream of the rank's own as the worker runs it), are timed in three processes,
resident on the same GPU: a plain one (as the bare loop), a Ray actor's own, and a plain one
the actor started (no Ray in it), as sweeper's ranks run in processes with no Ray in them
(sweeper/rank/process.py; forked by their node's template, rank/template.py, not the actor):

- process: bare.py's step in the actor over the same step in the plain process, what running
  in a Ray worker's process costs (why the ranks run in a process of their own);
- child: bare.py's step in the actor's child over the plain process, whether that cost
  follows the actor into the processes it starts;
- step: sweeper's step over bare.py's, both in the actor's child, what sweeper's step costs;
- both: sweeper's step in the actor's child over bare.py's in the plain process, fidelity's
  ratio without the harness around the step (preparation, checks, barriers).

Every step is timed the same way (sweeper.rank.timing's CUDA-event timer, blocks of about 10 ms,
the median of three), point by point in turn in the three processes, and a ratio is the
median over repeats of each repeat's paired ratio, as fidelity.py's. Every process's calling
thread runs on the same core and every other thread elsewhere (pinning.py). Writes
actor_cost.txt and actor_cost.json under --out.

    source .whl/gpu-env.sh && python3 benchmarks/actor_cost.py --max-size 64K --repeats 9
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import geometric_mean, median
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from bare import FACTORS, bare_step, free_port, init_bare
from pinning import Pinner, rank_cores

from sweeper.driver.connection import connect
from sweeper.fabric.multicast import MULTICAST_OFF
from sweeper.planning.sizes import format_size, parse_size

Key = tuple[str, int, str]  # operation, size in bytes, step ("bare" or "sweeper")
PROCESSES = ("plain", "actor", "child")
# (step, process) timed: bare.py's step everywhere, sweeper's where sweeper runs it
TIMINGS = (("bare", "plain"), ("bare", "actor"), ("bare", "child"), ("sweeper", "child"))
# each ratio the benchmark prints: one (step, process) timing over another
RATIOS = {
    "process": (("bare", "actor"), ("bare", "plain")),
    "child": (("bare", "child"), ("bare", "plain")),
    "step": (("sweeper", "child"), ("bare", "child")),
    "both": (("sweeper", "child"), ("bare", "plain")),
}
BLOCK_S = 0.01
BLOCKS = 3


class Rank:
    """One GPU's steps and their timing, in whichever process holds it."""

    def __init__(self, port: int) -> None:
        init_bare(0, 1, port)
        self.device = torch.device("cuda", 0)
        self.stream = torch.cuda.Stream(self.device)
        self.steps: dict[Key, Callable[[], None]] = {}

    def gpu_uuid(self) -> str:
        return str(torch.cuda.get_device_properties(self.device).uuid)

    def pid(self) -> int:
        return os.getpid()

    def visible(self) -> str:
        """The GPUs this process sees (in an actor: the one Ray gave it)."""
        return os.environ.get("CUDA_VISIBLE_DEVICES", "")

    def spawn(self, port: int) -> int:
        """A Rank in a plain process of this one's own, on its GPU; the child's pid."""
        self.child = Plain(port, self.visible())
        return self.child.process.pid or 0

    def child_time(self, key: Key, iters: int) -> list[float]:
        return list(self.child.call("time", key, iters))

    def close(self) -> None:
        if hasattr(self, "child"):
            self.child.close()

    def _step(self, key: Key) -> Callable[[], None]:
        from sweeper.ops.descriptor import Buffers
        from sweeper.ops.registry import resolve
        from sweeper.rank.torch_engine import TorchComm

        name, size, kind = key
        (collective,) = resolve([name])
        count = collective.count(size, 2, 1)
        if kind == "bare":
            return bare_step(name, count, torch.bfloat16, 0, 1)
        layout = collective.layout(count, 1, 0)

        def ones(elements: int) -> torch.Tensor:
            return torch.ones(elements, dtype=torch.bfloat16, device=self.device)

        buffers = Buffers(
            ones(layout.send),
            ones(layout.recv) if layout.recv else None,
            ones(layout.work) if layout.work else None,
        )
        world = dist.group.WORLD
        assert world is not None
        return collective.bind(buffers, TorchComm(world, 0, 1))

    def time(self, key: Key, iters: int) -> list[float]:
        """Seconds per iteration in each of BLOCKS blocks of `iters` eager iterations, on the
        stream the step runs on in its own harness: the default one for bare.py's (as the
        bare loop), the rank's own for sweeper's (as the worker)."""
        from sweeper.rank.timing import CudaTimer, Eager

        if key not in self.steps:
            self.steps[key] = self._step(key)
        step = self.steps[key]
        stream = self.stream if key[2] == "sweeper" else torch.cuda.current_stream(self.device)
        timer = CudaTimer(self.device)
        gc.disable()  # as the worker's timed blocks
        try:
            with torch.cuda.stream(stream):
                for _ in range(10):
                    step()
                return [timer.time(Eager(step), iters, False).per_iter for _ in range(BLOCKS)]
        finally:
            gc.enable()


def _serve(port: int, requests: Any, results: Any) -> None:
    """The plain process: a Rank answering calls until it is sent None."""
    rank = Rank(port)
    while (call := requests.get()) is not None:
        method, args = call
        results.put(getattr(rank, method)(*args))


class Plain:
    """A Rank in a plain process of its own (spawned: no Ray, no sweeper harness)."""

    def __init__(self, port: int, visible: str, timeout_s: float = 300.0) -> None:
        context = mp.get_context("spawn")
        self.requests, self.results = context.Queue(), context.Queue()
        self.process = context.Process(
            target=_serve, args=(port, self.requests, self.results), daemon=True
        )
        mine = os.environ.get("CUDA_VISIBLE_DEVICES")
        os.environ["CUDA_VISIBLE_DEVICES"] = visible  # the actor's GPU, as its device 0
        try:
            self.process.start()
        finally:
            if mine is None:
                del os.environ["CUDA_VISIBLE_DEVICES"]
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = mine
        self.timeout_s = timeout_s

    def call(self, method: str, *args: Any) -> Any:
        self.requests.put((method, args))
        return self.results.get(timeout=self.timeout_s)

    def close(self) -> None:
        self.requests.put(None)
        self.process.join(timeout=60)
        if self.process.is_alive():
            self.process.kill()


@dataclass(frozen=True)
class Point:
    """One operation and size: each repeat's median block (seconds per iteration) for each
    timed step and process (TIMINGS)."""

    name: str
    size_bytes: int
    iters: int
    repeats: Mapping[tuple[str, str], Sequence[float]]  # (step, process) -> per repeat

    def ratio(self, name: str) -> float:
        """The median over repeats of one of RATIOS, its two timings paired by repeat."""
        top, bottom = RATIOS[name]
        pairs = zip(self.repeats[top], self.repeats[bottom], strict=True)
        return median(a / b for a, b in pairs)

    def us(self, step: str, process: str) -> float:
        return median(self.repeats[step, process]) * 1e6

    def figures(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "size_bytes": self.size_bytes,
            "iters": self.iters,
            **{f"{s}_{p}_us": self.us(s, p) for s, p in TIMINGS},
            **{name: self.ratio(name) for name in RATIOS},
        }


def table(points: Sequence[Point]) -> list[str]:
    """Per point, then per operation the geometric mean over its sizes."""
    lines = [
        f"{'operation':<26}{'size':>6}{'bare plain':>11}{'bare actor':>11}{'bare child':>11}"
        f"{'sweeper child':>14}" + "".join(f"{ratio:>9}" for ratio in RATIOS)
    ]
    for p in points:
        lines.append(
            f"{p.name:<26}{format_size(p.size_bytes):>6}"
            + "".join(
                f"{p.us(*timing):>{14 if timing[0] == 'sweeper' else 11}.2f}" for timing in TIMINGS
            )
            + "".join(f"{p.ratio(name):>9.3f}" for name in RATIOS)
        )
    lines += [
        "geometric mean over sizes (process = bare actor / bare plain, child = bare child /",
        "bare plain, step = sweeper / bare in the child, both = sweeper child / bare plain):",
    ]
    for name in dict.fromkeys(p.name for p in points):
        mine = [p for p in points if p.name == name]
        means = (geometric_mean(p.ratio(ratio) for p in mine) for ratio in RATIOS)
        lines.append(f"{name:<26}" + "".join(f"{m:>9.3f}" for m in means))
    return lines


def sizes(low: int, high: int, factor: int) -> list[int]:
    return [low * factor**k for k in range(int(math.log(high / low, factor) + 1e-9) + 1)]


def measure(
    plain: Plain, actor: Any, names: Sequence[str], grid: Sequence[int], repeats: int
) -> list[Point]:
    """Every point's steps in the three processes (TIMINGS), point by point, `repeats` times;
    which process goes first rotates, so none always follows another."""
    import ray

    def blocks(process: str, key: Key, n: int) -> list[float]:
        if process == "plain":
            return list(plain.call("time", key, n))
        method = actor.time if process == "actor" else actor.child_time
        return list(ray.get(method.remote(key, n), timeout=300))

    timed: dict[tuple[str, int], dict[tuple[str, str], list[float]]] = {}
    iters: dict[tuple[str, int], int] = {}
    for name in names:
        for size in grid:
            once = median(plain.call("time", (name, size, "bare"), 20))
            iters[name, size] = max(5, min(10_000, math.ceil(BLOCK_S / once)))
            timed[name, size] = {timing: [] for timing in TIMINGS}
    for repeat in range(repeats):
        for i, (point, by) in enumerate(timed.items()):
            first = (repeat + i) % len(PROCESSES)
            for process in PROCESSES[first:] + PROCESSES[:first]:
                for step, where in TIMINGS:
                    if where == process:
                        by[step, where].append(median(blocks(where, (*point, step), iters[point])))
    return [Point(name, size, iters[name, size], by) for (name, size), by in timed.items()]


def main() -> int:
    import ray

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", default=",".join(FACTORS), help="bare.py's operation names")
    parser.add_argument("--min-size", default="8", type=parse_size)
    parser.add_argument("--max-size", default="64K", type=parse_size)
    parser.add_argument("--step-factor", default=8, type=int)
    parser.add_argument("--repeats", default=9, type=int)
    parser.add_argument("--out", default=None, type=Path)
    args = parser.parse_args()
    names = args.ops.split(",")
    if unknown := [name for name in names if name not in FACTORS]:
        parser.error(f"--ops: bare.py has no {', '.join(unknown)}")
    out: Path = args.out or Path(tempfile.mkdtemp(prefix="actor-cost-"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.update(MULTICAST_OFF)  # the plain process inherits it, the actor gets it below
    here = Path(__file__).resolve().parent
    path = [str(here), str(here.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_", "NVSHMEM_"))}
    env["PYTHONPATH"] = os.pathsep.join(path)

    pinner = Pinner(rank_cores(1)).away()
    connect(None, 1)
    # By its module's name, not as __main__'s: the actor then starts its child from an
    # importable function, as multiprocessing's spawn requires.
    import actor_cost

    actor: Any = (
        ray.remote(actor_cost.Rank)
        .options(num_gpus=1, runtime_env={"env_vars": env})
        .remote(free_port())
    )
    plain = Plain(free_port(), ray.get(actor.visible.remote()))
    # the actor is measured too: its main thread makes calls here, where a sweeper rank
    # actor's only relays them
    child = ray.get(actor.spawn.remote(free_port()))
    pinner.watch([plain.process.pid or 0, ray.get(actor.pid.remote()), child])
    clock = time.monotonic()
    try:
        if plain.call("gpu_uuid") != ray.get(actor.gpu_uuid.remote()):
            raise SystemExit("the plain process and the actor see different GPUs")
        grid = sizes(args.min_size, args.max_size, args.step_factor)
        points = measure(plain, actor, names, grid, args.repeats)
    finally:
        ray.get(actor.close.remote())
        plain.close()
        pinner.close()
    pinner.check()
    wall_s = time.monotonic() - clock
    lines = [
        f"actor cost on one GPU, bfloat16, {args.repeats} repeats ({wall_s:.0f} s): us per "
        "eager iteration, median block of the median repeat; ratios: medians of paired ratios",
        *table(points),
    ]
    print("\n".join(lines))
    (out / "actor_cost.txt").write_text("\n".join(lines) + "\n")
    document = {"repeats": args.repeats, "wall_s": wall_s, "points": [p.figures() for p in points]}
    (out / "actor_cost.json").write_text(json.dumps(document, indent=1) + "\n")
    print(f"table and figures: {out}/actor_cost.txt, actor_cost.json")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
