"""PPO vs GRPO: the two pipelines as one diagram (an Altair chart), and the runs' measured figures.

Node text comes in through `labels` so the diagram follows the page's language.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

# role -> fill colour; the legend says which models the optimiser updates
ROLE_COLORS = {"trained": "#f4a259", "frozen": "#8ecae6", "none": "#eeeeee"}

# (id, x, y, label key, role), top to bottom: x in [0, 10], y in [0, 5]. role "absent" is drawn
# dashed and left out of the legend: the value model GRPO does without.
PPO_NODES = (
    ("q", 5.0, 5.0, "prompt", "none"),
    ("policy", 5.0, 4.0, "policy", "trained"),
    ("o", 5.0, 3.0, "one_output", "none"),
    ("reward", 1.6, 2.0, "reward_model", "frozen"),
    ("ref", 5.0, 2.0, "reference", "frozen"),
    ("value", 8.4, 2.0, "value_model", "trained"),
    ("adv", 5.0, 1.0, "gae", "none"),
    ("loss", 5.0, 0.0, "loss_ppo", "none"),
)
PPO_EDGES = (("q", "policy"), ("policy", "o"), ("o", "reward"), ("o", "ref"), ("o", "value"),
             ("reward", "adv"), ("ref", "adv"), ("value", "adv"), ("adv", "loss"))
GRPO_NODES = (
    ("q", 5.0, 5.0, "prompt", "none"),
    ("policy", 5.0, 4.0, "policy", "trained"),
    ("o", 5.0, 3.0, "group_outputs", "none"),
    ("reward", 1.6, 2.0, "reward_or_rule", "frozen"),
    ("ref", 5.0, 2.0, "reference", "frozen"),
    ("novalue", 8.4, 2.0, "no_value", "absent"),
    ("adv", 1.6, 1.0, "group_adv", "none"),
    ("loss", 5.0, 0.0, "loss_grpo", "none"),
)
GRPO_EDGES = (("q", "policy"), ("policy", "o"), ("o", "reward"), ("o", "ref"), ("reward", "adv"),
              ("adv", "loss"), ("ref", "loss"))

X_RANGE, Y_RANGE = (-0.2, 10.2), (-0.45, 5.45)
WIDTH, HEIGHT = 400, 420
BOX_W, BOX_H = 124, 44  # pixels


def _frames(nodes, edges, labels: dict[str, str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    pos = {nid: (x, y) for nid, x, y, *_ in nodes}
    node_df = pd.DataFrame([
        {"id": nid, "x": x, "y": y, "label": labels[key], "role": labels.get(f"role_{role}", role)}
        for nid, x, y, key, role in nodes
    ])
    # shorten each edge so it starts and ends at the box borders, and point an arrowhead along it
    sx, sy = WIDTH / (X_RANGE[1] - X_RANGE[0]), HEIGHT / (Y_RANGE[1] - Y_RANGE[0])
    rows = []
    for a, b in edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        dx, dy = (x2 - x1) * sx, (y2 - y1) * sy  # in pixels, y up
        length = math.hypot(dx, dy)
        ux, uy = dx / length, dy / length
        # distance from a box centre to its border along (ux, uy)
        cut = min(BOX_W / 2 / abs(ux) if ux else math.inf, BOX_H / 2 / abs(uy) if uy else math.inf) + 4
        rows.append({
            "x": x1 + ux * cut / sx, "y": y1 + uy * cut / sy,
            "x2": x2 - ux * cut / sx, "y2": y2 - uy * cut / sy,
            "angle": 90 - math.degrees(math.atan2(uy, ux)),  # vega: 0 = up, clockwise
        })
    return node_df, pd.DataFrame(rows)


def _panel(nodes, edges, labels: dict[str, str], title: str) -> alt.LayerChart:
    node_df, edge_df = _frames(nodes, edges, labels)
    x = alt.X("x:Q", scale=alt.Scale(domain=list(X_RANGE)), axis=None)
    y = alt.Y("y:Q", scale=alt.Scale(domain=list(Y_RANGE)), axis=None)
    roles = [labels["role_trained"], labels["role_frozen"], labels["role_none"]]
    color = alt.Color("role:N", title=None, legend=alt.Legend(orient="bottom"),
                      scale=alt.Scale(domain=roles, range=[ROLE_COLORS[k] for k in ("trained", "frozen", "none")]))
    lines = alt.Chart(edge_df).mark_rule(color="#555", strokeWidth=1.5).encode(x=x, y=y, x2="x2:Q", y2="y2:Q")
    heads = alt.Chart(edge_df).mark_point(shape="triangle-up", filled=True, size=60, color="#555", opacity=1).encode(
        x=alt.X("x2:Q", scale=alt.Scale(domain=list(X_RANGE)), axis=None),
        y=alt.Y("y2:Q", scale=alt.Scale(domain=list(Y_RANGE)), axis=None),
        angle=alt.Angle("angle:Q", scale=None))
    present, absent = node_df[node_df["role"] != "absent"], node_df[node_df["role"] == "absent"]
    rects = alt.Chart(present).mark_rect(width=BOX_W, height=BOX_H, stroke="#444", strokeWidth=1,
                                         cornerRadius=6).encode(x=x, y=y, color=color, tooltip=["label:N", "role:N"])
    ghosts = alt.Chart(absent).mark_rect(width=BOX_W, height=BOX_H, stroke="#999", strokeDash=[4, 3], fill="white",
                                         cornerRadius=6).encode(x=x, y=y)
    text = alt.Chart(present).mark_text(fontSize=12, lineBreak="\n", color="#111").encode(x=x, y=y, text="label:N")
    ghost_text = alt.Chart(absent).mark_text(fontSize=12, lineBreak="\n", color="#888", fontStyle="italic").encode(
        x=x, y=y, text="label:N")
    return alt.layer(lines, heads, ghosts, rects, text, ghost_text).properties(width=WIDTH, height=HEIGHT, title=title)


def diagram(labels: dict[str, str]) -> alt.HConcatChart:
    """PPO (left) and GRPO (right). `labels` holds node texts, role names and the two titles."""
    return alt.hconcat(
        _panel(PPO_NODES, PPO_EDGES, labels, labels["ppo_title"]),
        _panel(GRPO_NODES, GRPO_EDGES, labels, labels["grpo_title"]),
    ).configure_view(stroke=None)


FIGURES = ("trained_params", "peak_memory_mb", "samples_per_step", "seconds_per_step")


def figures_chart(rows: pd.DataFrame, names: dict[str, str]) -> alt.Chart:
    """One small bar chart per measured figure, a bar per run, coloured by algorithm.

    `rows` has columns run, algo, and one per FIGURES entry (NaN when not logged).
    """
    long = rows.melt(id_vars=["run", "algo"], value_vars=list(FIGURES), var_name="figure").dropna(subset=["value"])
    long["figure"] = long["figure"].map(names)
    return alt.Chart(long).mark_bar().encode(
        x=alt.X("value:Q", title=None),
        y=alt.Y("run:N", title=None),
        color=alt.Color("algo:N", title=None, scale=alt.Scale(domain=["ppo", "grpo"], range=["#8e6bbf", "#2e9e4f"]),
                        legend=alt.Legend(orient="bottom")),
        facet=alt.Facet("figure:N", columns=2, title=None, sort=[names[f] for f in FIGURES]),
        tooltip=["run:N", "algo:N", "figure:N", alt.Tooltip("value:Q", format=",.2f")],
    ).properties(width=220, height=70).resolve_scale(x="independent")
