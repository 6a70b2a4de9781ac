"""DDP communication hooks on gradwire's gradient codecs.

    from gradwire.ddp_hooks import GradwireHookState, compression_hook
    state = GradwireHookState(codec="powersgd", powersgd_rank=4)       # or fp16, bf16, int8, topk
    ddp.register_comm_hook(state, compression_hook)
    ...
    torch.save({"model": ..., "hook": state.state_dict()}, path)       # error feedback too
    state.load_state_dict(torch.load(path)["hook"])

Each DDP bucket (a flat float32 gradient) goes through gradwire's
compressed allreduce (gw_allreduce_compressed: the average over ranks
through the codec), with its own gradwire.CompressState, keyed by the
bucket's index (PowerSGD: one per gradient in the bucket, of the
parameter's shape, since it approximates matrices): the error-feedback residual (what the codec did not send,
added to the next step's gradient), top-k's DGC velocity (momentum=m: then
use plain SGD, the momentum is in the hook), PowerSGD's factors. DDP
rebuilds its buckets after the first step; a bucket whose size changed gets
a fresh state.

The hook works under any backend: with a "gradwire" process group it uses
that group's communicator (and its completion thread); with another (gloo)
it makes its own gradwire communicator once, through the default group's
Store (every rank must create its GradwireHookState in the same order).

state_dict() holds each bucket's state image (CompressState.save()) and the
settings; load_state_dict() puts them back into the matching buckets when
DDP next calls the hook, so a job resumed from a checkpoint carries on with
the same residuals.
"""

import torch
import torch.distributed as dist

import gradwire

from .torch import ProcessGroupGradwire, gradwire_backend

__all__ = ["GradwireHookState", "compression_hook"]

_hook_groups = [0]  # how many private communicators this process made (their store prefix)


class GradwireHookState:
    """The hook's settings, communicator and per-bucket compression states.

    codec: "fp16", "bf16", "int8", "topk", "powersgd" (or "none");
    the rest (topk_ratio, momentum, powersgd_rank, error_feedback,
    warmup_steps, min_elements, bucket_elements, seed) go to
    gradwire.CompressState. process_group: the DDP model's group (default:
    the default group)."""

    def __init__(self, codec="fp16", process_group=None, **settings):
        if codec not in gradwire.CODECS:
            raise ValueError("unknown codec %r (gradwire has %s)" % (codec, ", ".join(gradwire.CODECS)))
        self.codec = codec
        self.settings = dict(settings)
        pg = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
        if gradwire_backend(pg) is not None:  # the group itself (torch 1.x), or its CPU backend (2.x)
            self.group = gradwire_backend(pg)
        else:
            rank, size = dist.get_rank(pg), dist.get_world_size(pg)
            store = dist.PrefixStore("gradwire_hook_%d" % _hook_groups[0], dist.distributed_c10d._get_default_store())
            _hook_groups[0] += 1
            self.group = ProcessGroupGradwire(store, rank, size, timeout=dist.default_pg_timeout)
        self.states = {}  # bucket index -> CompressState
        self._pending_images = {}  # bucket index -> image from load_state_dict

    def state_for(self, index, rows, cols=1):
        st = self.states.get(index)
        if st is None or st.shape != (rows, cols):
            st = gradwire.CompressState(rows, cols, codec=self.codec, **self.settings)
            image = self._pending_images.pop(index, None)
            if image is not None:
                st.load(image)
            self.states[index] = st
        return st

    def state_dict(self):
        return {
            "codec": self.codec,
            "settings": dict(self.settings),
            "buckets": {i: bytes(st.save()) for i, st in self.states.items()},
        }

    def load_state_dict(self, d):
        if d.get("codec") != self.codec or d.get("settings", {}) != self.settings:
            raise ValueError(
                "checkpoint's hook state is codec %r with %r; this state is %r with %r"
                % (d.get("codec"), d.get("settings"), self.codec, self.settings)
            )
        self.states = {}
        self._pending_images = dict(d.get("buckets", {}))


def compression_hook(state, bucket):
    """DDP comm hook: the bucket's average over ranks through gradwire's codec."""
    grad = bucket.buffer()
    if grad.dtype != torch.float32:
        raise TypeError("gradwire compression hook: buckets must be float32 (this one is %s)" % grad.dtype)
    pg = state.group
    if state.codec != "powersgd":
        cs = state.state_for(bucket.index(), grad.numel())
        send = grad.detach().numpy()
        work = pg._start(lambda: [pg.comm.iallreduce_compressed(cs, send)], grad)
        return work.get_future()
    # PowerSGD approximates matrices: each gradient in the bucket (a view
    # into it) with its own state of the parameter's shape, 2-D as
    # (shape[0], the rest); vectors go as columns (the codec sends those
    # whole).
    calls = []
    for i, g in enumerate(bucket.gradients()):
        rows = g.shape[0] if g.dim() > 0 else 1
        cs = state.state_for((bucket.index(), i), rows, g.numel() // rows if rows else 1)
        calls.append((cs, g.detach().numpy()))
    work = pg._start(lambda: [pg.comm.iallreduce_compressed(cs, send) for cs, send in calls], grad)
    return work.get_future()
