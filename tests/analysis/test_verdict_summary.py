"""The claim at a glance: each asynchronous run name at plain sync's clients in flight, against plain sync
and against the synchronous name with the lowest mean time at that severity."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from asyncfl.analysis.verdict_summary import draw_verdict_summary, summary_rows
from asyncfl.analysis.verdicts import EQUIVALENT, FASTER, TIED

IN_FLIGHT = {"afl": 5, "afl-m7": 7, "fedbuff": 5, "sync": 5, "sync-deadline": 5, "sync-over40": 7}


def comparison(severity: str, reference: str, other: str, other_time: float, verdict: str) -> dict:
    return dict(target=0.8, severity=severity, metric="time_to_stay", reference=reference, other=other,
                other_time=other_time, difference=-1.0, ci_low=-2.0, ci_high=0.5, verdict=verdict,
                equivalence_margin=3.0)  # fmt: skip


def test_each_name_at_plain_syncs_clients_in_flight_meets_plain_sync_and_the_fastest_synchronous_name():
    """At "mild" the deadline is the fastest synchronous name, at "heavy" over-selection (more in flight:
    still the best answer); AFL at M = 7 has no row (unequal to plain sync); the other metric is not read."""
    rows = []
    for severity, times in (("mild", {"sync": 40.0, "sync-deadline": 30.0, "sync-over40": 35.0}),
                            ("heavy", {"sync": 60.0, "sync-deadline": 50.0, "sync-over40": 45.0})):  # fmt: skip
        for reference in ("afl", "afl-m7", "fedbuff"):
            rows += [comparison(severity, reference, other, time, TIED) for other, time in times.items()]
    rows.append({**comparison("mild", "afl", "sync", 1.0, FASTER), "metric": "time_to_target"})
    picked = summary_rows(pd.DataFrame(rows), 0.8, IN_FLIGHT)
    assert set(picked.reference) == {"afl", "fedbuff"} and len(picked) == 8
    best = picked[picked.against == "best"].groupby("severity").other.first().to_dict()
    assert best == {"mild": "sync-deadline", "heavy": "sync-over40"}
    assert set(picked[picked.against == "plain"].other) == {"sync"} and set(picked.metric) == {"time_to_stay"}


def test_the_figure_draws_a_row_per_name_and_the_band():
    rows = [comparison(s, r, o, t, EQUIVALENT if o == "sync" else TIED) for s in ("mild", "heavy")
            for r in ("afl", "fedbuff") for o, t in (("sync", 40.0), ("sync-deadline", 30.0))]  # fmt: skip
    figure, axes = plt.subplots(1, 2, squeeze=False, layout="constrained")
    try:
        draw_verdict_summary(axes, summary_rows(pd.DataFrame(rows), 0.8, IN_FLIGHT), ["mild", "heavy"], 0.8)
        assert [tick.get_text() for tick in axes[0, 0].get_yticklabels()] == ["AFL", "FedBuff"]
        assert axes[0, 1].get_title() == "heavy: ○ − plain sync, □ − best sync (sync-deadline)"
        band = [
            patch
            for patch in axes[0, 0].patches
            if np.allclose(patch.get_facecolor()[:3], (0.0, 0.392, 0.0), atol=1e-3)
        ]
        assert len(band) == 1
        labels = [text.get_text() for text in figure.legends[0].get_texts()]
        assert labels == ["faster", "slower", "equivalent", "no verdict", "equivalence band ±3 s"]
    finally:
        plt.close(figure)
