"""Which candidates of a workload to measure next.

A workload's knob space is usually small (a handful of variants): then every candidate
is measured in the first round (exhaustive). When it holds more than the trial budget,
the search runs in rounds, because each round costs a firmware build:

- round 1: the default candidate plus a random sample;
- later rounds: simulated annealing over neighbours (candidates that differ from the
  current point in one knob); the current point moves to a measured neighbour when it is
  faster, or when it is slower with probability exp(-(slowdown) / temperature), the
  temperature falling each round; unmeasured random candidates fill the round when the
  neighbourhood is exhausted;
- it stops at the trial budget, when every candidate is measured, or early after
  `patience` rounds without a new best.

Measurements already in the records count: a rerun picks up where the last one stopped.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .workloads import knobs_id


@dataclass
class Search:
    candidates: list[dict]
    trials: int                                 # candidates to measure at most
    round_size: int = 8
    patience: int = 2
    seed: int = 0
    measured: dict[str, int | None] = field(default_factory=dict)   # knobs id → cycles
    rounds: int = 0
    stale_rounds: int = 0
    _best: int | None = None
    _current: str | None = None
    _temperature: float = 0.1                   # relative slowdown accepted with p = 1/e

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._by_id = {knobs_id(k): k for k in self.candidates}
        self._best = self.best_cycles()

    @property
    def exhaustive(self) -> bool:
        return len(self.candidates) <= self.trials

    def remaining(self) -> int:
        """Candidates this search may still measure."""
        unmeasured = sum(1 for i in self._by_id if i not in self.measured)
        if self.exhaustive:
            return unmeasured
        spent = sum(1 for i in self.measured if i in self._by_id)
        return min(unmeasured, max(0, self.trials - spent))

    @property
    def done(self) -> bool:
        return self.remaining() == 0 or (not self.exhaustive and
                                         self.stale_rounds >= self.patience)

    def best_cycles(self) -> int | None:
        ok = [c for i, c in self.measured.items() if c is not None and i in self._by_id]
        return min(ok) if ok else None

    def best(self) -> dict | None:
        ok = [(c, i) for i, c in self.measured.items() if c is not None and i in self._by_id]
        return self._by_id[min(ok)[1]] if ok else None

    def next_round(self) -> list[dict]:
        """The candidates to measure in the next round (empty when done)."""
        if self.done:
            return []
        unmeasured = [k for i, k in self._by_id.items() if i not in self.measured]
        if self.exhaustive:
            return unmeasured
        size = min(self.round_size, self.remaining())
        if self._current is None and not self.measured:
            picks = [self.candidates[0]]
            rest = unmeasured[1:]
            picks += self._rng.sample(rest, min(size - 1, len(rest)))
            return picks
        self._move()
        picks = [k for k in self._neighbours(self._current) if knobs_id(k) not in self.measured]
        self._rng.shuffle(picks)
        picks = picks[:size]
        others = [k for k in unmeasured if k not in picks]
        picks += self._rng.sample(others, min(size - len(picks), len(others)))
        return picks

    def report(self, knobs: dict, cycles: int | None) -> None:
        """A measurement (None: the candidate failed)."""
        self.measured[knobs_id(knobs)] = cycles

    def end_round(self) -> None:
        best = self.best_cycles()
        improved = best is not None and (self._best is None or best < self._best)
        self.stale_rounds = 0 if improved else self.stale_rounds + 1
        self._best = best
        self.rounds += 1
        self._temperature *= 0.5

    def _move(self) -> None:
        """Annealing step: the current point moves to its best measured neighbour when that
        is faster, or when slower with the Metropolis probability."""
        best = self.best()
        if best is None:
            return
        if self._current is None or self.measured.get(self._current) is None:
            self._current = knobs_id(best)
            return
        here = self.measured[self._current]
        near = [(self.measured[knobs_id(k)], knobs_id(k)) for k in self._neighbours(self._current)
                if self.measured.get(knobs_id(k)) is not None]
        if not near:
            self._current = knobs_id(best)
            return
        cycles, cand = min(near)
        if cycles < here or self._rng.random() < math.exp(
                -(cycles - here) / max(here * self._temperature, 1e-9)):
            self._current = cand

    def _neighbours(self, current: str | None) -> list[dict]:
        if current is None:
            return []
        base = self._by_id[current]
        out = []
        for k in self.candidates:
            keys = set(k) | set(base)
            if sum(1 for name in keys if k.get(name) != base.get(name)) == 1:
                out.append(k)
        return out
