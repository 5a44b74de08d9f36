"""The run spec: typed, frozen pydantic models. Every field is documented once, here.

The JSON Schema (`ragen validate --schema`) and the spec reference in docs/spec.md are generated
from these models; presets live in `presets.py`; loading with file:line errors in `loader.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from ragen_cli.spec.monitor_spec import MonitorSpec
from ragen_cli.spec.warm_start_spec import WarmStartSpec

OnOff = Annotated[Literal["auto", "on", "off"],
                  BeforeValidator(lambda v: ("on" if v else "off") if isinstance(v, bool) else v)]
"""auto / on / off; YAML reads a bare `on` or `off` as a boolean, which means the same."""


class Section(BaseModel):
    """Base for all spec sections: unknown keys are errors, values never change after loading."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _template_text(value: Any) -> Any:
    """`model.chat_template`: Jinja text stays as it is; anything else names a file (relative to
    the working directory), read here so the run directory's spec.yaml carries the template."""
    if not isinstance(value, str) or "{{" in value or "{%" in value:
        return value
    from pathlib import Path

    path = Path(value).expanduser()
    if not path.is_file():
        raise PydanticCustomError("chat_template", "neither Jinja text (no {{ or {%) nor a file: {value}", {"value": value})
    return path.read_text(encoding="utf-8")


def _two_tags(value: tuple[str, str]) -> tuple[str, str]:
    if not value[0].strip() or not value[1].strip() or value[0] == value[1]:
        raise PydanticCustomError("tags", "an opening and a closing tag, both non-blank and different", {})
    return value


Tags = Annotated[tuple[str, str], AfterValidator(_two_tags)]


# --------------------------------------------------------------------------------------- model
class LoraSpec(Section):
    rank: int = Field(8, ge=1, le=512, description="LoRA rank r (vLLM serves ranks up to 512).")
    alpha: int = Field(16, ge=1, description="LoRA scaling alpha (the update is scaled by alpha / rank).")
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="Dropout on the LoRA input.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Modules that get adapters: 'all-linear' or a list of module names."
    )


class ModelSpec(Section):
    name: str = Field(
        "smollm2-135m-instruct",
        description="A built-in model name (`ragen models`), a local Hugging Face model directory, "
        "or a hub id on machines with hub access.",
    )
    max_context: int = Field(
        4096, ge=128, description="Longest token sequence (prompt plus all turns) a trajectory may reach."
    )
    lora: LoraSpec | None = Field(None, description="Train a LoRA adapter instead of all weights; omit for full fine-tuning.")
    chat_template: Annotated[str | None, BeforeValidator(_template_text)] = Field(
        None, description="The chat template (Jinja text, or a file holding it) the sampler, the trainer, validation and "
        "eval render episodes with, instead of the tokenizer's own; omit to use the tokenizer's. A template that "
        "re-renders earlier turns (Qwen3 drops their reasoning) makes the update train one row per turn as sampled "
        "(docs/rollout.md, Chat templates).",
    )
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Extra variables for the chat template, e.g. `{enable_thinking: false}` for Qwen3.",
    )


# ----------------------------------------------------------------------------------------- env
class EnvRef(Section):
    name: str = Field(description="A built-in env name (`ragen envs`), or `module.path:ClassName` for your own.")
    config: dict[str, Any] = Field(default_factory=dict, description="Env-specific options (see `ragen envs show NAME`).")


class TrainEnvSpec(EnvRef):
    groups: int = Field(8, ge=1, description="P: distinct initial states (seeds) per training step.")
    group_size: int = Field(16, ge=1, description="N: rollouts per initial state.")
    seed: int = Field(10000, ge=0, description="First training seed; each step takes the next P seeds.")


class ValSpec(Section):
    envs: list[EnvRef] = Field(default_factory=list, description="Validation envs; empty means the training env.")
    episodes: int = Field(64, ge=1, description="Validation episodes per env (one per seed).")
    seed: int = Field(123, ge=0, description="First validation seed; validation always uses the same seeds.")
    every: int = Field(10, ge=0, description="Validate every this many steps (and before the first and after the last); 0 turns it off.")
    temperature: float = Field(0.5, ge=0.0, description="Sampling temperature for validation; 0 means greedy.")


class EnvSpec(Section):
    train: TrainEnvSpec = Field(description="The environment the policy is trained on.")
    val: ValSpec = Field(default_factory=ValSpec, description="Fixed-seed validation.")


# ------------------------------------------------------------------------------------- rollout
class RolloutSpec(Section):
    backend: Literal["vllm", "hf", "auto"] = Field(
        "auto", description="Generation engine: vLLM, transformers `generate`, or vLLM when it works else HF."
    )
    max_turns: int = Field(5, ge=1, description="Most model turns per episode.")
    max_actions_per_turn: int = Field(5, ge=1, description="Most actions taken from one reply; extra actions are dropped.")
    max_tokens_per_turn: int = Field(128, ge=1, description="Most tokens the model may generate in one turn.")
    temperature: float = Field(1.0, ge=0.0, description="Sampling temperature for training rollouts.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling threshold for training rollouts.")
    think: bool = Field(True, description="Ask for `<think>...</think><answer>...</answer>`; false asks for the answer only.")
    think_tags: Tags = Field(("<think>", "</think>"), description="Opening and closing tag of the reasoning (the paper's "
                             "by default; a model's own, e.g. `[\"<reasoning>\", \"</reasoning>\"]`): pre-filled, asked for and parsed.")
    answer_tags: Tags = Field(("<answer>", "</answer>"), description="Opening and closing tag of the answer, likewise.")
    action_sep: str = Field("||", min_length=1, description="Separator between actions inside one answer.")
    answer_example: Literal["none", "first", "random", "random-per-rollout"] = Field(
        "none", description="What the format line shows as the answer: `none` keeps the reference's "
        "`[your answer]` placeholder, which small models copy literally; `first` shows the env's first "
        "action names (e.g. `<answer> Left || Down </answer>`), which a small model also copies, state or "
        "not; `random` shows action names drawn afresh for each initial state and turn, so copying the "
        "example is a uniform random policy; `random-per-rollout` also draws them afresh for each of a group's N "
        "copies, so copies that copy score differently and GRPO's in-group comparison rates the moves.",
    )
    answer_example_steps: int | None = Field(
        None, ge=1, description="Make the answer example a training scaffold that fades out: in training step "
        "s <= this many it shows in the first ceil(P x (1 - (s-1)/steps)) of the P groups (all in step 1), later "
        "steps and every validation show `[your answer]`, so validation measures the policy without it. Omit "
        "to show the example everywhere, validation included.",
    )
    format_penalty: float = Field(-0.1, le=0.0, description="Reward added for each turn whose reply does not parse or runs an invalid action.")
    context_window: int | None = Field(None, ge=1, description="Keep only the last k turns in the prompt; omit to keep all.")
    update_context: Literal["full", "window"] = Field(
        "full", description="What the update conditions each reply on. full: the episode is one sequence with its "
        "whole history (with a context_window the first ratio of later turns is then pi(a | history) / "
        "mu(a | window), not 1). window: one training row per turn, exactly the windowed prompt the sampler saw plus "
        "its reply (RAGEN-2's limited_multi_turn; single_turn with context_window 1), so no training row "
        "grows with the episode (each repeats the system message and instruction); advantages still come from the "
        "whole episode, and train.mini_batch and micro_batch then count turn rows. Needs context_window.",
    )
    parity_threshold: float = Field(
        0.05, gt=0.0, description="Root-mean-square log-prob gap between trainer and rollout engine after a "
        "weight sync, over the probe's tokens, that always passes; a larger gap passes only while it stays within "
        "parity_noise_factor x the gap the same weights gave before the update, scaled to how sure the new "
        "weights are of the probe's tokens (rollout/parity.py).",
    )
    parity_noise_factor: float = Field(
        3.0, ge=1.0, description="A sync fails when its rms gap exceeds parity_threshold and this many times the "
        "rms gap measured before the update with the same weights on both sides (the kernels' own disagreement: "
        "~1e-6 nats in fp32, 0.01-0.3 in bf16), scaled up by rms(1 - p) of the probe's tokens under the new "
        "weights over the old (a kernel's error on a token shrinks as the model grows sure of it). A sync also "
        "fails when the engine is nearer the old weights than the new ones, once the update moved the probe's "
        "log-probs far enough above that noise (and fp32's resolution, 1e-6) to tell.",
    )
    parity_tokens: int = Field(
        64, ge=1, description="Sampled tokens the parity probe compares (trajectories from the start of the "
        "batch, each cut to its parity_window, until at least this many): enough for its rms gaps to be stable "
        "(rollout/parity.py).",
    )
    parity_window: int = Field(
        16, ge=0, description="Tokens of each probe trajectory that trainer and engine score: its last "
        "parity_window, the sampled tokens among them compared (0: the whole trajectory). Both sides score the "
        "same cut sequence, so the check is unchanged; the engine scores every position it is given "
        "(prompt_logprobs), and a bandit trajectory's ~330-token prompt made the probe half of a step.",
    )
    prompt_allowance: int = Field(
        512, ge=0, description="Tokens reserved for the first prompt and all env observations when checking that "
        "max_turns x max_tokens_per_turn fits model.max_context.",
    )
    vllm_kv_cache_gib: int = Field(2, ge=1, description="KV cache size for vLLM on CPU, in whole GiB.")
    sleep: OnOff = Field(
        "auto", description="Put the vLLM engine to sleep during each update (vLLM sleep mode, level 1: its KV "
        "cache freed, its weights moved to host memory) and wake it before the weight sync, so DeepSpeed has the "
        "GPU memory vLLM held. auto: on with vLLM on CUDA, off on CPU (vLLM's sleep mode is CUDA-only).",
    )
    lora_sync: Literal["auto", "merged", "adapter"] = Field(
        "auto", description="With LoRA and vLLM, how the rollout engine gets the new policy after each update: "
        "merged (the adapter folded into full weights, pushed like full fine-tuning; vLLM runs without LoRA "
        "kernels), adapter (a new LoRARequest; a small transfer), auto (merged on CPU, where vLLM's LoRA "
        "made bandit rollouts 4x slower, adapter on GPU)."
    )
    max_staleness: int = Field(
        0, ge=0, description="Rollouts that overlap the update (docs/training.md). 0: the sequential loop (rollouts, "
        "then the update, then the sync). k >= 1: while the trainer updates on this step's trajectories, the engine "
        "generates the next step's with the weights it served before the update, so each update trains on "
        "trajectories one policy version old, corrected by the truncated importance weights (algorithm.rollout_is, "
        "on whatever the precision); a batch drawn before a health rollback is handled by `stale`. vLLM only; the engine does not sleep during the update.",
    )
    stale: Literal["drop", "correct"] = Field(
        "drop", description="A stale batch: drawn before a health rollback (by weights the run abandoned, whatever its "
        "lag) or more than max_staleness policy versions old (one batch is in flight, so only a rollback makes one): "
        "drop (counted in sync/stale_dropped_frac; the step rolls out a fresh batch, the next seeds, with the current "
        "weights) or correct (train on it with its importance correction).",
    )


# ----------------------------------------------------------------------------------- algorithm
class FilterSpec(Section):
    strategy: Literal["top_k", "top_k_abs", "top_p", "min_p"] = Field(
        "top_k", description="How groups are chosen (RAGEN-2's rollout_filter_strategy): top_k keeps keep_ratio of "
        "the groups; top_k_abs keeps `value` groups; top_p keeps the best groups until their scores sum to `value` of "
        "the total (top_p_mode linear) or their softmax mass reaches `value` (softmax); min_p keeps groups scoring at "
        "least `value` x the best. top_p and min_p, and include_zero false, keep a varying number of groups; a step "
        "that keeps none makes no update.",
    )
    metric: Literal["reward_std", "reward", "reward_sum", "entropy", "entropy_std", "length"] = Field(
        "reward_std", description="Score of a group (RAGEN-2's rollout_filter_metric): std, mean or sum of its N "
        "trajectory rewards; mean or std of their entropies (estimated by the mean of -log p of the sampled tokens "
        "under the sampler); or their mean length in sampled tokens.",
    )
    keep_ratio: float = Field(0.25, gt=0.0, le=1.0, description="Fraction of groups kept per step by top_k (1.0 keeps all).")
    value: float | None = Field(
        None, gt=0.0, description="The threshold of top_k_abs (a group count), top_p and min_p (in (0, 1]); "
        "top_k uses keep_ratio instead.",
    )
    reward: Literal["task", "shaped"] = Field(
        "task", description="Which reward the reward metrics read: task (the env's own reward, without format penalty "
        "or progress shaping) or shaped (the reward the advantages use). Ranking by the shaped reward keeps the "
        "groups with the most shaping and penalty variance, not the most task signal.",
    )
    direction: Literal["top", "bottom"] = Field(
        "top", description="Keep the highest-scoring groups (top; RAGEN-2 largest) or the lowest (bottom; smallest).")
    include_zero: bool = Field(
        True, description="Whether groups scoring exactly zero (|score| <= 1e-10, e.g. all N rewards equal) can be kept.")
    top_p_mode: Literal["linear", "softmax"] = Field("linear", description="How top_p adds up scores (see strategy).")
    selection_eps: float = Field(0.01, ge=0.0, description="top_p linear: the threshold is value x sum(scores) minus this.")
    empty_stop_steps: int = Field(
        5, ge=0, description="Stop the run after this many consecutive steps in which the filter kept no group "
        "(RAGEN-2's rollout_filter_empty_stop_steps); 0 never stops.",
    )


class AlgorithmSpec(Section):
    preset: Literal["starpo", "starpo-s"] | None = Field(
        "starpo-s", description="Start from the paper's values; explicit fields in this section override them."
    )
    adv_estimator: Literal["gae", "grpo", "reinforce", "gigpo"] = Field(
        "gae", description="gae: critic + GAE (PPO); grpo: group-normalised outcome; reinforce: leave-one-out baseline; "
        "gigpo: GiGPO (arXiv 2505.10978), grpo's episode advantage plus a step advantage over the group's turns that "
        "saw the same observation (anchor state), each turn's return normalised within its anchor group.",
    )
    gamma: float = Field(1.0, ge=0.0, le=1.0, description="Discount factor (GAE gamma).")
    lam: float = Field(1.0, ge=0.0, le=1.0, description="GAE lambda.")
    turn_rewards: bool = Field(False, description="Place each turn's reward on its last token; false puts the episode return on the final token. With grpo: turn-level advantages, each turn compared within its group by its return from that turn on.")
    bi_level_gae: bool = Field(False, description="Turn-level GAE across turns, then token-level GAE inside turns (needs turn_rewards).")
    high_level_gamma: float = Field(0.95, ge=0.0, le=1.0, description="Turn-level discount used by bi-level GAE.")
    grpo_norm_std: bool = Field(True, description="GRPO and GiGPO: divide by the group's reward std (false: subtract the mean only).")
    gigpo_step_weight: float = Field(1.0, ge=0.0, description="GiGPO: weight of the step (anchor-state) advantage added to the episode advantage (verl-agent's step_advantage_w); its step returns are discounted by gamma.")
    clip_low: float = Field(0.2, ge=0.0, lt=1.0, description="PPO lower clip: ratio >= 1 - clip_low.")
    clip_high: float = Field(0.28, ge=0.0, description="PPO upper clip: ratio <= 1 + clip_high (DAPO clip-higher).")
    dual_clip_c: float | None = Field(3.0, gt=1.0, description="Dual-clip bound for negative advantages; omit to turn off.")
    kl_coef: float = Field(0.0, ge=0.0, description="Weight of the KL-to-reference term in the loss; 0 loads no reference model.")
    kl_estimator: Literal["k1", "k3", "low_var_kl"] = Field(
        "low_var_kl", description="KL estimator of the loss term: low_var_kl (k3 clamped, verl's default for a KL "
        "loss) or k3. Used as a loss on samples of pi, both give the gradient of KL(pi_ref || pi), which pulls the "
        "policy toward the reference. k1 is refused with kl_coef > 0: as a loss its expected gradient is zero.",
    )
    entropy_coef: float = Field(0.001, ge=0.0, description="Weight of the entropy bonus.")
    loss_agg: Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"] = Field(
        "token-mean", description="How token losses become one number."
    )
    value_clip: float | None = Field(0.5, gt=0.0, description="Critic value clipping range; omit to turn off.")
    filter: FilterSpec = Field(default_factory=FilterSpec, description="StarPO-S rollout filtering (by in-group reward std unless metric says otherwise).")
    online_k: int = Field(1, ge=1, description="Rollout reuse: each rollout batch feeds this many consecutive updates.")
    ppo_epochs: int = Field(1, ge=1, description="Passes over the kept batch within one update.")
    mini_batches: int = Field(
        1, ge=1, description="Optimizer steps per pass: the kept batch is cut into this many mini-batches (the "
        "reference's ppo_mini_batch_size = train batch / 4). With more than one, every mini-batch after the first "
        "is trained on moved weights, so the PPO ratio leaves 1 and clip_low / clip_high act; with one (and "
        "online_k = ppo_epochs = 1) the ratio is exactly 1 and clipping never acts. train.mini_batch, when set, wins.",
    )
    rollout_is: OnOff = Field(
        "auto", description="Weight each token's policy loss by the importance ratio pi_old / pi_sampler between "
        "the trainer's old log-probs and the rollout engine's sampling log-probs, at rollout_is_level and "
        "rollout_is_mode (by default the truncated token ratio min(pi_old / pi_sampler, rollout_is_cap): verl's and "
        "TRL's vLLM importance-sampling correction): the engine, not the trainer, drew the tokens, and in bf16 the "
        "two differ. auto: on in bf16 and fp16, off in fp32 (where they agree to ~1e-6).",
    )
    rollout_is_cap: float = Field(
        2.0, gt=1.0, description="Upper bound of the rollout importance weight (TRL's and verl's default): truncate "
        "clamps the weight at it, mask drops what lies above it.")
    rollout_is_level: Literal["token", "sequence", "geometric"] = Field(
        "token", description="Which ratio weighs a token (verl's rollout_is_level): token, its own; sequence, its "
        "reply's, the product of the reply's token ratios (unbiased for the reply, high variance); geometric, "
        "exp(mean log ratio) over the reply (a per-token average; biased, low variance).",
    )
    rollout_is_mode: Literal["truncate", "mask"] = Field(
        "truncate", description="What a weight outside the band does (verl's rollout_is_mode): truncate, "
        "min(w, rollout_is_cap) (truncated IS); mask, weight 0 outside [rollout_is_lower, rollout_is_cap] and w "
        "inside (IcePop, arXiv 2510.18855): the token, or the whole reply at the sequence levels, leaves the policy "
        "loss (it stays in the token-mean's denominator, as in IcePop).",
    )
    rollout_is_lower: float | None = Field(
        None, gt=0.0, lt=1.0, description="Lower end of the mask mode's band; omit for 1 / rollout_is_cap (verl's "
        "default). Below 1, so that a token the engine and the trainer agree on is always kept.",
    )


# ------------------------------------------------------------------------------------- train
class TrainSpec(Section):
    steps: int = Field(200, ge=1, description="Training steps (one rollout batch each).")
    lr_actor: float = Field(1e-6, gt=0.0, description="Actor learning rate.")
    lr_critic: float = Field(1e-5, gt=0.0, description="Critic learning rate.")
    schedule: Literal["constant", "linear", "cosine"] = Field("constant", description="Learning-rate schedule after warm-up.")
    warmup_steps: int = Field(0, ge=0, description="Optimizer steps of linear warm-up.")
    weight_decay: float = Field(0.01, ge=0.0, description="AdamW weight decay.")
    mini_batch: int | None = Field(
        None, ge=1, description="Trajectories per optimizer step; omit to cut the kept batch into algorithm.mini_batches parts."
    )
    micro_batch: int = Field(4, ge=1, description="Trajectories per forward/backward pass per process.")
    gradient_checkpointing: bool = Field(
        False, description="Recompute each layer's activations in the backward pass instead of keeping them "
        "(transformers' gradient checkpointing, non-reentrant): less memory for long trajectories, about one more "
        "forward of compute. Same gradients up to float rounding. The update's forward then runs every row's prompt "
        "itself (share_prefix needs the KV cache, which checkpointing turns off); scoring still shares it.",
    )
    share_prefix: bool = Field(
        True, description="Run the prompt that the rollouts of one initial state share once per micro-batch "
        "(its KV cache, with gradients, is reused by every row) instead of once per row. Same losses and "
        "gradients up to float rounding; N times less prompt compute."
    )
    grad_clip: float = Field(1.0, gt=0.0, description="Gradient norm clipping.")
    seed: int = Field(42, ge=0, description="Seed for torch, sampling and initialisation.")


class DeepSpeedSpec(Section):
    zero_stage: Literal[0, 1, 2, 3] = Field(0, description="ZeRO stage: 0, 1 or 2 (3 is refused until its partitioned parameters are gathered for the weight sync, LoRA merge, checkpoints and export).")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto", description="Training precision (rollouts use the same dtype). auto: bf16 on a GPU with bf16 (compute "
        "capability >= 8.0) and on a CPU with native bf16 matmul (avx512_bf16 or amx_bf16), fp32 otherwise; "
        "`ragen train --dry-run` shows the choice and why.",
    )
    offload: Literal["none", "cpu"] = Field("none", description="Offload optimizer state to CPU (ZeRO >= 1).")
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: CUDA when available, else CPU.")
    nodes: int = Field(1, ge=1, description="Machines in the job.")
    procs_per_node: int = Field(1, ge=1, description="Processes per machine (GPUs, or CPU workers).")
    hostfile: str | None = Field(
        None, description="DeepSpeed hostfile (`host slots=K` lines) for several nodes; relative to the directory ragen runs in."
    )
    master_port: int = Field(29500, ge=1024, le=65535, description="Rendezvous port of rank 0 for multi-process jobs.")

    @property
    def world(self) -> int:
        """Processes in the job: nodes x procs_per_node (the one definition every module reads)."""
        return self.nodes * self.procs_per_node


class CheckpointSpec(Section):
    every: int = Field(50, ge=0, description="Save every this many steps (and at the end); 0 saves only at the end.")
    keep: int = Field(2, ge=1, description="Keep the newest this many checkpoints.")
    keep_best: str | None = Field(
        "auto", description="Also keep the checkpoint of the step with the best value of this validation metric "
        "(a new best is saved when it is measured, and never pruned): `checkpoints/best` links to it, and "
        "`ragen eval --checkpoint RUN_DIR/checkpoints/best` and `ragen export` read it. auto: the first validation "
        "env's success (`val/<env>/success`); null: keep only the newest `keep`.",
    )


class OutputSpec(Section):
    dir: str = Field("runs", description="Parent of run directories; the run writes to DIR/NAME.")


# ---------------------------------------------------------------------------------------- run
class RunSpec(Section):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=100,
                      description="Run name; the run directory is output.dir/name (at most 100 characters: a file name).")
    model: ModelSpec = Field(default_factory=ModelSpec, description="The policy model.")
    env: EnvSpec = Field(description="Training and validation environments.")
    rollout: RolloutSpec = Field(default_factory=RolloutSpec, description="Multi-turn rollout settings.")
    warm_start: WarmStartSpec | None = Field(
        None, description="Supervised fine-tuning on demonstrations before RL, in the same run and engine; omit "
        "to start RL from the model as it is. Needed when the base model never earns the reward: measure first "
        "(`ragen eval --model NAME --spec SPEC --samples 4 --temperature 1.0`); success and pass@4 of 0 give RL "
        "nothing to raise (docs/training.md, Warm start).",
    )
    algorithm: AlgorithmSpec = Field(default_factory=AlgorithmSpec, description="StarPO / StarPO-S update rule.")
    train: TrainSpec = Field(default_factory=TrainSpec, description="Optimisation schedule.")
    deepspeed: DeepSpeedSpec = Field(default_factory=DeepSpeedSpec, description="DeepSpeed engine and launch layout.")
    checkpoint: CheckpointSpec = Field(default_factory=CheckpointSpec, description="Checkpointing.")
    monitor: MonitorSpec = Field(default_factory=MonitorSpec, description="Logging and health monitoring.")
    output: OutputSpec = Field(default_factory=OutputSpec, description="Where runs are written.")
