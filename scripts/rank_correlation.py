"""Ranking predictions against measurements for the benchmark scripts (bench_planner.sh,
bench_search.sh): Spearman's rank correlation (Pearson's correlation of the ranks, tied values
sharing their mean rank); the order of the pairs that the measured runs separate; and runs scaled
to the machine's median calibrated speed."""
import json
import statistics


def ranks(values):
    """1-based ranks of `values`, tied values sharing their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return result


def spearman(a, b):
    """Spearman's rank correlation of two equally long sequences; nan when a side is constant."""
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den else float("nan")


def separated_pairs(predicted, runs):
    """The pairs of configurations the measurement tells apart (every run of one faster than
    every run of the other) and how many of them `predicted` orders the same way:
    (agreeing, separated)."""
    agreeing = separated = 0
    for i in range(len(runs)):
        for j in range(len(runs)):
            if i != j and max(runs[i]) < min(runs[j]):
                separated += 1
                agreeing += predicted[i] < predicted[j]
    return agreeing, separated


def calibrated_layer_ms(profile_path):
    """How fast the machine was when `profile_path` (a `trainer calibrate` profile) was
    measured: one layer's forward and backward, ms."""
    profile = json.load(open(profile_path))
    return 1e3 * (profile["layer_forward_s"] + profile["layer_backward_s"])


def at_speed(values, layer_ms, median_layer_ms):
    """The median of a configuration's runs (`values`), each scaled from the speed its profile
    measured (`layer_ms`, per run) to `median_layer_ms`."""
    return statistics.median(x * median_layer_ms / ms for x, ms in zip(values, layer_ms))
