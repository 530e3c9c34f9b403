"""English and Chinese text of the concept pages, and the sidebar language switch.

`t("group.title")` returns the text in the chosen language; the choice lives in
st.session_state["lang"] ("en" or "zh") and defaults to English when `language_switch()` was never
called (a page run on its own, as in tests). Placeholders use str.format: t("x", n=3).
"""

from __future__ import annotations

import streamlit as st

LANGUAGES = {"en": "English", "zh": "中文"}
STATE_KEY = "lang"
_WIDGET_KEY = "lang_switch"


def lang() -> str:
    value = st.session_state.get(STATE_KEY, "en")
    return value if value in LANGUAGES else "en"


def t(key: str, **values: object) -> str:
    """The text of `key` in the current language (English when the Chinese is missing)."""
    en, zh = TEXT[key]
    text = zh if lang() == "zh" and zh else en
    return text.format(**values) if values else text


def language_switch() -> str:
    """A language selector in the sidebar; returns the chosen code. Call once per run, in app.py."""
    def _store() -> None:
        st.session_state[STATE_KEY] = st.session_state[_WIDGET_KEY]

    codes = list(LANGUAGES)
    st.sidebar.radio("Language / 语言", codes, index=codes.index(lang()), format_func=LANGUAGES.__getitem__,
                     key=_WIDGET_KEY, horizontal=True, on_change=_store)
    return lang()


# key -> (English, Chinese)
TEXT: dict[str, tuple[str, str]] = {
    # --- shared -------------------------------------------------------------------------------
    "common.source": ("Numbers from", "数据来源"),
    "common.source_demo": ("the sliders", "滑块"),
    "common.source_run": ("a training run", "一次训练运行"),
    "common.formula": ("Formula", "公式"),
    "common.yes": ("yes", "是"),
    "common.no": ("no", "否"),
    "run.none": (
        "No runs in `{root}` yet. Train one, e.g. `python -m trainer --name demo --max-steps 20` "
        "(runs go to $GRPO_LAB_RUNS_DIR, else ./runs).",
        "`{root}` 中还没有训练运行。可以先训练一个，例如 `python -m trainer --name demo --max-steps 20`"
        "（运行目录为 $GRPO_LAB_RUNS_DIR，未设置时为 ./runs）。",
    ),
    "run.pick": ("Run", "训练运行"),
    "run.step": ("Step", "步数"),
    "run.group": ("Group (prompt)", "组（提示词）"),
    "run.token": ("Token", "词元"),
    "run.no_samples": (
        "This run has no sampled completions logged yet (tables/samples is empty: no step has finished, "
        "or it logs only scalars).",
        "这个运行还没有记录采样结果（tables/samples 为空：尚无完成的步，或只记录了标量）。",
    ),
    "run.no_tokens": (
        "This run has no per-token table yet (tables/tokens is empty: token_detail_groups is 0, logging is "
        "not 'full', or no step has finished).",
        "这个运行还没有逐词元的记录（tables/tokens 为空：token_detail_groups 为 0、logging 不是 full，或尚无完成的步）。",
    ),
    "run.unreadable": ("Some files of this run could not be read: {detail}",
                       "这个运行的部分文件无法读取：{detail}"),
    "run.config": ("Run config: std_mode = `{std_mode}`, ε = {eps}, ε_high = {eps_high}, G = {G}.",
                   "运行配置：std_mode = `{std_mode}`，ε = {eps}，ε_high = {eps_high}，G = {G}。"),

    # --- PPO vs GRPO --------------------------------------------------------------------------
    "ppo.title": ("PPO vs GRPO", "PPO 与 GRPO"),
    "ppo.intro": (
        "Both algorithms sample responses from the policy, score them, and push the policy towards the "
        "better ones with the same clipped objective. They differ in **where the advantage comes from**: "
        "PPO trains a value model and runs GAE over the tokens; GRPO samples a **group of G responses** "
        "per prompt and compares each reward with the group's mean and std. The value model — usually as "
        "large as the policy — disappears.",
        "两种算法都从策略模型采样回答、为回答打分，再用同一个裁剪目标把策略推向更好的回答。区别在于"
        "**优势从哪里来**：PPO 训练一个价值模型，并在词元上做 GAE；GRPO 为每个提示词采样**一组 G 个回答**，"
        "用每个奖励与组内均值、标准差的比较作为优势。价值模型（通常和策略模型一样大）就不需要了。",
    ),
    "ppo.diagram_caption": (
        "Orange: updated by the optimiser. Blue: frozen (loaded, never updated). Grey: computed, no weights. "
        "Dashed: the value model GRPO does without.",
        "橙色：由优化器更新；蓝色：冻结（加载但从不更新）；灰色：只做计算，没有权重；虚线：GRPO 省掉的价值模型。",
    ),
    "ppo.node.prompt": ("prompt q", "提示词 q"),
    "ppo.node.policy": ("policy π_θ", "策略模型 π_θ"),
    "ppo.node.one_output": ("response o", "回答 o"),
    "ppo.node.group_outputs": ("G responses\no_1 … o_G", "G 个回答\no_1 … o_G"),
    "ppo.node.reward_model": ("reward model", "奖励模型"),
    "ppo.node.reward_or_rule": ("reward model\nor rule check", "奖励模型\n或规则校验"),
    "ppo.node.reference": ("reference π_ref", "参考模型 π_ref"),
    "ppo.node.value_model": ("value model V", "价值模型 V"),
    "ppo.node.gae": ("GAE: A_t per token\n(KL folded into r)", "GAE：逐词元 A_t\n（KL 计入奖励）"),
    "ppo.node.group_adv": ("A_i =\n(r_i − mean) / std", "A_i =\n(r_i − 均值) / std"),
    "ppo.node.no_value": ("no value model", "没有价值模型"),
    "ppo.node.loss_ppo": ("clipped objective\n(+ value loss)", "裁剪目标\n（+ 价值损失）"),
    "ppo.node.loss_grpo": ("clipped objective\n− β·KL", "裁剪目标\n− β·KL"),
    "ppo.role.trained": ("trained", "训练"),
    "ppo.role.frozen": ("frozen", "冻结"),
    "ppo.role.none": ("no weights", "无权重"),
    "ppo.models_title": ("Which models train, which are frozen", "哪些模型训练，哪些冻结"),
    "ppo.col.model": ("model", "模型"),
    "ppo.row.policy": ("policy π_θ", "策略模型 π_θ"),
    "ppo.row.reward": ("reward", "奖励"),
    "ppo.row.value": ("value model V", "价值模型 V"),
    "ppo.row.reference": ("reference π_ref", "参考模型 π_ref"),
    "ppo.cell.trained": ("trained", "训练"),
    "ppo.cell.reward_ppo": ("frozen reward model (trained beforehand on preferences)",
                            "冻结的奖励模型（事先用偏好数据训练）"),
    "ppo.cell.reward_grpo": ("frozen reward model, or a rule check (no model at all)",
                             "冻结的奖励模型，或规则校验（完全不需要模型）"),
    "ppo.cell.value_ppo": ("trained, usually as large as the policy", "训练，通常与策略模型一样大"),
    "ppo.cell.value_grpo": ("none: the group of G responses takes its place", "没有：由 G 个回答组成的组代替它"),
    "ppo.cell.reference": ("frozen (the policy before RL)", "冻结（强化学习开始前的策略）"),
    "ppo.cell.reference_grpo": ("frozen (the policy before RL; not loaded when β = 0)",
                                "冻结（强化学习开始前的策略；β = 0 时不加载）"),
    "ppo.misconceptions": ("Three common misconceptions", "三个常见误解"),
    "ppo.m1.title": ("“GRPO needs no reward.”", "“GRPO 不需要奖励。”"),
    "ppo.m1.body": (
        "It needs a reward for every response: the group only replaces the *value model*. The reward can be "
        "a trained reward model or a rule (the answer is correct, the format matches, the tests pass); "
        "without it there is nothing to compare inside the group.",
        "它需要给每个回答打分：组只是代替了*价值模型*。奖励可以来自训练好的奖励模型，也可以来自规则"
        "（答案正确、格式符合、测试通过）；没有奖励，组内就无从比较。",
    ),
    "ppo.m2.title": ("“GRPO is not really reinforcement learning.”", "“GRPO 不算真正的强化学习。”"),
    "ppo.m2.body": (
        "It is RL, and a policy-gradient method like PPO: it samples from its own policy, is scored by a "
        "reward, and raises the log-probability of tokens in proportion to their advantage, with PPO's "
        "ratio and clip. Only the baseline changed: the group mean instead of a learned value.",
        "它就是强化学习，并且和 PPO 一样是策略梯度方法：从自己的策略采样、由奖励打分，按优势提高词元的对数概率，"
        "也沿用 PPO 的比率与裁剪。变的只是基线：用组内均值代替学出来的价值。",
    ),
    "ppo.m3.title": ("“GRPO is free.”", "“GRPO 没有代价。”"),
    "ppo.m3.body": (
        "It saves the value model's memory and training, but pays in sampling: G responses per prompt "
        "(often 8–64), each generated and scored. Generation usually dominates the step time; and a group "
        "whose rewards are all equal gives advantage 0 — those samples teach nothing.",
        "它省下了价值模型的显存和训练，但代价转到了采样上：每个提示词要生成并打分 G 个回答（常见 8–64 个）。"
        "生成通常占据一步的大部分时间；而且奖励全部相同的组优势为 0，这些样本什么也学不到。",
    ),
    "ppo.measured_title": ("Measured in this lab's runs", "本实验室训练运行中的实测"),
    "ppo.measured_intro": (
        "From the runs in `{root}`: trained parameters and peak memory from status.json, samples per step "
        "counted in tables/samples, seconds per step the median of the `time/step_s` metric.",
        "来自 `{root}` 中的运行：训练参数量和峰值内存取自 status.json，每步样本数统计自 tables/samples，"
        "每步秒数为 `time/step_s` 指标的中位数。",
    ),
    "ppo.no_runs": (
        "No runs yet. Train one of each to compare, e.g. `python -m trainer --algo grpo --name g1` and "
        "`python -m trainer --algo ppo --name p1`.",
        "还没有训练运行。各训练一个即可对比，例如 `python -m trainer --algo grpo --name g1` 和 "
        "`python -m trainer --algo ppo --name p1`。",
    ),
    "ppo.missing_algo": ("No {algo} run yet: train one with `python -m trainer --algo {algo_lower}` to compare.",
                         "还没有 {algo} 运行：用 `python -m trainer --algo {algo_lower}` 训练一个即可对比。"),
    "ppo.pick": ("{algo} run", "{algo} 运行"),
    "ppo.fig.run": ("run", "运行"),
    "ppo.fig.algo": ("algorithm", "算法"),
    "ppo.fig.setup": ("model: prompts × responses per step", "模型：每步提示词数 × 回答数"),
    "ppo.fair": (
        "A fair comparison holds the model and the batch (prompts per step, responses per prompt) equal; "
        "the figures also depend on the device and on max_new_tokens.",
        "公平的比较需要相同的模型和批大小（每步提示词数、每个提示词的回答数）；这些数字还取决于设备和 max_new_tokens。",
    ),
    "ppo.fig.trained_params": ("trained parameters", "训练参数量"),
    "ppo.fig.peak_memory_mb": ("peak memory (MB)", "峰值内存 (MB)"),
    "ppo.fig.samples_per_step": ("samples per step", "每步样本数"),
    "ppo.fig.seconds_per_step": ("seconds per step", "每步秒数"),
    "ppo.not_logged": ("not logged by this run: {fields}", "该运行未记录：{fields}"),

    # --- group advantage ----------------------------------------------------------------------
    "group.title": ("Group advantage", "组内优势"),
    "group.intro": (
        "GRPO's advantage needs no value model: sample G responses to one prompt, score each, and compare "
        "each reward with its own group. Better than the group: positive advantage, its tokens become "
        "more likely; worse: negative, less likely.",
        "GRPO 的优势不需要价值模型：对同一个提示词采样 G 个回答，分别打分，再把每个奖励与本组比较。"
        "比组内平均好，优势为正，它的词元概率被提高；比平均差，优势为负，概率被降低。",
    ),
    "group.G": ("Group size G", "组大小 G"),
    "group.reward_i": ("r{i}", "r{i}"),
    "group.rewards_label": ("Rewards of the G responses", "G 个回答的奖励"),
    "group.std_mode": ("Divide by", "除以"),
    "group.std.group": ("group std, 1/G (the chapter)", "组标准差，1/G（本章）"),
    "group.std.sample": ("sample std, 1/(G−1) (TRL, verl)", "样本标准差，1/(G−1)（TRL、verl）"),
    "group.shift": ("Add a constant c to every reward", "所有奖励同时加上常数 c"),
    "group.mean": ("mean", "均值"),
    "group.std": ("std", "标准差"),
    "group.advantages_line": ("A = {values}", "A = {values}"),
    "group.col.response": ("response", "回答"),
    "group.col.reward": ("reward r_i", "奖励 r_i"),
    "group.col.centred": ("r_i − mean", "r_i − 均值"),
    "group.col.advantage": ("A_i", "A_i"),
    "group.col.logged": ("A_i logged by the trainer", "训练器记录的 A_i"),
    "group.chart.reward": ("reward", "奖励"),
    "group.chart.advantage": ("advantage A_i", "优势 A_i"),
    "group.chart.rewards_title": ("Rewards, group mean (dashed), mean ± std (band)", "奖励、组均值（虚线）、均值 ± 标准差（阴影）"),
    "group.chart.advantages_title": ("Advantages: green reinforced, red discouraged", "优势：绿色被强化，红色被抑制"),
    "group.zero_std": (
        "**All rewards in this group are equal: std = 0.** (r_i − mean)/std would be 0/0, so the trainer sets "
        "every A_i to **0**, not NaN. Nothing in the group is better than anything else: the group carries no "
        "learning signal, though it still cost G samples. The metric `groups/frac_zero_std` counts these groups.",
        "**本组所有奖励都相等：标准差 = 0。** (r_i − 均值)/std 会是 0/0，所以训练器把每个 A_i 设为 **0**，而不是 NaN。"
        "组内没有谁比谁更好：这一组没有学习信号，却依然花掉了 G 次采样。指标 `groups/frac_zero_std` 统计这种组的比例。",
    ),
    "group.shift_note": (
        "**Shifting all rewards by a constant changes nothing.** Adding c to every r_i adds c to the mean, so "
        "r_i − mean and the std stay the same, and so do the advantages (try the slider above: the mean "
        "moves, A_i do not). Only differences within the group matter.",
        "**所有奖励同时平移一个常数，优势不变。** 每个 r_i 加上 c，均值也加上 c，于是 r_i − 均值和标准差都不变，"
        "优势也不变（试试上面的滑块：均值在变，A_i 不变）。只有组内的差异才重要。",
    ),
    "group.sample_note": (
        "The sample std divides by G − 1, so it is larger and every A_i is smaller by √((G−1)/G); signs and "
        "order stay the same. The trainer's `std_mode` chooses between them (\"group\", \"sample\", \"none\").",
        "样本标准差除以 G − 1，数值更大，每个 A_i 都按 √((G−1)/G) 缩小；符号和顺序不变。训练器的 `std_mode` "
        "选项决定用哪一种（\"group\"、\"sample\"、\"none\"）。",
    ),
    "group.run_intro": (
        "A group the trainer sampled and scored: its rewards (`reward`) and the advantages it trained on "
        "(`advantage`) from tables/samples. The A_i column is recomputed here with the trainer's "
        "`group_advantages` and the run's `std_mode`; it matches the logged column.",
        "训练器实际采样并打分的一组：奖励（`reward`）和训练时使用的优势（`advantage`）都取自 tables/samples。"
        "A_i 列在这里用训练器的 `group_advantages` 和该运行的 `std_mode` 重新计算，应与记录的一列一致。",
    ),
    "group.run_match": ("Recomputed A_i equal the logged ones (largest difference {diff:.1e}).",
                        "重新计算的 A_i 与记录值一致（最大差 {diff:.1e}）。"),
    "group.run_mismatch": (
        "Recomputed A_i differ from the logged ones by up to {diff:.3g}: the run may use a different "
        "std_mode than its config.json says.",
        "重新计算的 A_i 与记录值最多相差 {diff:.3g}：该运行实际使用的 std_mode 可能与 config.json 不符。",
    ),
    "group.unscored": (
        "{n} response(s) got no reward (null): left out of the mean and std, advantage 0.",
        "有 {n} 个回答没有得到奖励（null）：不计入均值和标准差，优势为 0。",
    ),
    "group.completions": ("Completions of this group", "本组的回答"),

    # --- ratio and clip -----------------------------------------------------------------------
    "clip.title": ("Ratio and clip", "比率与裁剪"),
    "clip.intro": (
        "Each token's update is weighted by how much more likely the policy being trained makes it than the "
        "policy that sampled it: the ratio r = π_θ / π_old. Clipping r to [1 − ε, 1 + ε] inside a min keeps "
        "one batch of samples from moving the policy too far.",
        "每个词元的更新都要乘上一个比率：正在训练的策略相对于采样时的策略，让这个词元变得更可能了多少，"
        "即 r = π_θ / π_old。在 min 里把 r 裁剪到 [1 − ε, 1 + ε]，可以防止一批样本把策略推得太远。",
    ),
    "clip.pi_old": ("π_old(token): probability when it was sampled", "π_old(词元)：采样时的概率"),
    "clip.pi_new": ("π_θ(token): probability under the policy being trained", "π_θ(词元)：正在训练的策略给出的概率"),
    "clip.adv": ("Advantage A", "优势 A"),
    "clip.eps": ("ε (clip range)", "ε（裁剪范围）"),
    "clip.asym": ("Separate upper bound ε_high (clip-higher, as DAPO)", "单独的上界 ε_high（clip-higher，同 DAPO）"),
    "clip.eps_high": ("ε_high", "ε_high"),
    "clip.col.quantity": ("quantity", "量"),
    "clip.col.value": ("value", "值"),
    "clip.row.ratio": ("ratio r = π_θ / π_old", "比率 r = π_θ / π_old"),
    "clip.row.interval": ("clip interval [1 − ε, 1 + ε]", "裁剪区间 [1 − ε, 1 + ε]"),
    "clip.row.clipped_ratio": ("clip(r, 1 − ε, 1 + ε)", "clip(r, 1 − ε, 1 + ε)"),
    "clip.row.rA": ("r · A", "r · A"),
    "clip.row.clipA": ("clip(r) · A", "clip(r) · A"),
    "clip.row.min": ("min(r · A, clip(r) · A): the objective", "min(r · A, clip(r) · A)：目标值"),
    "clip.row.gradient": ("gradient through this token", "该词元的梯度"),
    "clip.grad.flows": ("flows: the min picks r · A", "正常回传：min 取 r · A"),
    "clip.grad.zero": ("zero: clipped, the min picks the constant clip(r) · A",
                       "为零：被裁剪，min 取常数 clip(r) · A"),
    "clip.grad.no_signal": ("zero: A = 0, the token carries no signal", "为零：A = 0，该词元没有学习信号"),
    "clip.zero_adv": (
        "A = 0 (a group whose rewards were all equal, or an unscored response): r · A is 0 whatever the ratio. "
        "The curves show |A| = 1 for reference.",
        "A = 0（奖励全部相同的组，或未打分的回答）：无论比率是多少，r · A 都是 0。曲线按 |A| = 1 画出，仅供参考。",
    ),
    "clip.chart.pos": ("A > 0: the token was better than its group", "A > 0：该词元所在回答优于组内平均"),
    "clip.chart.neg": ("A < 0: the token was worse", "A < 0：该词元所在回答差于组内平均"),
    "clip.chart.ratio": ("ratio r", "比率 r"),
    "clip.chart.value": ("objective per token", "每个词元的目标值"),
    "clip.chart.unclipped": ("r · A (no clip)", "r · A（不裁剪）"),
    "clip.chart.objective": ("min(r · A, clip(r) · A)", "min(r · A, clip(r) · A)"),
    "clip.chart.zero_grad": ("zero gradient: clipped", "梯度为零：已裁剪"),
    "clip.explain": (
        "**Reading the curves.** With A > 0 the objective rises with r until 1 + ε, then goes flat: once a good "
        "token is ε more likely than when it was sampled, this batch gives no further push (shaded: zero "
        "gradient). With A < 0 it is flat below 1 − ε: a bad token already made ε less likely is left alone. "
        "In the other direction the min keeps the unclipped r · A, so a step that went the wrong way is always "
        "corrected — the objective is a pessimistic bound.",
        "**如何看曲线。** A > 0 时，目标值随 r 增大，直到 1 + ε 后变平：一个好词元的概率一旦比采样时高出 ε，"
        "这批数据就不再推动它（阴影区：梯度为零）。A < 0 时在 1 − ε 以下变平：一个坏词元的概率已经降低了 ε，"
        "就不再继续压低。反方向上 min 保留未裁剪的 r · A，所以走错方向的一步总会被纠正——目标是一个悲观的下界。",
    ),
    "clip.run_intro": (
        "A token the trainer updated, from tables/tokens: `logp_new` (log π_θ), `logp_old` (log π_old) and the "
        "`advantage` it was given, in the last optimisation pass. ε and ε_high come from the run's config; "
        "the table is recomputed here with the trainer's functions, beside what the trainer logged.",
        "训练器更新过的一个词元，取自 tables/tokens：最后一轮优化中的 `logp_new`（log π_θ）、`logp_old`（log π_old）"
        "和它得到的 `advantage`。ε 与 ε_high 取自该运行的配置；下表用训练器的函数重新计算，并与训练器记录的值并列。",
    ),
    "clip.run_logged": (
        "Logged by the trainer: ratio **{ratio:.4f}**, advantage **{adv:+.4f}**, clipped **{clipped}**. "
        "Recomputed here: ratio {r:.4f}, clipped {c}.",
        "训练器记录：比率 **{ratio:.4f}**，优势 **{adv:+.4f}**，是否裁剪 **{clipped}**。这里重新计算：比率 {r:.4f}，是否裁剪 {c}。",
    ),
    "clip.only_clipped": ("Only clipped tokens", "只看被裁剪的词元"),
    "clip.probs": ("π_old = {old:.4f}, π_θ = {new:.4f}", "π_old = {old:.4f}，π_θ = {new:.4f}"),

    # --- KL divergence ------------------------------------------------------------------------
    "kl.title": ("KL divergence", "KL 散度"),
    "kl.intro": (
        "The KL term measures how far the policy has drifted from the frozen reference model. A vocabulary of "
        "two outcomes keeps the arithmetic visible: the reference Q = [0.25, 0.75] stays fixed and α moves the "
        "policy P = [0.25 + α, 0.75 − α] away from it (α = 0: P = Q).",
        "KL 项衡量策略偏离冻结的参考模型有多远。用只有两个结果的词表，计算一目了然：参考分布 Q = [0.25, 0.75] "
        "固定不动，α 把策略 P = [0.25 + α, 0.75 − α] 从 Q 推开（α = 0 时 P = Q）。",
    ),
    "kl.alpha": ("α: how far the policy has moved", "α：策略移动了多远"),
    "kl.pq": ("KL(P‖Q)", "KL(P‖Q)"),
    "kl.qp": ("KL(Q‖P)", "KL(Q‖P)"),
    "kl.p_now": ("P = [{a:.2f}, {b:.2f}], Q = [0.25, 0.75]", "P = [{a:.2f}, {b:.2f}]，Q = [0.25, 0.75]"),
    "kl.chart.title": ("Both directions of KL against α", "两个方向的 KL 随 α 的变化"),
    "kl.chart.alpha": ("α", "α"),
    "kl.chart.kl": ("KL (nats)", "KL（奈特）"),
    "kl.chart.dist_title": ("The two distributions at this α", "当前 α 下的两个分布"),
    "kl.chart.outcome": ("outcome", "结果"),
    "kl.chart.prob": ("probability", "概率"),
    "kl.chart.p": ("policy P", "策略 P"),
    "kl.chart.q": ("reference Q", "参考 Q"),
    "kl.asym": (
        "**KL is not symmetric:** here KL(P‖Q) = {pq:.3f} but KL(Q‖P) = {qp:.3f}. Both are ≥ 0 and equal 0 only "
        "at α = 0, where P = Q. GRPO penalises KL(π_θ‖π_ref): the policy comes first, and the expectation is "
        "over tokens the policy samples.",
        "**KL 不对称：** 这里 KL(P‖Q) = {pq:.3f}，而 KL(Q‖P) = {qp:.3f}。两者都 ≥ 0，只有 α = 0（P = Q）时才为 0。"
        "GRPO 惩罚的是 KL(π_θ‖π_ref)：策略在前，期望是对策略自己采样的词元取的。",
    ),
    "kl.est_title": ("Estimating KL from sampled tokens: k1 and k3", "用采样的词元估计 KL：k1 与 k3"),
    "kl.est_intro": (
        "The trainer cannot sum over a whole vocabulary at every position; it has the sampled tokens and their "
        "log-probabilities under the policy and the reference. For a token x sampled from P, with "
        "ρ = Q(x)/P(x):",
        "训练器无法在每个位置对整个词表求和；它只有采样出的词元，以及这些词元在策略和参考模型下的对数概率。"
        "对从 P 采样的词元 x，记 ρ = Q(x)/P(x)：",
    ),
    "kl.est_after": (
        "Both average to KL(P‖Q). k1 is negative on tokens the policy likes less than the reference, so single "
        "tokens swing both ways; k3 is never negative and varies much less. GRPO (DeepSeekMath) uses k3, and "
        "so does this trainer's `grpo_loss`.",
        "两者的平均值都等于 KL(P‖Q)。在策略比参考模型更不喜欢的词元上 k1 为负，所以单个词元的值正负摇摆；"
        "k3 永远非负，方差也小得多。GRPO（DeepSeekMath）使用 k3，本训练器的 `grpo_loss` 也是。",
    ),
    "kl.n": ("Tokens sampled from P", "从 P 采样的词元数"),
    "kl.seed": ("Random seed", "随机种子"),
    "kl.exact": ("exact KL(P‖Q)", "精确 KL(P‖Q)"),
    "kl.k1_mean": ("mean of k1", "k1 的均值"),
    "kl.k3_mean": ("mean of k3", "k3 的均值"),
    "kl.spread": ("per-token std {s:.3f}", "单词元标准差 {s:.3f}"),
    "kl.col.outcome": ("outcome x", "结果 x"),
    "kl.col.p": ("P(x)", "P(x)"),
    "kl.col.q": ("Q(x)", "Q(x)"),
    "kl.col.k1": ("k1(x)", "k1(x)"),
    "kl.col.k3": ("k3(x)", "k3(x)"),
    "kl.col.count": ("times sampled", "被采样次数"),
    "kl.running.title": ("Running mean over the sampled tokens", "采样词元上的累计均值"),
    "kl.running.n": ("tokens sampled", "已采样词元数"),
    "kl.running.k1": ("k1", "k1"),
    "kl.running.k3": ("k3", "k3"),

    # --- the GRPO objective -------------------------------------------------------------------
    "obj.title": ("The GRPO objective", "GRPO 目标函数"),
    "obj.intro": (
        "Everything from the other demos in one formula. For a prompt q, sample G responses o_1 … o_G from "
        "π_old, score them, and maximise:",
        "把其他演示中的内容合成一个公式。对提示词 q，从 π_old 采样 G 个回答 o_1 … o_G 并打分，然后最大化：",
    ),
    "obj.terms": (
        "- **1/G Σ_i**: the mean over the group's G responses.\n"
        "- **1/|o_i| Σ_t**: the mean over the tokens of response i — length normalisation (below).\n"
        "- **r_i,t(θ) = π_θ(o_i,t | q, o_i,<t) / π_old(o_i,t | q, o_i,<t)**: the ratio of token t "
        "(*Ratio and clip* page).\n"
        "- **Â_i,t = (r_i − mean(r)) / std(r)**: the group advantage, the same for every token of response i "
        "(*Group advantage* page).\n"
        "- **min(r Â, clip(r, 1 − ε, 1 + ε) Â)**: PPO's clipped surrogate; ε is typically 0.2.\n"
        "- **β D_KL(π_θ ‖ π_ref)**: the penalty for drifting from the frozen reference, estimated per token "
        "with k3 (*KL divergence* page); β is small (the trainer's default is 0.04).\n\n"
        "The optimiser minimises the loss −J.",
        "- **1/G Σ_i**：对组内 G 个回答取平均。\n"
        "- **1/|o_i| Σ_t**：对第 i 个回答的词元取平均——长度归一化（见下文）。\n"
        "- **r_i,t(θ) = π_θ(o_i,t | q, o_i,<t) / π_old(o_i,t | q, o_i,<t)**：第 t 个词元的比率（见“比率与裁剪”页）。\n"
        "- **Â_i,t = (r_i − mean(r)) / std(r)**：组内优势，对第 i 个回答的所有词元都相同（见“组内优势”页）。\n"
        "- **min(r Â, clip(r, 1 − ε, 1 + ε) Â)**：PPO 的裁剪替代目标；ε 通常取 0.2。\n"
        "- **β D_KL(π_θ ‖ π_ref)**：偏离冻结参考模型的惩罚，逐词元用 k3 估计（见“KL 散度”页）；β 很小"
        "（训练器默认 0.04）。\n\n"
        "优化器最小化的是损失 −J。",
    ),
    "obj.worked_title": ("A worked example, step by step", "逐步计算的例子"),
    "obj.worked_intro": (
        "One prompt `3+4=`, G = 4 responses scored 1 (correct) or 0, of different lengths. For each token: its "
        "probability when sampled (π_old), under the policy being trained (π_θ), and under the reference (π_ref). "
        "Every number below comes from the trainer's own functions.",
        "一个提示词 `3+4=`，G = 4 个长度不同的回答，答对得 1 分、答错得 0 分。每个词元给出：采样时的概率（π_old）、"
        "正在训练的策略下的概率（π_θ）和参考模型下的概率（π_ref）。下面每个数都来自训练器自己的函数。",
    ),
    "obj.beta": ("β (KL weight)", "β（KL 权重）"),
    "obj.eps": ("ε (clip range)", "ε（裁剪范围）"),
    "obj.aggregation": ("Average over tokens", "词元平均方式"),
    "obj.agg.sequence": ("per response, then over responses (the chapter)", "先在每个回答内平均，再对回答平均（本章）"),
    "obj.agg.token": ("over all tokens of the group (DAPO)", "对组内所有词元统一平均（DAPO）"),
    "obj.step1": ("**Step 1 — group advantages.** Rewards {rewards}: mean {mean:.2f}, std {std:.2f}, so",
                  "**第 1 步——组内优势。** 奖励 {rewards}：均值 {mean:.2f}，标准差 {std:.2f}，因此"),
    "obj.step2": (
        "**Steps 2–4 — per token: ratio, clipped term, KL.** r = π_θ/π_old; the clipped term min(r·A, clip(r)·A); "
        "k3 = π_ref/π_θ − log(π_ref/π_θ) − 1; the token's term = min − β·k3. Rows marked clipped have zero "
        "gradient.",
        "**第 2–4 步——逐词元：比率、裁剪项、KL。** r = π_θ/π_old；裁剪项 min(r·A, clip(r)·A)；"
        "k3 = π_ref/π_θ − log(π_ref/π_θ) − 1；该词元的项 = min − β·k3。标为“已裁剪”的行梯度为零。",
    ),
    "obj.step5_sequence": (
        "**Step 5 — length normalisation and the group mean.** Each response's terms are averaged over its own "
        "length |o_i|, then the G means are averaged: every response weighs 1/G, whatever its length.",
        "**第 5 步——长度归一化与组平均。** 每个回答的项先除以自己的长度 |o_i| 求平均，再对 G 个平均值求平均："
        "无论长短，每个回答的权重都是 1/G。",
    ),
    "obj.step5_token": (
        "**Step 5 — one mean over all tokens (DAPO).** All the group's token terms are averaged together: a "
        "response weighs in proportion to its length.",
        "**第 5 步——对所有词元统一平均（DAPO）。** 组内所有词元的项一起求平均：回答的权重与其长度成正比。",
    ),
    "obj.result": (
        "J = **{J:.4f}**, so the loss is −J = **{loss:.4f}**. The trainer's `grpo_loss` on the same inputs "
        "returns **{trainer:.4f}**.",
        "J = **{J:.4f}**，所以损失为 −J = **{loss:.4f}**。训练器的 `grpo_loss` 在同样的输入上返回 **{trainer:.4f}**。",
    ),
    "obj.col.response": ("response", "回答"),
    "obj.col.text": ("text", "文本"),
    "obj.col.reward": ("reward", "奖励"),
    "obj.col.A": ("A_i", "A_i"),
    "obj.col.t": ("t", "t"),
    "obj.col.token": ("token", "词元"),
    "obj.col.pi_old": ("π_old", "π_old"),
    "obj.col.pi_theta": ("π_θ", "π_θ"),
    "obj.col.pi_ref": ("π_ref", "π_ref"),
    "obj.col.ratio": ("r", "r"),
    "obj.col.clip_ratio": ("clip(r)", "clip(r)"),
    "obj.col.rA": ("r·A", "r·A"),
    "obj.col.clipA": ("clip(r)·A", "clip(r)·A"),
    "obj.col.min": ("min", "min"),
    "obj.col.clipped": ("clipped", "已裁剪"),
    "obj.col.kl": ("k3 KL", "k3 KL"),
    "obj.col.term": ("min − β·KL", "min − β·KL"),
    "obj.col.length": ("|o_i|", "|o_i|"),
    "obj.col.sum_terms": ("Σ_t terms", "Σ_t 各项"),
    "obj.col.mean_term": ("Σ_t / |o_i|", "Σ_t / |o_i|"),
    "obj.col.weight": ("weight in J", "在 J 中的权重"),
    "obj.len_title": ("Why divide by each response's length", "为什么要除以每个回答的长度"),
    "obj.len_intro": (
        "Two responses in a group: a short good one (4 tokens, A = +1) and a long bad one (A = −1), at ratio 1 "
        "so each token's term is just A. Without the 1/|o_i|, every token counts once and the long response "
        "outvotes the short one by sheer length.",
        "组内两个回答：一个短的好回答（4 个词元，A = +1）和一个长的坏回答（A = −1），比率取 1，每个词元的项就是 A。"
        "如果没有 1/|o_i|，每个词元各算一票，长回答仅凭长度就压倒了短回答。",
    ),
    "obj.long_len": ("Length of the long response (tokens)", "长回答的长度（词元数）"),
    "obj.len.title": ("Share of the objective carried by the long response", "长回答在目标中所占的份额"),
    "obj.len.len": ("length of the long response (tokens)", "长回答的长度（词元数）"),
    "obj.len.share": ("share of the objective", "在目标中的份额"),
    "obj.len.sequence": ("÷ |o_i| per response (the chapter)", "每个回答 ÷ |o_i|（本章）"),
    "obj.len.token": ("one mean over all tokens (DAPO)", "所有词元统一平均（DAPO）"),
    "obj.len_result": (
        "With {L} tokens: dividing by length, each response weighs {seq_share:.0%} and J = {seq:+.2f} — the good "
        "and the bad answer balance. One mean over all tokens gives the long response {tok_share:.0%} and "
        "J = {tok:+.2f}: its length alone dominates the update.",
        "长回答为 {L} 个词元时：按长度归一化，每个回答各占 {seq_share:.0%}，J = {seq:+.2f}——好回答与坏回答相互平衡。"
        "对所有词元统一平均时，长回答占 {tok_share:.0%}，J = {tok:+.2f}：仅凭长度就主导了更新。",
    ),
    "obj.len_note": (
        "The per-token mean (DAPO) is a deliberate alternative: it weighs every token equally, so a long "
        "reasoning chain is not diluted per token. The trainer offers both as `loss_aggregation`.",
        "按词元统一平均（DAPO）是一个有意为之的替代方案：每个词元权重相同，长推理链的每个词元不会被稀释。"
        "训练器通过 `loss_aggregation` 选项同时提供两种方式。",
    ),

    # --- quiz ---------------------------------------------------------------------------------
    "quiz.title": ("Quiz", "小测验"),
    "quiz.intro": ("The chapter's five questions. Pick an answer to see whether it is right, and why.",
                   "本章的五道题。选择一个答案，看看对不对，以及为什么。"),
    "quiz.right": ("Right.", "正确。"),
    "quiz.wrong": ("Not quite — the answer is: {answer}", "不完全对——正确答案是：{answer}"),
    "quiz.score": ("{right} of {total} right ({answered} answered).", "共 {total} 题，答对 {right} 题（已答 {answered} 题）。"),
    "quiz.reset": ("Start again", "重新开始"),
    "quiz.structure.q": ("1. What is the structural change of GRPO compared with PPO?",
                         "1. 与 PPO 相比，GRPO 在结构上的变化是什么？"),
    "quiz.structure.o1": ("It removes the reward model: the group scores itself.", "去掉了奖励模型：组内自己给自己打分。"),
    "quiz.structure.o2": ("It removes the value model: a group of G responses per prompt provides the baseline.",
                          "去掉了价值模型：每个提示词采样一组 G 个回答来提供基线。"),
    "quiz.structure.o3": ("It removes the reference model and the KL term.", "去掉了参考模型和 KL 项。"),
    "quiz.structure.o4": ("It replaces the clipped objective with supervised fine-tuning on the best response.",
                          "用对最佳回答的监督微调代替了裁剪目标。"),
    "quiz.structure.why": (
        "PPO needs a value model (the critic), usually as large as the policy, to estimate each token's "
        "advantage with GAE. GRPO drops it: sample G responses to the same prompt and use the group's mean "
        "and std as the baseline. The reward, the reference and the clipped objective all stay.",
        "PPO 需要一个价值模型（评论家），通常和策略模型一样大，用 GAE 估计每个词元的优势。GRPO 去掉了它："
        "对同一提示词采样 G 个回答，用组内均值和标准差作为基线。奖励、参考模型和裁剪目标都保留了。",
    ),
    "quiz.advantage.q": ("2. How is the advantage A_i of response i computed?", "2. 第 i 个回答的优势 A_i 如何计算？"),
    "quiz.advantage.o1": ("A_i = r_i − V(q), with V from a value model.", "A_i = r_i − V(q)，V 来自价值模型。"),
    "quiz.advantage.o2": ("A_i = r_i / Σ_j r_j, the reward's share of the group's total.",
                          "A_i = r_i / Σ_j r_j，即该奖励在组内总和中的占比。"),
    "quiz.advantage.o3": ("A_i = (r_i − mean(r_1 … r_G)) / std(r_1 … r_G), within the group.",
                          "A_i = (r_i − mean(r_1 … r_G)) / std(r_1 … r_G)，在组内计算。"),
    "quiz.advantage.o4": ("By GAE over the tokens, with γ and λ.", "对词元做 GAE，使用 γ 和 λ。"),
    "quiz.advantage.why": (
        "Each reward is standardised within its own group: above the group mean gives a positive advantage, "
        "below a negative one. With rewards 1, 3, 2, 6: mean 3, std 1.87, A = −1.07, 0.00, −0.53, 1.60. "
        "Every token of the response shares that A_i.",
        "每个奖励在自己的组内标准化：高于组均值，优势为正；低于组均值，优势为负。奖励为 1、3、2、6 时："
        "均值 3，标准差 1.87，A = −1.07、0.00、−0.53、1.60。回答中的每个词元共享这个 A_i。",
    ),
    "quiz.clip.q": ("3. What does the clip do?", "3. 裁剪（clip）起什么作用？"),
    "quiz.clip.o1": ("It stops a token's gradient once π_θ/π_old leaves [1 − ε, 1 + ε] in the direction A favours.",
                     "一旦 π_θ/π_old 沿 A 鼓励的方向超出 [1 − ε, 1 + ε]，该词元的梯度就为零。"),
    "quiz.clip.o2": ("It clips the rewards to [−1, 1].", "把奖励裁剪到 [−1, 1]。"),
    "quiz.clip.o3": ("It clips the norm of the gradient.", "裁剪梯度的范数。"),
    "quiz.clip.o4": ("It clips the advantages to [−ε, ε].", "把优势裁剪到 [−ε, ε]。"),
    "quiz.clip.why": (
        "min(r·A, clip(r, 1 − ε, 1 + ε)·A): with A > 0, raising the token's probability past 1 + ε earns "
        "nothing more; with A < 0, lowering it below 1 − ε earns nothing more. With π_old = 0.4, π_θ = 0.6, "
        "A = 1, ε = 0.2: r = 1.5, clipped to 1.2, objective 1.2. (Gradient-norm clipping exists too, but it "
        "is a different thing.)",
        "min(r·A, clip(r, 1 − ε, 1 + ε)·A)：A > 0 时，把词元概率提高到超过 1 + ε 不再有收益；A < 0 时，"
        "压低到 1 − ε 以下也不再有收益。π_old = 0.4、π_θ = 0.6、A = 1、ε = 0.2 时：r = 1.5，裁剪为 1.2，目标值 1.2。"
        "（梯度范数裁剪也存在，但那是另一回事。）",
    ),
    "quiz.kl_purpose.q": ("4. What is the KL term for?", "4. KL 项的作用是什么？"),
    "quiz.kl_purpose.o1": ("It makes the rewards larger.", "让奖励变大。"),
    "quiz.kl_purpose.o2": ("It replaces the value model as the baseline.", "代替价值模型作为基线。"),
    "quiz.kl_purpose.o3": ("It makes the group's responses more diverse.", "让组内的回答更多样。"),
    "quiz.kl_purpose.o4": ("It keeps the policy close to the frozen reference model.", "让策略保持在冻结的参考模型附近。"),
    "quiz.kl_purpose.why": (
        "β·KL(π_θ‖π_ref) is subtracted from the objective: the further the policy moves from the model it "
        "started as, the more it pays — a guard against reward hacking and against losing what the model "
        "already knew. Clipping limits each step; KL limits the total distance travelled.",
        "目标中减去 β·KL(π_θ‖π_ref)：策略离起点模型越远，代价越大——以防钻奖励漏洞（reward hacking），也防止遗忘模型原有的能力。"
        "裁剪限制每一步的幅度；KL 限制走过的总距离。",
    ),
    "quiz.kl_fact.q": ("5. Which statement about KL divergence is true?", "5. 关于 KL 散度，哪一项是正确的？"),
    "quiz.kl_fact.o1": ("KL(P‖Q) = KL(Q‖P): it is a distance.", "KL(P‖Q) = KL(Q‖P)：它是一种距离。"),
    "quiz.kl_fact.o2": ("KL(P‖Q) ≥ 0, with 0 only when P = Q; and in general KL(P‖Q) ≠ KL(Q‖P).",
                        "KL(P‖Q) ≥ 0，只有 P = Q 时为 0；一般来说 KL(P‖Q) ≠ KL(Q‖P)。"),
    "quiz.kl_fact.o3": ("KL can be negative when the policy improves on the reference.",
                        "当策略比参考模型更好时，KL 可以为负。"),
    "quiz.kl_fact.o4": ("The per-token estimator k1 = log π_θ − log π_ref is never negative.",
                        "逐词元估计量 k1 = log π_θ − log π_ref 永远不为负。"),
    "quiz.kl_fact.why": (
        "KL is never negative and is 0 only for identical distributions, but it is not symmetric: with "
        "P = [0.5, 0.5] and Q = [0.25, 0.75], KL(P‖Q) = 0.144 while KL(Q‖P) = 0.131. Single-token k1 values "
        "can be negative; only their average estimates KL (k3 is the one that is never negative).",
        "KL 永远非负，只有两个分布相同时才为 0，但它不对称：P = [0.5, 0.5]、Q = [0.25, 0.75] 时，"
        "KL(P‖Q) = 0.144，而 KL(Q‖P) = 0.131。单个词元的 k1 可以为负，只有它的平均值才是 KL 的估计（永不为负的是 k3）。",
    ),

    # --- GRPO and its variants (dashboard/app_pages/grpo_variants.py) -------------------------
    "var.title": ("GRPO and its variants", "GRPO 及其变体"),
    "var.intro": (
        "The chapter's GRPO is one point in a family. Later papers changed one piece each: how the advantage "
        "is scaled, how token terms are averaged, whether the ratio is taken per token or per response, what "
        "happens to truncated answers and to groups with no spread. Every option below is a trainer flag; "
        "every number on this page comes from the trainer's own `trainer/objective.py`.",
        "本章的 GRPO 只是一个家族中的一员。后来的论文各自改动了其中一块：优势如何缩放、词元项如何平均、比率按词元还是按整个回答计算、"
        "被截断的回答和没有差异的组如何处理。下面每个选项都是训练器的一个参数；本页每个数字都来自训练器自己的 "
        "`trainer/objective.py`。",
    ),
    "var.name.chapter": ("The chapter's GRPO", "本章的 GRPO"),
    "var.name.dr_grpo": ("Dr. GRPO", "Dr. GRPO"),
    "var.name.dapo": ("DAPO", "DAPO"),
    "var.name.gspo": ("GSPO", "GSPO"),
    "var.options_title": ("What each variant changes", "每个变体改了什么"),
    "var.opt.option": ("option", "选项"),
    "var.opt.std_mode": ("advantage scale `--std-mode`", "优势缩放 `--std-mode`"),
    "var.opt.aggregation": ("token averaging `--loss-aggregation`", "词元平均 `--loss-aggregation`"),
    "var.opt.ratio": ("importance ratio `--importance-level`", "重要性比率 `--importance-level`"),
    "var.opt.clip": ("clip range `--epsilon`, `--epsilon-high`", "裁剪范围 `--epsilon`、`--epsilon-high`"),
    "var.opt.truncated": ("truncated answers `--mask-truncated`", "被截断的回答 `--mask-truncated`"),
    "var.opt.equal": ("groups with equal rewards `--dynamic-sampling`", "奖励全相同的组 `--dynamic-sampling`"),
    "var.opt.preset": ("launch-form preset", "启动表单预设"),
    "var.val.std.group": ("÷ the group's std", "÷ 组内标准差"),
    "var.val.std.sample": ("÷ the group's N−1 std", "÷ 组内 N−1 标准差"),
    "var.val.std.batch": ("÷ the batch's std", "÷ 整批标准差"),
    "var.val.std.none": ("centre only (no ÷ std)", "只减均值（不除标准差）"),
    "var.val.agg.sequence": ("1/G · 1/|o_i|: mean per response", "1/G · 1/|o_i|：先在回答内平均"),
    "var.val.agg.token": ("one mean over all tokens", "对所有词元统一平均"),
    "var.val.agg.constant": ("sum ÷ (G · max_new_tokens)", "求和 ÷ (G · max_new_tokens)"),
    "var.val.level.token": ("per token: r_t", "逐词元：r_t"),
    "var.val.level.sequence": ("per response: s_i, the geometric mean", "逐回答：s_i，几何平均"),
    "var.val.trunc.kept": ("in the loss", "计入损失"),
    "var.val.trunc.masked": ("left out of the loss", "不计入损失"),
    "var.val.equal.kept": ("kept (advantages 0: no signal)", "保留（优势为 0：没有信号）"),
    "var.val.equal.dropped": ("dropped; more prompts are sampled", "丢弃；再采样更多提示词"),
    "var.papers": (
        "Dr. GRPO: Liu et al., “Understanding R1-Zero-Like Training: A Critical Perspective” (2025, "
        "arXiv:2503.20783). DAPO: Yu et al., “DAPO: An Open-Source LLM Reinforcement Learning System at Scale” "
        "(2025, arXiv:2503.14476). GSPO: Zheng et al., “Group Sequence Policy Optimization” (2025, "
        "arXiv:2507.18071). Batch std: Liu et al., “Part I: Tricks or Traps? A Deep Dive into RL for LLM "
        "Reasoning” (2025, arXiv:2508.08221). The presets keep β and the rest of the chapter's defaults, so "
        "only the objective differs.",
        "Dr. GRPO：Liu 等，《Understanding R1-Zero-Like Training: A Critical Perspective》（2025，arXiv:2503.20783）。"
        "DAPO：Yu 等，《DAPO: An Open-Source LLM Reinforcement Learning System at Scale》（2025，arXiv:2503.14476）。"
        "GSPO：Zheng 等，《Group Sequence Policy Optimization》（2025，arXiv:2507.18071）。整批标准差：Liu 等，"
        "《Part I: Tricks or Traps? A Deep Dive into RL for LLM Reasoning》（2025，arXiv:2508.08221）。预设保留 β 和本章的"
        "其他默认值，因此只有目标函数不同。",
    ),
    "var.group_title": ("One group, four objectives", "一个组，四种目标函数"),
    "var.group_intro": (
        "Prompt `3+4=`, G = 4 responses: o1 `7` (2 tokens), o2 `12` (3 tokens), o3 `3+4=7` (6 tokens) and o4, a "
        "long rambling answer whose length you choose (at {max_len} tokens, the demo's max_new_tokens, it is cut "
        "without EOS: truncated). Set the rewards, and how far the policy has moved since sampling.",
        "提示词 `3+4=`，G = 4 个回答：o1 `7`（2 个词元）、o2 `12`（3 个词元）、o3 `3+4=7`（6 个词元），以及 o4——一个长度由你"
        "选择的冗长回答（达到 {max_len} 个词元，即本例的 max_new_tokens 时，它在没有 EOS 的情况下被截断）。设置奖励，以及采样后"
        "策略移动了多远。",
    ),
    "var.reward_i": ("r{i}", "r{i}"),
    "var.long_len": ("Length of o4, the long answer ({max_len}: cut, truncated)",
                     "o4（长回答）的长度（{max_len}：被截断）"),
    "var.drift": ("How far π_θ has moved from π_old (0: the first pass, every ratio 1)",
                  "π_θ 偏离 π_old 的程度（0：第一遍，所有比率都是 1）"),
    "var.truncated_note": (
        "o4 reached max_new_tokens = {max_len} without EOS: it is truncated. A reward that reads its last "
        "number could still score it 1; set r4 = 1 to see which variants would then teach it.",
        "o4 达到 max_new_tokens = {max_len} 仍没有 EOS：它被截断了。只读最后一个数字的奖励仍可能给它 1 分；把 r4 设为 1，"
        "看看哪些变体会因此去学它。",
    ),
    "var.run_intro": (
        "Step {step} of the run, one group; max_new_tokens = {max_len}. Rewards, lengths and truncation are the "
        "logged ones; the token ratios are those of the run's last pass where tables/tokens has the group.",
        "该运行第 {step} 步的一个组；max_new_tokens = {max_len}。奖励、长度和截断都来自记录；如果 tables/tokens 中有这个组，"
        "词元比率取该运行最后一遍的数值。",
    ),
    "var.run_no_tokens": (
        "This group has no per-token rows (tables/tokens): every ratio is taken as 1, as on the first pass.",
        "这个组没有逐词元记录（tables/tokens）：所有比率按 1 计算，如同第一遍。",
    ),
    "var.run_dropped": (
        "The run dropped this group (dynamic sampling: its rewards were all equal); it was never trained on.",
        "该运行丢弃了这个组（动态采样：它的奖励全部相同）；它从未参与训练。",
    ),
    "var.col.response": ("response", "回答"),
    "var.col.reward": ("reward", "奖励"),
    "var.col.length": ("|o_i|", "|o_i|"),
    "var.col.truncated": ("truncated", "被截断"),
    "var.col.push": ("push per token", "每个词元的推动"),
    "var.col.position": ("token position t", "词元位置 t"),
    "var.col.max_token_ratio": ("largest token ratio", "最大词元比率"),
    "var.col.clipped": ("clipped tokens", "被裁剪的词元"),
    "var.col.group": ("group", "组"),
    "var.col.this": ("this group", "本组"),
    "var.col.other": ("another prompt", "另一个提示词"),
    "var.col.len": ("length of the long answer o4 (tokens)", "长回答 o4 的长度（词元数）"),
    "var.col.per_token": ("push on each of its tokens", "它每个词元受到的推动"),
    "var.col.total": ("push on the whole answer", "整个回答受到的推动"),
    "var.col.per_token_title": ("Per token of o4", "o4 的每个词元"),
    "var.col.total_title": ("All of o4's tokens together", "o4 全部词元合计"),
    "var.state.clipped": ("clipped (zero gradient)", "被裁剪（梯度为零）"),
    "var.state.masked": ("out of the loss", "不计入损失"),
    "var.state.dropped": ("group dropped", "整组被丢弃"),
    "var.outcome_line": (
        "**{name}**: loss {loss:.4f}; the clip stops {clipped} of {tokens} tokens; {masked:.0%} of the tokens are "
        "out of the loss.",
        "**{name}**：损失 {loss:.4f}；裁剪使 {tokens} 个词元中的 {clipped} 个停止更新；{masked:.0%} 的词元不计入损失。",
    ),
    "var.dropped_line": (
        "**{name}**: the rewards are all equal, so dynamic sampling drops the group and draws another prompt "
        "in its place; nothing of it reaches the loss.",
        "**{name}**：奖励全部相同，动态采样丢弃这个组，并另抽一个提示词补上；它的任何部分都不进入损失。",
    ),
    "var.push_note": (
        "Each cell is −∂loss/∂log π_θ(o_t): how much one gradient-descent step raises (green) or lowers (red) "
        "that token's log-probability, per unit of learning rate. It holds everything at once: the advantage, "
        "the normaliser's weight, the ratio and the clip. ✂: the clip stopped the gradient; ·: the token is "
        "out of the loss.",
        "每个格子是 −∂loss/∂log π_θ(o_t)：一步梯度下降（按单位学习率）把该词元的对数概率提高（绿色）或降低（红色）多少。"
        "它一次包含了所有因素：优势、归一化的权重、比率和裁剪。✂：裁剪使梯度为零；·：该词元不计入损失。",
    ),
    "var.equal_now": (
        "All rewards of this group are equal: every advantage is 0 and no variant learns anything from it; "
        "DAPO at least does not spend a batch slot on it.",
        "这个组的奖励全部相同：所有优势都是 0，没有哪个变体能从中学到东西；DAPO 至少不会为它占用批次中的名额。",
    ),
    "var.clip_title": ("Clip per token or per response", "按词元裁剪还是按回答裁剪"),
    "var.clip_intro": (
        "The chapter clips each token's ratio r_t to [1 − ε, 1 + ε]: one token that moved a lot stops, its "
        "neighbours keep learning. GSPO takes one ratio per response, s_i = exp(mean_t log r_t), and clips "
        "that: the whole response stops or none of it. Because s_i averages the log-ratios of many tokens it "
        "moves far less than single tokens, hence GSPO's tiny ε (3·10⁻⁴, 4·10⁻⁴ in the paper). At drift 0, "
        "the first pass, every ratio is 1 and both give the same gradient.",
        "本章把每个词元的比率 r_t 裁剪到 [1 − ε, 1 + ε]：变化很大的那个词元停止更新，相邻的词元继续学习。GSPO 对每个回答只取"
        "一个比率 s_i = exp(mean_t log r_t) 并对它裁剪：整个回答要么全部停止，要么全部继续。由于 s_i 是许多词元对数比率的平均，"
        "它的变化远小于单个词元，因此 GSPO 的 ε 很小（论文中为 3·10⁻⁴、4·10⁻⁴）。偏移为 0（第一遍）时，所有比率都是 1，"
        "两者给出相同的梯度。",
    ),
    "var.long_title": ("A long wrong answer", "一个长的错误回答"),
    "var.long_intro": (
        "o4 is wrong (A < 0). How hard is each of its tokens pushed down as it grows? With the chapter's 1/|o_i| "
        "the answer's total push is fixed, so each token gets 1/|o_i| of it: a long wrong answer is punished "
        "less per token than a short one, which quietly favours rambling. Dr. GRPO divides by a constant "
        "instead, so each token gets the same push whatever the length. DAPO's token mean sits in between, and "
        "at {max_len} tokens (truncated) DAPO leaves the answer out altogether. The curves are at the first pass "
        "(every ratio 1), where GSPO averages as the chapter does: its line lies on the chapter's.",
        "o4 是错误的（A < 0）。随着它变长，每个词元被压低的力度有多大？在本章的 1/|o_i| 下，整个回答受到的推动是固定的，"
        "每个词元只得到其中的 1/|o_i|：长的错误回答每个词元受到的惩罚比短的更少，这在不知不觉中鼓励了冗长。Dr. GRPO 改为除以常数，"
        "因此无论长短，每个词元受到相同的推动。DAPO 的按词元平均介于两者之间；到 {max_len} 个词元（被截断）时，DAPO 干脆把这个回答排除在外。"
        "曲线取第一遍（所有比率为 1）时的值，此时 GSPO 的平均方式与本章相同：它的曲线与本章的重合。",
    ),
    "var.long_result": (
        "At 8 tokens, each token of o4 is pushed by {chapter:+.4f} (the chapter), {dr:+.4f} (Dr. GRPO) and "
        "{dapo:+.4f} (DAPO); at {max_len}, DAPO's push is 0.",
        "长度为 8 个词元时，o4 每个词元受到的推动为 {chapter:+.4f}（本章）、{dr:+.4f}（Dr. GRPO）和 {dapo:+.4f}（DAPO）；"
        "到 {max_len} 个词元时，DAPO 的推动为 0。",
    ),
    "var.zero_title": ("Groups with equal rewards", "奖励全相同的组"),
    "var.zero_intro": (
        "When all G rewards of a group are equal, every advantage is 0: the group costs a full share of "
        "sampling and teaches nothing (the trainer counts it in `groups/frac_zero_std`). With 0/1 rewards that "
        "happens with probability p^G + (1 − p)^G, so it grows as the model gets good (or stays bad) at a "
        "prompt. DAPO's dynamic sampling drops those groups and samples more prompts until the batch is full "
        "of groups with a spread: every update keeps its size, at the price of extra sampling.",
        "当一个组的 G 个奖励全部相同时，所有优势都为 0：这个组占用了一整份采样开销，却什么也学不到（训练器把它计入 "
        "`groups/frac_zero_std`）。对 0/1 奖励，这种情况的概率是 p^G + (1 − p)^G，所以当模型在某个提示词上变得很好（或一直很差）时，"
        "它会变大。DAPO 的动态采样丢弃这些组，并继续采样更多提示词，直到批次中都是有差异的组：每次更新的规模不变，代价是额外的采样。",
    ),
    "var.p": ("Chance p that a response is right", "单个回答答对的概率 p"),
    "var.G": ("G", "G"),
    "var.chart.p": ("p: chance a response is right", "p：单个回答答对的概率"),
    "var.chart.frac": ("groups with no signal", "没有信号的组"),
    "var.chart.zero_title": ("Share of groups whose rewards are all equal", "奖励全相同的组所占比例"),
    "var.zero_result": ("With p = {p:.0%} and G = {G}, {frac:.0%} of the groups have no signal.",
                        "p = {p:.0%}、G = {G} 时，{frac:.0%} 的组没有信号。"),
    "var.zero_cost": ("Dynamic sampling then draws about {cost:.2f} prompts for each group it keeps.",
                      "此时动态采样平均每保留一个组，需要抽取约 {cost:.2f} 个提示词。"),
    "var.zero_never": ("No group has a signal at all: dynamic sampling would stop at its bound on extra rounds.",
                       "所有组都没有信号：动态采样会在额外采样轮数达到上限时停止。"),
    "var.scale_title": ("The advantage scale: group, sample, batch or none", "优势的缩放：组、样本、整批或不缩放"),
    "var.scale_intro": (
        "Every mode centres on the group's own mean; they differ in what divides. `group` (the chapter) and "
        "`sample` (N − 1) use the group's own std, so a group where one answer in four is right gives it the "
        "same large advantage as any other: a nearly solved or nearly hopeless prompt is scaled up. `batch` "
        "divides by the std of every reward in the step, so groups keep their relative size. `none` (Dr. GRPO) "
        "only centres. Below, this group and one other prompt of the same step.",
        "所有模式都减去本组自己的均值，区别在于除以什么。`group`（本章）和 `sample`（N − 1）用本组自己的标准差，因此四个回答中只有一个答对"
        "的组，会给那个回答和其他组一样大的优势：几乎已解决或几乎无望的提示词被放大了。`batch` 除以这一步所有奖励的标准差，"
        "各组保持相对大小。`none`（Dr. GRPO）只减均值。下面是本组和同一步中的另一个提示词。",
    ),
    "var.other_right": ("Right answers in the other prompt's group (of 4)", "另一个提示词的组中答对的个数（共 4 个）"),
    "var.scale_note": (
        "Dr. GRPO argues the std division is a bias: it weighs prompts by how uncertain their rewards are, not "
        "by how much there is to learn. Batch std keeps a scale (so the learning rate means the same thing) "
        "without that per-prompt reweighting.",
        "Dr. GRPO 认为除以标准差是一种偏差：它按奖励的不确定程度给提示词加权，而不是按有多少东西可学。整批标准差保留了一个尺度"
        "（学习率的含义不变），又没有按提示词重新加权。",
    ),
    "var.quiz_title": ("Check yourself", "自测"),
    "quiz.var_equal.q": ("What does DAPO's dynamic sampling do with a group whose G rewards are all equal?",
                         "对于 G 个奖励全部相同的组，DAPO 的动态采样怎么处理？"),
    "quiz.var_equal.o1": ("Divides by a small ε instead of the std, so the advantages are large.",
                          "用一个很小的 ε 代替标准差做除数，使优势变大。"),
    "quiz.var_equal.o2": ("Drops it and samples more prompts until the batch holds enough groups with a spread.",
                          "丢弃它，并采样更多提示词，直到批次中有足够多有差异的组。"),
    "quiz.var_equal.o3": ("Gives every response of the group advantage +1.", "给组内每个回答 +1 的优势。"),
    "quiz.var_equal.o4": ("Keeps sampling the same prompt until one answer differs.", "对同一个提示词反复采样，直到有一个回答不同。"),
    "quiz.var_equal.why": (
        "Equal rewards give advantages 0: the group would cost sampling and teach nothing. Dynamic sampling "
        "throws such groups away and draws new prompts (up to a bound on extra rounds) so each update is made "
        "of groups with a signal. The dropped groups are still logged, marked, so you can see what was thrown away.",
        "奖励相同则优势为 0：这个组只消耗采样，什么也教不了。动态采样丢弃这样的组，并抽取新的提示词（额外轮数有上限），"
        "使每次更新都由有信号的组组成。被丢弃的组仍会被记录并加以标记，你可以看到丢掉了什么。",
    ),
    "quiz.var_length.q": (
        "Under the chapter's 1/|o_i| averaging, how hard is each token of a long wrong answer pushed down, "
        "compared with a short wrong answer?",
        "在本章的 1/|o_i| 平均下，与短的错误回答相比，长的错误回答的每个词元被压低的力度如何？",
    ),
    "quiz.var_length.o1": (
        "Less: the answer's push is shared among more tokens. Dr. GRPO's constant normaliser pushes each "
        "token the same whatever the length.",
        "更小：整个回答的推动被更多词元分摊。Dr. GRPO 的常数归一化使每个词元受到相同的推动，与长度无关。",
    ),
    "quiz.var_length.o2": ("More: a long answer has more tokens to punish.", "更大：长回答有更多词元可以惩罚。"),
    "quiz.var_length.o3": ("The same: the advantage does not depend on length.", "相同：优势与长度无关。"),
    "quiz.var_length.o4": ("Not at all: long answers are left out of the loss.", "完全不压低：长回答不计入损失。"),
    "quiz.var_length.why": (
        "Each response weighs 1/G in total and its tokens share it as 1/|o_i|, so the per-token push shrinks "
        "as the answer grows: wrong answers are punished less when they are long. Dr. GRPO divides the sum by "
        "a constant (G · max_new_tokens) instead; only truncated answers, with --mask-truncated, leave the loss.",
        "每个回答总共占 1/G 的权重，它的词元按 1/|o_i| 分摊，所以回答越长，每个词元受到的推动越小：错误回答越长受到的惩罚越轻。"
        "Dr. GRPO 改为把总和除以一个常数（G · max_new_tokens）；只有被截断的回答在 --mask-truncated 下才不计入损失。",
    ),
    "quiz.var_gspo.q": ("What does GSPO clip?", "GSPO 裁剪的是什么？"),
    "quiz.var_gspo.o1": ("Each token's ratio, as PPO does, but with a larger ε.", "和 PPO 一样裁剪每个词元的比率，只是 ε 更大。"),
    "quiz.var_gspo.o2": ("The advantages, to [−ε, ε].", "优势，裁剪到 [−ε, ε]。"),
    "quiz.var_gspo.o3": (
        "One ratio per response, the geometric mean of its token ratios: the whole response is clipped or none of it.",
        "每个回答一个比率，即它各词元比率的几何平均：整个回答要么全部被裁剪，要么都不被裁剪。",
    ),
    "quiz.var_gspo.o4": ("The reward of each response.", "每个回答的奖励。"),
    "quiz.var_gspo.why": (
        "The reward belongs to the response, so GSPO weighs the response: s_i = exp(1/|o_i| Σ_t log r_t). An "
        "average of log-ratios moves little, so its ε is tiny (3·10⁻⁴ to 4·10⁻⁴ in the paper). With one pass "
        "every ratio is 1 and GSPO's gradient equals the chapter's.",
        "奖励属于整个回答，所以 GSPO 按回答计算比率：s_i = exp(1/|o_i| Σ_t log r_t)。对数比率的平均变化很小，所以它的 ε 很小"
        "（论文中为 3·10⁻⁴ 到 4·10⁻⁴）。只做一遍优化时，所有比率都是 1，GSPO 的梯度与本章的相同。",
    ),
}
