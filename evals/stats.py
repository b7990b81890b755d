"""How sure a comparison is: 95 % intervals for a success rate and paired tests between two graphs.

- One run per task: the Wilson score interval on the success count, and the exact McNemar test on the
  discordant tasks (solved by one graph only).
- Several runs per task (`--seeds`, `--repeat`): the runs of one task share its difficulty, so they are not
  independent draws; the interval is a bootstrap over tasks (each task resampled with all its runs) and the
  test a paired sign-flip test over tasks on the per-task difference in successes, computed exactly. With one
  run per task that test *is* the exact McNemar test.

Pure Python (math.comb and a seeded `random.Random`): no scipy, and the same records give the same numbers.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile
ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240611  # fixed: the interval is a function of the records, not of the moment


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion (0..1); (0, 1) when there are no runs."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0 or n successes the bound is exactly 0 or 1; say so rather than 0.99999….
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs under Binomial(only_a + only_b, 1/2)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1)) / 2**n
    return min(1.0, 2 * tail)


def sign_flip_p(differences: Iterable[int]) -> float:
    """Two-sided exact p-value of a paired sign-flip test on integer per-task differences.

    Under "the graphs are interchangeable" each task's difference is as likely to be +d as -d; the null
    distribution of the sum is built exactly by convolution (sums are small integers), no sampling.
    """
    magnitudes = [abs(int(d)) for d in differences if d]
    observed = abs(sum(int(d) for d in differences))
    if not magnitudes:
        return 1.0
    ways: dict[int, int] = {0: 1}
    for m in magnitudes:
        step: dict[int, int] = defaultdict(int)
        for total, count in ways.items():
            step[total + m] += count
            step[total - m] += count
        ways = step
    extreme = sum(count for total, count in ways.items() if abs(total) >= observed)
    return min(1.0, extreme / 2 ** len(magnitudes))


def per_task(records: Iterable[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Task id → (successes, runs) over all its seeds and repeats."""
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for record in records:
        counts[record["task"]][0] += bool(record["success"])
        counts[record["task"]][1] += 1
    # sorted by task id: the bootstrap draws from this order, so records in any order give the same interval
    return {task: (counts[task][0], counts[task][1]) for task in sorted(counts)}


def bootstrap_interval(tasks: list[tuple[int, int]], resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile 95 % interval of the pooled success rate, resampling tasks (with all their runs)."""
    rng = random.Random(seed)
    rates = []
    for _ in range(resamples):
        drawn = rng.choices(tasks, k=len(tasks))
        rates.append(sum(s for s, _ in drawn) / sum(n for _, n in drawn))
    rates.sort()
    return rates[int(0.025 * resamples)], rates[min(resamples - 1, int(0.975 * resamples))]


def success_interval(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The success rate's 95 % interval and how it was computed (wilson, or bootstrap over tasks)."""
    tasks = per_task(records)
    successes = sum(s for s, _ in tasks.values())
    runs = sum(n for _, n in tasks.values())
    rates = {s / n for s, n in tasks.values()}
    if runs == len(tasks) or len(rates) <= 1:
        # One run per task; or every task has the same rate, where a bootstrap collapses to a point and
        # would claim certainty: Wilson over the tasks is the honest width then.
        low, high = wilson_interval(round(successes / runs * len(tasks)) if runs else 0, len(tasks))
        method = "wilson"
    else:
        low, high = bootstrap_interval(list(tasks.values()))
        method = "bootstrap over tasks"
    return {"low": low, "high": high, "method": method}


def mean_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean of per-run amounts and a normal 95 % interval of the mean (±1.96 standard errors; 0 wide for one run)."""
    if len(values) < 2:
        mean = values[0] if values else 0.0
        return mean, mean, mean
    mean = sum(values) / len(values)
    spread = Z95 * math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
    return mean, mean - spread, mean + spread


def holm(p_values: list[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (several pairs are compared at once), in the input order."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def _run_key(record: dict[str, Any]) -> tuple[str, int, int]:
    return record["task"], int(record.get("seed") or 0), int(record.get("repeat") or 0)


def paired_test(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Graph a against graph b on the runs both made (same task, seed and repeat: the same faults)."""
    runs_a = {_run_key(r): bool(r["success"]) for r in a}
    runs_b = {_run_key(r): bool(r["success"]) for r in b}
    shared = sorted(runs_a.keys() & runs_b.keys())
    difference: dict[str, int] = defaultdict(int)
    for key in shared:
        difference[key[0]] += runs_a[key] - runs_b[key]
    tasks = sorted({key[0] for key in shared})
    runs_per_task = len(shared) / len(tasks) if tasks else 0
    only_a = sum(1 for d in difference.values() if d > 0)
    only_b = sum(1 for d in difference.values() if d < 0)
    exact_mcnemar = runs_per_task == 1
    p = mcnemar_exact(only_a, only_b) if exact_mcnemar else sign_flip_p(difference.values())
    rate_a = sum(runs_a[k] for k in shared) / len(shared) if shared else 0.0
    rate_b = sum(runs_b[k] for k in shared) / len(shared) if shared else 0.0
    return {"tasks": len(tasks), "runs": len(shared), "a_better": only_a, "b_better": only_b,
            "rate_a": rate_a, "rate_b": rate_b, "difference": rate_a - rate_b, "p_value": p,
            "test": "exact McNemar" if exact_mcnemar else "paired sign-flip over tasks (exact)"}


def compare_pairs(by_graph: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every pair of graphs (in first-seen order), with Holm-adjusted p-values and a plain verdict."""
    names = list(by_graph)
    pairs = [{"a": a, "b": b, **paired_test(by_graph[a], by_graph[b])}
             for i, a in enumerate(names) for b in names[i + 1:]]
    for pair, adjusted in zip(pairs, holm([p["p_value"] for p in pairs]), strict=True):
        pair["p_holm"] = adjusted
        pair["distinguishable"] = adjusted < ALPHA
        pair["verdict"] = verdict(pair)
    return pairs


def verdict(pair: dict[str, Any]) -> str:
    """One plain sentence: which graph is better, or that the gap is within the noise."""
    if not pair["runs"]:
        return "no shared runs to compare"
    if not pair["distinguishable"]:
        return "not distinguishable from noise"
    better, worse = (pair["a"], pair["b"]) if pair["difference"] > 0 else (pair["b"], pair["a"])
    return f"{better} better than {worse}"


POWER = 0.8


def _at_least(k: int, n: int, p: float) -> float:
    """P[Binomial(n, p) >= k]."""
    return 1.0 - sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k))


def detectable_difference(runs: int, alpha: float = ALPHA, power: float = POWER) -> dict[str, Any]:
    """The smallest difference in success rate the paired test on `runs` paired runs can detect, at best.

    The exact test's smallest p-value comes when every discordant run goes one way: k of them give 2·2^-k, so
    a difference needs k ≥ `needed` (the least k with 2^(1-k) < alpha: 6 at 0.05). So no gap under
    `floor` = needed / runs can be distinguishable, whatever the data. `at_power` is the least gap d at which the
    test finds it with probability `power`, in the same best case (one graph never loses a run the other wins:
    the discordant runs are Binomial(runs, d), and it takes `needed` of them): the least d with
    P[Binomial(runs, d) >= needed] >= power. Discordance both ways, several runs per task and the Holm adjustment
    over several pairs all make the real threshold larger. None when `runs` is under `needed`."""
    needed = next(k for k in range(1, 64) if 2.0 ** (1 - k) < alpha)
    if runs < needed:
        return {"runs": runs, "needed": needed, "floor": None, "at_power": None, "power": power, "alpha": alpha}
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection: the probability grows with d
        middle = (low + high) / 2
        low, high = (middle, high) if _at_least(needed, runs, middle) < power else (low, middle)
    return {"runs": runs, "needed": needed, "floor": needed / runs, "at_power": round(high, 4), "power": power,
            "alpha": alpha}
