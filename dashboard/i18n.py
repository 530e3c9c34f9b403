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
}
