"""Plots a reader can tell apart: each family a hue, each strategy of it a shade and a marker of its own, the same
in every plot; no two strategies drawn alike (eleven strategies once shared a ten-colour cycle, and single and
allreduce were the same blue)."""

from matplotlib.colors import rgb_to_hsv, to_rgb

from bench.analysis.report.plots import _style
from strategies import registry

NO_TENSORFLOW = True


def hue(colour: str) -> float:
    return float(rgb_to_hsv(to_rgb(colour))[0])


def apart(a: float, b: float) -> float:
    """Two hues' distance on the colour circle (0-0.5)."""
    return min(abs(a - b), 1 - abs(a - b))


def test_no_two_strategies_are_drawn_alike_and_a_family_shares_its_hue():
    names = sorted(registry.all_strategies())
    styles = {name: (_style(name)["color"], _style(name)["marker"]) for name in names}
    assert len({colour for colour, _ in styles.values()}) == len(names)  # told apart by colour alone
    assert len(set(styles.values())) == len(names)
    family = {name: registry.get(name).family for name in names}
    for a in names:
        for b in names:
            distance = apart(hue(styles[a][0]), hue(styles[b][0]))
            assert distance < 0.01 if family[a] == family[b] else distance > 0.15, (a, b, distance)
            if a != b and family[a] == family[b]:
                assert styles[a][1] != styles[b][1]  # and by marker within a family
    assert styles["single"][0] != styles["allreduce"][0]


def test_a_variant_is_drawn_as_its_strategy():
    assert _style("ps-sync R=2") == _style("ps-sync") and _style("ps-sync") != _style("ps-async")
