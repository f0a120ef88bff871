"""Margin advice you can trust (issue 31, finding 6): never below the largest gap seen plus one, no
advice from thin data, and the gap-length histogram idplan and the coverage page draw."""

from __future__ import annotations

from idcrawl.commands.report import advice_text, histogram_lines
from idcrawl.core.recrawl import advised_margin, margin_advice


def _site_with_gaps(gaps: list[int]) -> list[int]:
    """Found ids 0, ... with the given gap runs between consecutive ones."""
    ids = [0]
    for gap in gaps:
        ids.append(ids[-1] + gap + 1)
    return ids


def test_the_advice_never_cuts_a_gap_already_seen() -> None:
    """Finding 6: 381 neighbours and one 8-id gap (382 gap runs) advised 8 from the geometric fit alone,
    and a run with that margin was cut at the gap; the advice is now at least the largest gap plus one."""
    gaps = [0] * 382
    gaps[200] = 8
    advice = margin_advice(_site_with_gaps(gaps), 10)
    assert (advice.runs, advice.largest, advice.basis) == (382, 8, "fit")
    assert advice.advised is not None and advice.advised >= 9
    assert advised_margin(gaps) < 9  # the fit alone cuts the gap
    text = advice_text(advice)
    assert f"margin {advice.advised} keeps" in text and "382 gap runs, largest 8" in text


def test_gaps_all_one_id_long_advise_two() -> None:
    """Gaps all one id long: the geometric fit (r = 0.5) expects ~95 runs of 2 or more and none is there,
    so it is refuted and the advice is the largest plus one, 2 (a margin of 2 never cuts this site)."""
    advice = margin_advice(_site_with_gaps([1] * 382), None)
    assert (advice.advised, advice.largest, advice.basis) == (2, 1, "largest")
    assert advised_margin([1] * 382) > 2


def test_too_few_gap_runs_give_no_advice_but_say_so() -> None:
    advice = margin_advice(_site_with_gaps([3, 0, 5] * 5), 10)
    assert advice.advised is None and advice.basis == "thin" and advice.largest == 5
    assert advice_text(advice).startswith("too few gap runs to advise (15 gap runs, largest 5; 30 or more needed)")


def test_the_gap_histogram_counts_every_length_and_draws_it() -> None:
    gaps = [0] * 50 + [1] * 5 + [8] + [9, 16, 17] + [1000]
    advice = margin_advice(_site_with_gaps(gaps), None)
    rows = {(low, high): count for low, high, count in advice.histogram}
    assert rows[(0, 0)] == 50 and rows[(1, 1)] == 5 and rows[(2, 2)] == 0 and rows[(8, 8)] == 1
    assert rows[(9, 16)] == 2 and rows[(17, 32)] == 1 and rows[(513, 1024)] == 1
    assert sum(rows.values()) == advice.runs == len(gaps) and advice.largest == 1000
    lines = histogram_lines(advice.histogram)
    assert lines[0].endswith(" 50") and lines[0].count("#") == 40 and lines[2].strip() == "2 |"
    assert lines[-1].strip().startswith("513-1,024 | #") and advice.advised is not None and advice.advised >= 1001
