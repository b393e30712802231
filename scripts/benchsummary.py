"""Helpers the bench-*-summary.py scripts share: medians over repetitions
with their range, Markdown cells and ratios."""
import statistics


def med(xs):
    """(median, min, max) of the values that are not None, or None."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return statistics.median(xs), min(xs), max(xs)


def fmt(m, unit=""):
    """A Markdown cell: the median and, if the runs differ, their range."""
    if m is None:
        return "-"
    v, lo, hi = m
    if lo == hi:
        return (f"{v:,.0f}" if v >= 100 else f"{v:,.1f}") + unit
    if v >= 100:
        return f"{v:,.0f} ({lo:,.0f}-{hi:,.0f}){unit}"
    return f"{v:,.1f} ({lo:,.1f}-{hi:,.1f}){unit}"


def ratio(a, b):
    """a's median over b's, as 0.00x."""
    if a is None or b is None or b[0] == 0:
        return "-"
    return f"{a[0] / b[0]:.2f}x"
