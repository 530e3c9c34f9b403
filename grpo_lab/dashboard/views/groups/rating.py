"""Rating on the Groups page: a person scores each completion of the shown group (grpo_lab/rundir/labels.py).

Two ways in, one store: a control per completion (thumbs up / down, or 1-5: the run's scale, kept in
`labels/settings.json`), and a text box for the keyboard, where "1 0 1 1" (or "1011") then Enter
rates the whole group and moves on to the next group this person has not rated. The labeler's name is
typed once: kept in the session and in the address (`?labeler=`), so a bookmark or reload keeps it.

While the trainer waits for ratings (the `human` reward, labels/waiting.json), the waiting step is not
in tables/samples yet: `show_waiting` shows its groups from the waiting record, rateable the same way.
"""

from __future__ import annotations

import re
import time

import pandas as pd
import streamlit as st

from grpo_lab.dashboard import pages, parse
from grpo_lab.dashboard.i18n import per_language, t
from grpo_lab.dashboard.markup import md
from grpo_lab.rundir import labels
from grpo_lab.rundir.query import query
from grpo_lab.rundir.reader import RunInfo
from grpo_lab.rundir.status import pid_alive

LABELER_KEY = "rating_labeler"
THUMBS = {1: "👍", 0: "👎"}
SKIP = {"-", ".", "_", "?"}


def parse_scores(text: str, size: int, scale: str) -> list[int | None]:
    """The keyboard line for a group of `size`: one score per completion, "-" (or ".") to skip one;
    separated by spaces or commas, or written together ("1011") when every score is one digit.

    >>> parse_scores("1 0 - 1", 4, "thumbs")
    [1, 0, None, 1]
    >>> parse_scores("5.31", 4, "1-5")
    [5, None, 3, 1]
    """
    parts = [p for p in re.split(r"[\s,;]+", text.strip()) if p]
    if len(parts) == 1 and len(parts[0]) == size > 1:
        parts = list(parts[0])
    if len(parts) != size:
        raise labels.LabelError(f"scores: type {size} scores (one per completion, '-' to skip), got {len(parts)}")
    low, high = labels.SCALES[scale]
    out: list[int | None] = []
    for p in parts:
        if p in SKIP:
            out.append(None)
        elif (score := parse.whole_number(p, low, high)) is not None:
            out.append(score)
        else:
            raise labels.LabelError(f"scores: {p!r} is not on the scale {scale} (whole numbers {low}..{high}, "
                                    "'-' to skip)")
    return out


def parse_order(text: str, size: int) -> list[int]:
    """The ranking line: sample indices best first ("2 0 3 1"; the first few alone rank those).

    >>> parse_order("2, 0 3", 4)
    [2, 0, 3]
    """
    parts = [p for p in re.split(r"[\s,;>]+", text.strip()) if p]
    if len(parts) == 1 and len(parts[0]) > 1 and size <= 10:
        parts = list(parts[0])
    if not all(parse.whole_number(p, 0, size - 1) is not None for p in parts):
        raise labels.LabelError(f"order: sample indices 0..{size - 1}, best first, got {text.strip()!r}")
    order = [int(p) for p in parts]
    if len(set(order)) != len(order):
        raise labels.LabelError(f"order: each sample once, got {text.strip()!r}")
    return order


def labeler() -> str:
    """The name typed once, remembered in the session and the address; '' until typed."""
    if not st.session_state.get(LABELER_KEY):  # also after a language switch, which makes the field anew (empty)
        st.session_state[LABELER_KEY] = str(st.query_params.get("labeler", ""))[:labels.MAX_LABELER]

    def remember() -> None:
        name = st.session_state[LABELER_KEY].strip()
        if name:
            st.query_params["labeler"] = name

    name = st.text_input(t("rating.labeler"), key=LABELER_KEY, max_chars=labels.MAX_LABELER,
                         placeholder=t("rating.labeler_placeholder"), on_change=remember).strip()
    if name and st.query_params.get("labeler") != name:
        st.query_params["labeler"] = name
    return name


def _mine(info: RunInfo, who: str, step: int, group: int) -> dict[int, float]:
    """This person's current scores in the group, by sample index."""
    df = labels.read(info.path)
    df = df[(df["labeler"] == who) & (df["step"] == step) & (df["group"] == group) & df["score"].notna()]
    return {int(i): float(s) for i, s in zip(df["sample_idx"], df["score"])}


def _store(info: RunInfo, who: str, step: int, group: int, sample: int, score: int | None) -> None:
    if score is None:
        labels.undo(info.path, step=step, group=group, sample=sample, labeler=who)
    else:
        labels.add(info.path, step=step, group=group, sample=sample, score=score, labeler=who)


def _on_control(info: RunInfo, who: str, step: int, group: int, sample: int, key: str) -> None:
    try:
        _store(info, who, step, group, sample, st.session_state.get(key))
    except labels.LabelError as exc:
        st.session_state["rating_error"] = str(exc)


def _on_keys(info: RunInfo, who: str, step: int, group: int, size: int, scale: str, key: str,
             after=None) -> None:
    """The keyboard line: rate the whole group, then move on (`after`)."""
    text = st.session_state.get(key, "")
    if not text.strip():
        return
    try:
        scores = parse_scores(text, size, scale)
        for sample, score in enumerate(scores):
            if score is not None:
                labels.add(info.path, step=step, group=group, sample=sample, score=score, labeler=who)
    except labels.LabelError as exc:
        st.session_state["rating_error"] = str(exc)
        return
    st.session_state[key] = ""
    st.session_state["rating_saved"] = (t("rating.saved", n=sum(s is not None for s in scores), step=step, group=group)
                                        + " " + counts_line(info, step, saved=True)).strip()
    if after is not None:
        after()


def _on_order(info: RunInfo, who: str, step: int, group: int, size: int, key: str) -> None:
    """The ranking line: rank 1, 2, ... to the samples named, best first."""
    text = st.session_state.get(key, "")
    if not text.strip():
        return
    try:
        order = parse_order(text, size)
        for place, sample in enumerate(order, 1):
            labels.add(info.path, step=step, group=group, sample=sample, rank=place, labeler=who)
    except labels.LabelError as exc:
        st.session_state["rating_error"] = str(exc)
        return
    st.session_state[key] = ""
    st.session_state["rating_saved"] = (t("rating.ranked", n=len(order), step=step, group=group) + " " + counts_line(
        info, step, saved=True)).strip()


def scale_picker(info: RunInfo) -> str:
    current = labels.settings(info.path)["scale"]
    names = {"thumbs": t("rating.scale.thumbs"), "1-5": t("rating.scale.five")}

    def change() -> None:
        labels.set_scale(info.path, st.session_state[f"rating_scale_{info.name}"])

    st.session_state[f"rating_scale_{info.name}"] = current
    st.segmented_control(t("rating.scale"), list(names), format_func=names.get, key=f"rating_scale_{info.name}",
                         on_change=change, required=True)
    return current


def controls(info: RunInfo, step: int, group: int, texts: list[str], after=None, inputs: bool = True) -> None:
    """Rating controls for one group: `texts` its completions in sample order; `after` runs once the
    keyboard line has rated the group (e.g. go to the next unrated group). inputs False: the name and
    scale widgets are already on the page (the waiting step's panel above): read, not drawn again."""
    for note in ("rating_error", "rating_saved"):
        if inputs and (message := st.session_state.pop(note, None)):
            st.error(md(message)) if note == "rating_error" else st.success(message)  # an error quotes typed text
    who = labeler() if inputs else str(st.session_state.get(LABELER_KEY, "")).strip()
    if not who:  # a name is needed to save, not to read: the completions to rate are shown
        st.caption(t("rating.need_labeler"))
        for i, text in enumerate(texts):
            st.markdown(f"`i={i}` {_snippet(text)}")
        return
    scale = scale_picker(info) if inputs else labels.settings(info.path)["scale"]
    options = list(THUMBS) if scale == "thumbs" else list(range(1, 6))
    mine = _mine(info, who, step, group)
    base = f"rate_{info.name}_{step}_{group}_{who}"
    st.text_input(t("rating.keys", n=len(texts)), key=f"{base}_keys", placeholder=" ".join(["1"] * len(texts)),
                  on_change=_on_keys, args=(info, who, step, group, len(texts), scale, f"{base}_keys", after))
    st.text_input(t("rating.order"), key=f"{base}_order", placeholder=" ".join(map(str, range(len(texts)))),
                  on_change=_on_order, args=(info, who, step, group, len(texts), f"{base}_order"))
    for i, text in enumerate(texts):
        key = f"{base}_{i}_{scale}"
        st.session_state[key] = int(mine[i]) if i in mine and int(mine[i]) in options else None
        left, right = st.columns([3, 2])
        left.markdown(f"`i={i}` {_snippet(text)}")
        right.segmented_control(f"i={i}", options, key=key, label_visibility="collapsed",
                                format_func=THUMBS.get if scale == "thumbs" else str,
                                on_change=_on_control, args=(info, who, step, group, i, key))
    late = _late_mine(info, who, step, group)
    st.caption(t("rating.mine", n=len(mine), of=len(texts)) + (" " + t("rating_late.mine_late", n=late) if late else ""))


def _late_mine(info: RunInfo, who: str, step: int, group: int) -> int:
    """How many of this person's ratings in the group came after the trainer scored the step."""
    df = labels.read(info.path)
    df = df[(df["labeler"] == who) & (df["step"] == step) & (df["group"] == group)]
    return int(labels.late(df, info.path).sum()) if len(df) else 0


def trains_on_ratings(info: RunInfo) -> bool:
    """The run's rewards include `human`: its trainer waits for ratings and trains on them."""
    rewards = (info.config or {}).get("rewards")
    return isinstance(rewards, dict) and "human" in rewards


def counts_line(info: RunInfo, step: int, saved: bool = False) -> str:
    """Whether a rating of `step` given now can still count for its reward, and which step the
    trainer waits on: said before a rating (the rating section) and after it (the saved message)."""
    if not trains_on_ratings(info):  # said once, above the controls; not again in the saved message
        return "" if saved else t("rating_late.not_trained")
    waiting = active_wait(info)
    if waiting is not None and waiting["step"] == step:
        return t("rating_late.counts", step=step)
    closed = labels.closed_steps(info.path).get(step)
    when = time.strftime("%H:%M:%S", time.localtime(closed)) if closed else "?"
    head = t("rating_late.saved_late" if saved else "rating_late.late", step=step, time=when)
    if waiting is not None:
        return head + " " + t("rating_late.waits_on", step=waiting["step"])
    if info.state in ("starting", "running"):
        return head + " " + t("rating_late.not_waiting")
    return head + " " + t("rating_late.ended")


def _snippet(text: str, limit: int = 160) -> str:
    one = " ".join(str(text).split()) or "∅"
    one = one if len(one) <= limit else one[:limit - 1] + "…"
    return md(one)  # run text: never markup (markup.py)


def unrated_groups(info: RunInfo, who: str) -> list[tuple[int, int]]:
    """Every logged (step, group) this person has not rated a completion of, in order."""
    found, _ = query(info.path, "samples", 'SELECT DISTINCT step, "group" FROM {src} ORDER BY 1, 2')
    if found.empty:
        return []
    df = labels.read(info.path)
    done = set(zip(*[df.loc[df["labeler"] == who, c].astype(int) for c in ("step", "group")]))
    return [(int(s), int(g)) for s, g in zip(found["step"], found["group"]) if (int(s), int(g)) not in done]


GOTO_KEY = "groups_goto"  # (step, group) the next unrated group, for whichever picker draws that step


def go_to(step: int, group: int) -> None:
    """Point the Groups page's step finder at (step, group); call from a callback (before its widgets)."""
    st.session_state["groups_mode"] = "step"
    st.session_state["groups_step"] = step
    st.session_state[f"groups_pick_{step}"] = group
    st.session_state[GOTO_KEY] = (step, group)  # the picker of an ordering (sort=kl, ...) has a key of its own


def _next_unrated(info: RunInfo, who: str, current: tuple[int, int]) -> None:
    todo = unrated_groups(info, who)
    later = [g for g in todo if g > current] or todo
    if later:
        go_to(*later[0])
        return
    # nothing logged is left to rate: said after the saved message (which says whether the rating counted),
    # and while the trainer waits, its step's groups are still to rate (not yet logged, at the page's top)
    waiting = active_wait(info)
    done = t("rating_late.waits_on", step=waiting["step"]) if waiting is not None else t("rating.all_done")
    saved = st.session_state.get("rating_saved", "")
    if done not in saved:
        st.session_state["rating_saved"] = f"{saved} {done}".strip()


def show(info: RunInfo, target: tuple[int, int], group: pd.DataFrame) -> None:
    """The rating section under a logged group's responses (the Groups page)."""
    step, number = target
    texts = [str(c) for c in group.sort_values("sample_idx")["completion"]]
    with st.expander(t("rating.heading"), expanded=True):
        st.info(counts_line(info, step), icon="ℹ️")  # before a rating: can it still count, and for which step
        controls(info, step, number, texts, inputs=_waiting_groups(info) is None,
                 after=lambda: _next_unrated(info, st.session_state[LABELER_KEY].strip(), target))
        who = st.session_state.get(LABELER_KEY, "").strip()
        if who:
            st.button(t("rating.next"), key="rating_next", on_click=_next_unrated, args=(info, who, target))
    summary(info)


def summary(info: RunInfo) -> None:
    """Ratings of the whole run: per labeler, and how often two labelers order a pair alike."""
    from grpo_lab.finished_runs.preferences import agreement  # noqa: PLC0415

    df, skipped = labels.read_checked(info.path)
    if df.empty and not skipped:
        return
    with st.expander(t("rating.summary", n=len(df), people=df["labeler"].nunique())):
        skipped_files(skipped)
        if df.empty:
            return
        counts = (df.groupby("labeler").agg(ratings=("sample_idx", "size"), groups=("group", lambda g: len(
            set(zip(df.loc[g.index, "step"], g)))), scored=("score", "count"), ranked=("rank", "count"))
                  .reset_index())
        st.dataframe(counts, hide_index=True)
        agree = agreement(info.path)
        agree = agree[agree["pairs"] > 0]
        if agree.empty:
            st.caption(t("rating.no_agreement"))
        else:
            st.dataframe(agree, hide_index=True, column_config={"agree": st.column_config.NumberColumn(format="%.2f")})


def skipped_files(problems: list[str], limit: int = 5) -> None:
    """How many rating files the reader skipped, and why (one line each: the file and the field)."""
    if not problems:
        return
    lines = "\n".join(f"- {md(p)}" for p in problems[:limit])  # file names and values: run text
    more = "\n- " + t("ui.more_problems", n=len(problems) - limit) if len(problems) > limit else ""
    st.warning(t("ratings_check.skipped", n=len(problems)) + "\n" + lines + more, icon="⚠️")


# --- the trainer waits for ratings -----------------------------------------------------------------


def active_wait(info: RunInfo) -> dict | None:
    """The waiting record while a live trainer waits on it; None otherwise (a dead trainer's stale one)."""
    waiting = labels.waiting(info.path)
    if waiting is None or not pid_alive(waiting.get("pid")) or info.state not in ("starting", "running"):
        return None
    return waiting


def full_groups(info: RunInfo, waiting: dict) -> set[int]:
    """The waiting step's groups whose every completion has a rating (what the `human` reward counts)."""
    df = labels.read(info.path)
    df = df[(df["step"] == waiting["step"]) & df["score"].notna()]
    done = df.groupby("group")["sample_idx"].nunique().to_dict()
    return {g["group"] for g in waiting["groups"] if isinstance(g, dict)
            and done.get(g.get("group"), 0) >= len(g.get("completions") or [None])}


def _wait_line(info: RunInfo, waiting: dict) -> str:
    rated = full_groups(info, waiting)
    deadline = waiting.get("deadline")
    left = max(0, int(deadline - time.time())) if isinstance(deadline, (int, float)) else "?"
    return t("rating.waiting", step=waiting["step"], rated=len(rated), need=waiting.get("min_groups", 1), left=left) + (
        " " + t("rating_late.counts", step=waiting["step"]))


def _waiting_groups(info: RunInfo) -> tuple[int, dict[int, dict]] | None:
    """(step, {group: its waiting record}) while a live trainer waits; None otherwise."""
    waiting = active_wait(info)
    if waiting is None:
        return None
    groups = {g["group"]: g for g in waiting["groups"] if isinstance(g, dict) and isinstance(g.get("group"), int)}
    return (waiting["step"], groups) if groups else None


def waiting_notice(info: RunInfo) -> None:
    """The Live page's notice: the trainer waits for ratings, with a link to the Groups page."""
    waiting = active_wait(info)
    if waiting is None:
        return
    st.warning(_wait_line(info, waiting), icon="⏳")
    st.page_link(pages.path("groups"), label=t("rating.go_rate"), icon=pages.icon("groups"),
                 query_params={"run": info.name})


def show_waiting(info: RunInfo) -> bool:
    """On the Groups page: the waiting step's groups, first unrated one open. True when shown."""
    found = _waiting_groups(info)
    if found is None:
        return False
    step, groups = found
    waiting = labels.waiting(info.path) or {"step": step, "groups": list(groups.values())}
    st.info(_wait_line(info, waiting), icon="⏳")  # calm: the run is fine, it waits for a person
    rated = full_groups(info, waiting)
    first = next((g for g in groups if g not in rated), next(iter(groups)))
    key = per_language(f"rating_wait_pick_{step}")
    if st.session_state.get(key) not in groups:
        st.session_state[key] = first

    def next_group() -> None:
        todo = [g for g in groups if g not in full_groups(info, waiting)]
        if todo:
            st.session_state[key] = todo[0]

    pick = st.selectbox(t("rating.wait_pick", step=step), list(groups), key=key,
                        format_func=lambda g: t("rating.wait_option", group=g, prompt=groups[g].get("prompt_id", ""))
                        + (" ✓" if g in rated else ""))
    chosen = groups[pick]
    st.markdown(t("groups.prompt_inline", text=_snippet(chosen.get("prompt", ""), 400)))
    controls(info, step, pick, [str(c) for c in chosen.get("completions") or []], after=next_group)
    st.divider()
    return True
