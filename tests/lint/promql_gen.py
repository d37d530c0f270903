"""Random PromQL from the grammar, typed by what each production returns.

Seeded, so every run checks the same expressions. Most follow the grammar both ends of
the matrix accept; a share uses forms only Prometheus 3 accepts (numbers as durations,
durations as numbers, quoted names), so the agreement test sees false accepts and false
rejects alike. The verdict is always the real promtool's, never this module's.
"""

from __future__ import annotations

import random

METRICS = (
    "up",
    "node_cpu_seconds_total",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "http_requests_total",
    "job:requests:rate5m",
    "anchored",
    "smoothed",
    "offset_total",
)
LABELS = ("job", "instance", "gpu", "code", "le", "mode", "smoothed")
VALUES = ("api", "5..", "gpu-node-\\\\d+", "", ".*", "a|b", "0.5")
DURATIONS = ("5m", "1h", "30s", "1h30m", "2d", "100ms")
OVER_TIME = (
    "avg_over_time",
    "max_over_time",
    "sum_over_time",
    "count_over_time",
    "last_over_time",
    "present_over_time",
    "stddev_over_time",
)
VECTOR_FUNCS = ("abs", "ceil", "floor", "exp", "sqrt", "ln", "sort", "timestamp")
AGGREGATIONS = ("sum", "avg", "min", "max", "count", "group", "stddev")
ARITHMETIC = ("+", "-", "*", "/", "%", "^")
COMPARISONS = ("==", "!=", ">", "<", ">=", "<=")


class Generator:
    def __init__(self, seed: int, newer_share: float = 0.15) -> None:
        self.rng = random.Random(seed)
        self.newer = newer_share

    def pick(self, options: tuple[str, ...]) -> str:
        return self.rng.choice(options)

    def duration(self) -> str:
        if self.rng.random() < self.newer:
            return str(self.rng.choice((30, 300, 3600)))  # a number as a duration: 3.0+
        return self.pick(DURATIONS)

    def label(self) -> str:
        if self.rng.random() < self.newer / 2:
            return '"gpu.id"'  # a quoted UTF-8 name: 3.0+
        return self.pick(LABELS)

    def selector(self) -> str:
        metric = self.pick(METRICS)
        matchers = []
        for _ in range(self.rng.randint(0, 2)):
            op = self.pick(("=", "!=", "=~", "!~"))
            matchers.append(f'{self.label()}{op}"{self.pick(VALUES)}"')
        text = metric + ("{" + ", ".join(matchers) + "}" if matchers else "")
        if self.rng.random() < 0.1:
            text += f" offset {self.duration()}"
        if self.rng.random() < 0.05:
            text += self.pick((" @ 1609746000", " @ start()", " @ end()"))
        return text

    def matrix(self, depth: int) -> str:
        if depth > 0 and self.rng.random() < 0.2:
            step = self.pick(("", "1m", "30s"))
            return f"({self.vector(depth - 1)})[{self.duration()}:{step}]"
        return f"{self.selector()}[{self.duration()}]"

    def scalar(self, depth: int) -> str:
        roll = self.rng.random()
        if roll < 0.5 or depth <= 0:
            if self.rng.random() < self.newer / 2:
                return self.pick(DURATIONS)  # a duration as a number: 3.0+
            return self.pick(("0.5", "1", "100", "1e3", "0x10", "-2", "Inf"))
        if roll < 0.7:
            return "time()"
        if roll < 0.85:
            return f"scalar({self.vector(depth - 1)})"
        return f"({self.scalar(depth - 1)} {self.pick(ARITHMETIC)} {self.scalar(depth - 1)})"

    def grouping(self) -> str:
        labels = ", ".join(self.label() for _ in range(self.rng.randint(1, 2)))
        return f"{self.pick(('by', 'without'))} ({labels})"

    def vector(self, depth: int) -> str:
        if depth <= 0:
            return self.selector()
        roll = self.rng.random()
        sub = depth - 1
        if roll < 0.15:
            return self.selector()
        if roll < 0.3:
            return (
                f"{self.pick(('rate', 'irate', 'increase', 'delta', 'deriv'))}({self.matrix(sub)})"
            )
        if roll < 0.4:
            return f"{self.pick(OVER_TIME)}({self.matrix(sub)})"
        if roll < 0.47:
            return f"{self.pick(VECTOR_FUNCS)}({self.vector(sub)})"
        if roll < 0.6:
            agg = self.pick(AGGREGATIONS)
            if self.rng.random() < 0.5:
                return f"{agg} {self.grouping()} ({self.vector(sub)})"
            return f"{agg}({self.vector(sub)}) {self.grouping()}"
        if roll < 0.64:
            param = self.pick(("topk(3, ", "bottomk(1, ", "quantile(0.9, "))
            return f"{param}{self.vector(sub)})"
        if roll < 0.67:
            return f'count_values("{self.pick(LABELS)}", {self.vector(sub)})'
        if roll < 0.7:
            return f'label_replace({self.vector(sub)}, "dst", "$1", "{self.pick(LABELS)}", "(.*)")'
        if roll < 0.73:
            return f"histogram_quantile(0.99, sum by (le) (rate({self.selector()}[5m])))"
        if roll < 0.76:
            return f"predict_linear({self.matrix(sub)}, {self.scalar(sub)})"
        if roll < 0.79:
            return f"clamp({self.vector(sub)}, 0, 100)"
        if roll < 0.82:
            return f"absent({self.selector()})"
        if roll < 0.9:
            op = self.pick(ARITHMETIC + COMPARISONS)
            bool_ = " bool" if op in COMPARISONS and self.rng.random() < 0.3 else ""
            return f"{self.vector(sub)} {op}{bool_} {self.scalar(sub)}"
        op = self.pick(ARITHMETIC + COMPARISONS + ("and", "or", "unless"))
        modifier = ""
        if self.rng.random() < 0.5:
            modifier = f" {self.pick(('on', 'ignoring'))} ({self.label()})"
            if op not in ("and", "or", "unless") and self.rng.random() < 0.4:
                modifier += f" {self.pick(('group_left', 'group_right'))} ({self.label()})"
        return f"({self.vector(sub)}) {op}{modifier} ({self.vector(sub)})"


def expressions(seed: int, count: int) -> list[str]:
    gen = Generator(seed)
    return [gen.vector(gen.rng.randint(1, 4)) for _ in range(count)]
