"""The RL trainer: ``RLTrainer.step(samples) -> metrics`` (one optimizer update per PPO epoch).

Contract of :meth:`RLTrainer.step`:

1. group and reject (incomplete / infra-failed groups, with counts); non-finite rewards or rollout
   logprobs raise :class:`~coworkenv.rl.advantages.NonFiniteError` before any forward pass;
2. run the configured estimator → per-token advantages (PPO: returns; ``A_t = R − V(s_t)``);
3. build units — tree-packed per rollout (``packing=True``; ``pack_scope="group"``: per rollout
   group, sharing the prompt all its rollouts start from) or one per branch;
4. recompute ``logπ_old`` in the trainer (no grad, model in eval mode so no dropout), the truncated
   IS weights against the rollout logprobs (mismatch statistics logged) and, if ``kl_beta > 0``,
   the reference logprobs (LoRA: adapters disabled; full: a frozen copy of the initial policy);
   with one PPO epoch and no value head π_old is taken from the update's own forward (detached),
   which is the same number and saves a pass;
5. ``ppo_epochs`` updates of PPO-clip with global loss coefficients (micro-batched; under
   torchrun each rank takes a shard of units and gradients are summed — all-reduced with
   ``distributed="replicate"``, reduce-scattered over FSDP2 shards with ``"fsdp"``,
   :mod:`coworkenv.rl.fsdp`); a non-finite loss or gradient skips the update (reported, weights
   untouched);
6. ``policy_version`` increments and ``on_weights(model, version)`` is called (rank 0; under FSDP
   with an unsharded copy of the policy, gathered by every rank).

If no group survives rejection the step is a no-op (``metrics["skipped"] == 1``).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from coworkenv.rl.advantages import AdvantageParams, estimate, get_estimator
from coworkenv.rl.attention import use_tree_attention
from coworkenv.rl.common import (
    MetricsLog,
    all_reduce_grads,
    all_reduce_scalar,
    build_policy,
    init_distributed,
    is_peft,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
    seed_all,
    train_mode_without_dropout,
)
from coworkenv.rl.config import RLConfig
from coworkenv.rl.fsdp import full_tensor, lockstep, plain_copy, shard
from coworkenv.rl.losses import loss_coefficients, ppo_clip_terms, truncated_is_weights, value_terms
from coworkenv.rl.packing import Unit, forward_logprobs, linear_units, micro_batches, packed_units
from coworkenv.trajectories.sample import TrainingSample

OnWeights = Callable[[Any, int], None]


@dataclass
class _Batch:
    """This rank's units for one step, with their step-global loss coefficients and old-pass data."""

    units: list[Unit]
    coefs: list[torch.Tensor]
    logp_old: list[torch.Tensor] = field(default_factory=list)
    refs: list[torch.Tensor] | None = None
    advs: list[torch.Tensor] = field(default_factory=list)
    rets: list[torch.Tensor] = field(default_factory=list)
    isw: list[torch.Tensor] = field(default_factory=list)
    rollout_lp: list[torch.Tensor] = field(default_factory=list)
    fused: bool = False


class _ISAcc:
    """Accumulates truncated-IS mismatch statistics over units (summed across ranks)."""

    def __init__(self) -> None:
        self.dl_sum = self.dl_max = self.clipped = self.wsum = 0.0
        self.n = 0

    def add(self, old: torch.Tensor, rollout: torch.Tensor, cap: float) -> torch.Tensor:
        w, st = truncated_is_weights(old, rollout, torch.ones_like(old), cap)
        self.dl_sum += st.mean_abs_dlogp * st.n_tokens
        self.dl_max = max(self.dl_max, st.max_abs_dlogp)
        self.clipped += st.frac_clipped * st.n_tokens
        self.wsum += st.mean_weight * st.n_tokens
        self.n += st.n_tokens
        return w

    def result(self) -> dict[str, float]:
        tot = max(all_reduce_scalar(float(self.n)), 1.0)
        return {
            "is/mean_abs_dlogp": all_reduce_scalar(self.dl_sum) / tot,
            "is/max_abs_dlogp": self.dl_max,
            "is/frac_clipped": all_reduce_scalar(self.clipped) / tot,
            "is/mean_weight": all_reduce_scalar(self.wsum) / tot,
        }


def _unit_coefficients(units: Sequence[Unit], cfg: RLConfig) -> list[torch.Tensor]:
    """Loss coefficients per unit's trained nodes, aggregated per rollout.

    A group-packed unit holds several rollouts' trained nodes: it is split by owner into one part
    per rollout before :func:`loss_coefficients`, and the parts are stitched back in node order.
    """
    parts: list[tuple[int, list[int], str]] = []  # (unit, positions in train_idx, rollout)
    for k, u in enumerate(units):
        by_owner: dict[str, list[int]] = {}
        for j, node in enumerate(u.train_idx):
            by_owner.setdefault(u.rollout_of(node), []).append(j)
        parts += [(k, js, rid) for rid, js in by_owner.items()]
    coefs = loss_coefficients(
        [torch.tensor([units[k].mask[units[k].train_idx[j]] for j in js]) for k, js, _ in parts],
        [torch.tensor([units[k].weight[units[k].train_idx[j]] for j in js]) for k, js, _ in parts],
        [rid for _, _, rid in parts],
        cfg.agg,
        normalizer=cfg.normalizer,
    )
    out = [torch.zeros(len(u.train_idx)) for u in units]
    for (k, js, _), c in zip(parts, coefs, strict=True):
        out[k][torch.tensor(js, dtype=torch.long)] = c.float()
    return out


class RLTrainer:
    def __init__(
        self,
        cfg: RLConfig,
        *,
        model: Any | None = None,
        tokenizer: Any | None = None,
        on_weights: OnWeights | None = None,
        log_metrics: bool = True,
    ) -> None:
        self.cfg = cfg
        self.rank, self.world_size = init_distributed()
        seed_all(cfg.run.seed)
        self.model, self.tokenizer = build_policy(cfg.model, model, tokenizer)
        self.model.eval()
        use_tree_attention(self.model)  # tree batches: causal trunk + chunked branch rows
        self.estimator = get_estimator(cfg.estimator)
        self.params = AdvantageParams(
            group_size=cfg.group_size,
            std_floor=cfg.std_floor,
            zero_tol=cfg.zero_tol,
            gigpo_omega=cfg.gigpo_omega,
            gdpo_weights=cfg.gdpo_weights,
        )
        self.extra: dict[str, torch.nn.Module] = {}
        if self.estimator.needs_value:
            hidden = int(self._base().config.hidden_size)
            head = torch.nn.Linear(hidden, 1)
            torch.nn.init.zeros_(head.weight)
            torch.nn.init.zeros_(head.bias)
            self.extra["value_head"] = head
        self.ref: Any = None
        if cfg.kl_beta > 0 and not is_peft(self.model):
            self.ref = copy.deepcopy(self.model).eval()
            for p in self.ref.parameters():
                p.requires_grad_(False)
        self.sharded = cfg.distributed == "fsdp" and self.world_size > 1
        self._root = shard(self.model) if self.sharded else None
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self._replicated: list[torch.nn.Parameter] = [] if self.sharded else list(self.trainable)
        for m in self.extra.values():
            self.trainable += list(m.parameters())
            self._replicated += list(m.parameters())
        o = cfg.optim
        self.optimizer = torch.optim.AdamW(
            self.trainable, lr=o.lr, betas=o.betas, weight_decay=o.weight_decay
        )
        self.on_weights = on_weights
        self.version = 0
        self.step_count = 0
        self.metrics = MetricsLog(cfg.run.out_dir, enabled=log_metrics and self.rank == 0)
        if cfg.run.resume:
            ck = latest_checkpoint(cfg.run.out_dir)
            if ck is not None:
                st = load_checkpoint(ck, self.model, self.optimizer, self.extra)
                self.step_count, self.version = int(st["step"]), int(st["version"])
            self.metrics.truncate(self.step_count)

    def _base(self) -> Any:
        return self.model.get_base_model() if is_peft(self.model) else self.model

    # ------------------------------------------------------------------ forward helpers

    def _logprobs(
        self, units: Sequence[Unit], *, grad: bool, hidden: bool = False, ref: bool = False
    ) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        found: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        train_mode_without_dropout(self.model, grad)
        for mb in self._micro_batches(units):
            if mb is None:  # FSDP lockstep: this rank has run out of units; a filler forward
                with torch.enable_grad() if grad else torch.no_grad():
                    self._forward([self._filler], hidden)
                continue
            with torch.enable_grad() if grad else torch.no_grad():
                if ref and is_peft(self.model):
                    with self.model.disable_adapter():
                        res = self._forward(mb, hidden)
                elif ref:
                    res = forward_logprobs(self.ref, mb, want_hidden=hidden)
                else:
                    res = self._forward(mb, hidden)
            found.update({id(u): r for u, r in zip(mb, res, strict=True)})
        return [found[id(u)] for u in units]

    def _forward(self, units: Sequence[Unit], hidden: bool) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """The policy's logprobs (and hidden states): through the FSDP root when sharded."""
        if self._root is not None:
            out: list[tuple[torch.Tensor, torch.Tensor | None]] = self._root(units, hidden)
            return out
        return forward_logprobs(self.model, units, want_hidden=hidden)

    def _micro_batches(self, units: Sequence[Unit]) -> list[list[Unit] | None]:
        """This rank's micro-batches; under FSDP padded (``None``) to the most any rank has, since
        every forward and backward gathers the shards collectively."""
        mbs = micro_batches(units, self.cfg.micro_batch_tokens)
        return lockstep(mbs) if self.sharded else list(mbs)

    def _value(self, hidden: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.extra["value_head"](hidden.float())[:, 0]
        return out

    # ------------------------------------------------------------------ the step

    def step(
        self, samples: Sequence[TrainingSample], *, infra_failed: Mapping[str, int] | None = None
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        metrics, units = self._prepare(samples, infra_failed)
        no_signal = (
            bool(units)
            and all(u.adv[i] == 0.0 for u in units for i in u.train_idx)
            and not self.estimator.needs_value
            and self.cfg.kl_beta == 0
        )
        if not units or no_signal:
            # every accepted group had equal rewards: the policy-gradient loss is exactly 0, so the
            # forward/backward pass would change nothing; say so instead of pretending to update
            metrics.update(skipped=1, policy_version=self.version, step_s=time.perf_counter() - t0)
            if no_signal:
                metrics["skipped_no_signal"] = 1
            self.metrics.log(self.step_count, metrics)
            return metrics
        cfg = self.cfg
        coefs = _unit_coefficients(units, cfg)
        units, coefs = self._with_signal(units, coefs, metrics)
        mine = list(range(self.rank, len(units), self.world_size))
        batch = _Batch([units[i] for i in mine], [coefs[i] for i in mine])
        self._filler = units[0]  # what a rank with fewer micro-batches runs under FSDP (loss × 0)
        metrics["tokens_forwarded"] = sum(len(u) for u in units)
        metrics.update(self._old_pass(batch))
        updated = 0
        for _epoch in range(cfg.ppo_epochs):
            res = self._update(batch)
            if res is None:
                metrics["skipped_nonfinite"] = metrics.get("skipped_nonfinite", 0) + 1
                continue
            updated += 1
            metrics.update(res)
        self.optimizer.zero_grad(set_to_none=True)
        if updated:
            self.step_count += 1
            self.version += 1
            if self.on_weights is not None:
                model = plain_copy(self.model) if self.sharded else self.model  # collective
                if self.rank == 0:
                    self.on_weights(model, self.version)
        metrics.update(policy_version=self.version, updates=updated, step_s=time.perf_counter() - t0)
        # the row first, then the checkpoint: a kill between the two redoes this step from the last
        # checkpoint, and the resumed trainer drops the row it is about to write again
        self.metrics.log(self.step_count, metrics)
        if updated and cfg.run.save_every and self.step_count % cfg.run.save_every == 0:
            self.save()
        return metrics

    def _with_signal(
        self, units: list[Unit], coefs: list[torch.Tensor], metrics: dict[str, Any]
    ) -> tuple[list[Unit], list[torch.Tensor]]:
        """Drop units whose trained tokens all have advantage 0 (a group with equal rewards): with
        no value head and no KL their loss and gradient are exactly 0, and the coefficients were
        already normalised over all units, so the step is unchanged — minus their forward pass."""
        if self.estimator.needs_value or self.cfg.kl_beta > 0:
            return units, coefs
        keep = [k for k, u in enumerate(units) if any(u.adv[i] != 0.0 for i in u.train_idx)]
        if len(keep) < len(units):
            metrics["units_without_signal"] = len(units) - len(keep)
        return [units[k] for k in keep], [coefs[k] for k in keep]

    def _prepare(
        self, samples: Sequence[TrainingSample], infra_failed: Mapping[str, int] | None
    ) -> tuple[dict[str, Any], list[Unit]]:
        cfg = self.cfg
        adv, report = estimate(cfg.estimator, samples, self.params, infra_failed=infra_failed)
        metrics: dict[str, Any] = dict(report.counts())
        accepted = [s for g in report.groups for r in g.rollouts for s in r.samples]
        drop = {s.rollout_id for s in accepted if len(s.token_ids) > cfg.max_len}
        if drop:
            accepted = [s for s in accepted if s.rollout_id not in drop]
            metrics["rollouts_too_long"] = len(drop)
        if not accepted:
            return metrics, []
        rewards = {s.rollout_id: s.reward for s in accepted}
        metrics.update(
            reward_mean=sum(rewards.values()) / len(rewards), rollouts=len(rewards), samples=len(accepted)
        )
        units = (
            packed_units(accepted, adv, scope=cfg.pack_scope) if cfg.packing else linear_units(accepted, adv)
        )
        return metrics, units

    def _old_pass(self, b: _Batch) -> dict[str, float]:
        """π_old, V_old and π_ref without grad; advantages, returns and truncated IS weights.

        With one PPO epoch and no value head, π_old equals π_θ at the update, so the no-grad pass is
        fused into the update forward (``logπ_old = logπ_θ.detach()``) — one forward fewer per step.
        """
        cfg = self.cfg
        needs_value = self.estimator.needs_value
        b.fused = cfg.ppo_epochs == 1 and not needs_value
        if cfg.kl_beta > 0:
            b.refs = [lp.detach() for lp, _ in self._logprobs(b.units, grad=False, ref=True)]
        old: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        if not b.fused:
            old = self._logprobs(b.units, grad=False, hidden=needs_value)
            b.logp_old = [lp.detach() for lp, _ in old]
        acc = _ISAcc()
        for k, u in enumerate(b.units):
            a = torch.tensor([u.adv[i] for i in u.train_idx], dtype=torch.float32)
            b.rets.append(a)
            b.rollout_lp.append(torch.tensor([u.logp_rollout[i] for i in u.train_idx], dtype=torch.float32))
            if b.fused:
                b.advs.append(a)
                continue
            h = old[k][1]
            if needs_value and h is not None:
                with torch.no_grad():
                    a = a - self._value(h)
            b.advs.append(a)
            b.isw.append(acc.add(b.logp_old[k], b.rollout_lp[k], cfg.is_cap))
        all_adv = torch.cat(b.advs) if b.advs else torch.zeros(1)
        out = {
            "adv_mean": float(all_adv.mean()) if all_adv.numel() else 0.0,
            "adv_abs_mean": float(all_adv.abs().mean()) if all_adv.numel() else 0.0,
        }
        return out if b.fused else {**out, **acc.result()}

    def _update(self, b: _Batch) -> dict[str, float] | None:
        """One optimizer update over the batch; ``None`` (weights untouched) if non-finite."""
        cfg = self.cfg
        needs_value = self.estimator.needs_value
        self.optimizer.zero_grad(set_to_none=True)
        totals = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "value_loss": 0.0}
        index = {id(u): i for i, u in enumerate(b.units)}
        acc = _ISAcc()
        # training mode (dropout off): activation checkpointing is only active in it
        train_mode_without_dropout(self.model, True)
        for mb in self._micro_batches(b.units):
            if mb is None:  # FSDP lockstep filler: gathers and reduces like the others, adds 0
                (lp, h) = self._forward([self._filler], needs_value)[0]
                filler = lp.sum() * 0.0
                if needs_value and h is not None:
                    filler = filler + self._value(h).sum() * 0.0
                filler.backward()
                continue
            res = self._forward(mb, needs_value)
            loss = torch.zeros(())
            for u, (lp, h) in zip(mb, res, strict=True):
                i = index[id(u)]
                if b.fused:
                    old = lp.detach()
                    isw = acc.add(old, b.rollout_lp[i], cfg.is_cap)
                else:
                    old, isw = b.logp_old[i], b.isw[i]
                terms, aux = ppo_clip_terms(
                    lp,
                    old,
                    b.advs[i],
                    clip_low=cfg.clip_low,
                    clip_high=cfg.clip_high,
                    is_weights=isw,
                    logp_ref=b.refs[i] if b.refs is not None else None,
                    kl_beta=cfg.kl_beta,
                )
                c = b.coefs[i]
                loss = loss + (c * terms).sum()
                totals["pg_loss"] += float((c * terms).sum().detach())
                totals["clip_frac"] += float((c * aux["clipped"]).sum())
                if "kl" in aux:
                    totals["kl"] += float((c * aux["kl"]).sum())
                if needs_value and h is not None:
                    vl = (c * value_terms(self._value(h), b.rets[i])).sum()
                    loss = loss + cfg.value_coef * vl
                    totals["value_loss"] += float(vl.detach())
            totals["loss"] += float(loss.detach())
            loss.backward()
        self.model.eval()
        all_reduce_grads(self._replicated)  # FSDP-sharded grads were reduce-scattered in backward
        totals = {k: all_reduce_scalar(v) for k, v in totals.items()}
        if b.fused:
            totals.update(acc.result())
        has_grad = any(p.grad is not None for p in self.trainable)
        gnorm = self._clip() if has_grad else 0.0
        if not math.isfinite(totals["loss"]) or not math.isfinite(gnorm):
            self.optimizer.zero_grad(set_to_none=True)
            return None
        self._apply_lr()
        self.optimizer.step()
        return {**totals, "grad_norm": gnorm}

    def _clip(self) -> float:
        """Clip to ``grad_clip`` by the global norm; returns the norm before clipping. FSDP's sharded
        gradients (DTensors) and the replicated ones (value head) are clipped separately by the
        joint norm, as torch cannot mix the two kinds in one call."""
        clip = self.cfg.optim.grad_clip
        if not self.sharded:
            return float(torch.nn.utils.clip_grad_norm_(self.trainable, clip))
        extra = {id(p) for p in self._replicated}
        groups = [
            [p for p in self.trainable if id(p) not in extra and p.grad is not None],
            [p for p in self._replicated if p.grad is not None],
        ]
        norms = [full_tensor(torch.nn.utils.get_total_norm([p.grad for p in g])) for g in groups if g]
        total = torch.stack([n.float() for n in norms]).norm()
        for g in groups:
            if g:
                torch.nn.utils.clip_grads_with_norm_(g, clip, total)
        return float(total)

    def _apply_lr(self) -> None:
        o = self.cfg.optim
        scale = min(1.0, (self.step_count + 1) / o.warmup_steps) if o.warmup_steps else 1.0
        for g in self.optimizer.param_groups:
            g["lr"] = o.lr * scale

    def export_model(self) -> Any | None:
        """The whole policy for saving or pushing: the model itself, or under FSDP an unsharded copy
        on rank 0 (None on other ranks; every rank must call it)."""
        return plain_copy(self.model) if self.sharded else self.model

    def save(self) -> Path | None:
        """A resumable checkpoint (rank 0). Not written under FSDP: its shards would need a
        distributed checkpoint, which this trainer does not write yet (the merged final is)."""
        if self.rank != 0 or self.sharded:
            return None
        return save_checkpoint(
            self.cfg.run.out_dir,
            self.step_count,
            self.model,
            self.optimizer,
            {"version": self.version, "kind": "rl", "estimator": self.cfg.estimator},
            extra=self.extra,
            keep=self.cfg.run.keep_checkpoints,
        )
