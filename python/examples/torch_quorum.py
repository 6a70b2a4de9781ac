#!/usr/bin/env python3
"""Fault-tolerant data parallelism with a per-step quorum, as torchft builds
it, on gradwire's torch backend: a replica that dies is dropped at the step
it died in, a replacement joins at whatever step the others are at, and no
step is lost or applied twice.

    gradwire launch --elastic -n 3 -- python3 torch_quorum.py --steps 600
    # while it runs, a replacement for a replica that died, with the job's
    # GW_ROOT and GW_JOB_TOKEN (gradwire launch prints neither: set
    # GW_JOB_TOKEN before launching, and --port P puts GW_ROOT on P+1):
    GW_ROOT=127.0.0.1:29501 GW_JOB_TOKEN=... python3 torch_quorum.py --join

Every step, on the group of the replicas in the quorum
(gradwire.torch.ProcessGroupGradwire, used directly as torchft uses its
process group):

  1. Quorum. group.grow(): the replicas agree that the step starts, and a
     process waiting in ProcessGroupGradwire.join() is admitted now, at this
     step. With nobody waiting it costs one small message to rank 0 and
     back. With --min-replicas N a smaller quorum waits, up to
     --quorum-wait seconds, for replacements before it goes on.
  2. Recovery. Whenever the group changed (grown or shrunk), its rank 0
     sends every replica the model, the momentum and the step number
     (torchft's "heal"): a joiner starts from the others' state, and
     replicas that disagreed about the step a failure interrupted (one's
     allreduce completed before the failure, another's did not) agree
     again, on rank 0's.
  3. Forward and backward on this replica's rows of the step's global
     batch (replica r of n takes rows r, r + n, ...: the batch is the same
     whatever the quorum's size), then one allreduce of the summed
     gradients, divided by the global batch.
  4. Commit. The optimizer steps only when the allreduce completed. When
     it failed (a replica died or hung: a gradwire.Error naming it), the
     step is not applied (torchft's should_commit), the survivors
     shrink() to a group of themselves and redo the step.

So the model after step k is the one an unbroken run reaches, up to the
order of the floating-point sums (the test, tests/python/quorum_test.py,
compares them), and every replica's model is the same, bit for bit.

The task: a small MLP (32-64-1) learns a fixed random teacher network's
outputs (mean squared error) on 4096 synthetic inputs, SGD with momentum.
The last line each replica prints is a JSON summary: its steps, final loss
over the whole data set, the SHA-256 of its parameters, and the quorum's
changes it saw.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import torch

import gradwire
import gradwire.torch as gwt

ROWS, FEATURES, HIDDEN = 4096, 32, 64
# What a lost replica makes a call raise: the connection to it closed, a
# timeout waiting for it, or another replica's abort naming it. Anything
# else (a bad argument, an unsupported call) is a bug, not a failure.
LOST = (gradwire.RemoteError, gradwire.TimeoutError, gradwire.AbortedError)


def data():
    """The data set, the same on every replica (seeded)."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(ROWS, FEATURES, generator=g)
    teacher = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    with torch.no_grad():
        for p in teacher.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
        y = teacher(x) + 0.01 * torch.randn(ROWS, 1, generator=g)
    return x, y


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1))


class Replica:
    """One replica's model, momentum and step, packed for recovery."""

    def __init__(self, net, lr, momentum):
        self.net = net
        self.params = list(net.parameters())
        self.velocity = [torch.zeros_like(p) for p in self.params]
        self.step = 0
        self.lr, self.momentum = lr, momentum

    def pack(self):
        flat = [p.detach().reshape(-1) for p in self.params] + [v.reshape(-1) for v in self.velocity]
        return torch.cat(flat), torch.tensor([self.step], dtype=torch.int64)

    def unpack(self, flat, step):
        offset = 0
        with torch.no_grad():
            for t in self.params + self.velocity:
                n = t.numel()
                t.copy_(flat[offset : offset + n].view_as(t))
                offset += n
        self.step = int(step[0])

    def apply(self, grads):
        with torch.no_grad():
            for p, v, g in zip(self.params, self.velocity, grads):
                v.mul_(self.momentum).add_(g)
                p.sub_(self.lr * v)
        self.step += 1

    def digest(self):
        return hashlib.sha256(self.pack()[0].numpy().tobytes()).hexdigest()


def recover(group, replica):
    """Step 2: rank 0's state to every replica of the group."""
    flat, step = replica.pack()
    group.broadcast([flat]).wait()
    group.broadcast([step]).wait()
    if group.rank() != 0:
        replica.unpack(flat, step)


def local_gradients(replica, x, y, batch, rank, size):
    """Step 3's local half: the gradients of the summed squared error over
    this replica's rows of the step's batch, flattened."""
    start = (replica.step * batch) % ROWS
    rows = torch.arange(start + rank, start + batch, size) % ROWS
    for p in replica.params:
        p.grad = None
    loss = ((replica.net(x[rows]) - y[rows]) ** 2).sum()
    loss.backward()
    return torch.cat([p.grad.reshape(-1) for p in replica.params])


def unflatten(flat, like):
    out, offset = [], 0
    for p in like:
        out.append(flat[offset : offset + p.numel()].view_as(p))
        offset += p.numel()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=96, help="the global batch, split over the quorum")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--min-replicas", type=int, default=1, help="a smaller quorum waits for joiners")
    ap.add_argument("--quorum-wait", type=float, default=60.0, help="seconds it waits, at most")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before a silent replica is dropped")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--join", action="store_true", help="a replacement: join the running job")
    args = ap.parse_args()

    torch.set_num_threads(1)
    x, y = data()
    replica = Replica(model(), args.lr, args.momentum)
    events = []
    # A joiner comes in where the members are after their quorum's grow():
    # its first step starts at the recovery.
    joining = args.join
    if joining:
        group = gwt.ProcessGroupGradwire.join(wait=args.quorum_wait + 60, timeout=args.timeout)
    else:
        # The first quorum: every replica gradwire launch started (its
        # GW_RANK, GW_SIZE, GW_ROOT and GW_JOB_TOKEN; torchrun's RANK and
        # WORLD_SIZE do as well).
        rank = int(os.environ.get("GW_RANK", os.environ.get("RANK", "0")))
        size = int(os.environ.get("GW_SIZE", os.environ.get("WORLD_SIZE", "1")))
        comm = gradwire.Comm(rank=rank, size=size, timeout=args.timeout)
        group = gwt.ProcessGroupGradwire(None, rank, size, timeout=args.timeout, comm=comm)
    retired = []  # groups left behind, shut down once the new one has run a step

    while replica.step < args.steps:
        try:
            # 1. Quorum (and the wait for --min-replicas).
            changed, joining = joining, False
            waits = max(1, int(args.quorum_wait / 0.1)) if group.size() < args.min_replicas else 1
            # A quorum of one has no referee to admit anyone (gw_comm_grow):
            # it goes on alone.
            for attempt in range(0 if changed or group.size() == 1 else waits):
                grown = group.grow()
                if grown is not None:
                    retired.append(group)
                    group, changed = grown, True
                    events.append({"step": replica.step, "event": "grown", "size": group.size()})
                    print("step %d: quorum grown to %d replicas" % (replica.step, group.size()), flush=True)
                if group.size() >= args.min_replicas:
                    break
                time.sleep(0.1)
            # 2. Recovery.
            if changed:
                recover(group, replica)
                if args.join and not events:
                    events.append({"step": replica.step, "event": "joined", "size": group.size()})
                    print("joined as replica %d of %d at step %d" % (group.rank(), group.size(), replica.step),
                          flush=True)
            # 3. Gradients.
            flat = local_gradients(replica, x, y, args.batch, group.rank(), group.size())
            group.allreduce([flat]).wait()
        except LOST as e:
            # 4. Not committed: a smaller quorum redoes the step.
            print("step %d: not committed (%s: %s); shrinking" % (replica.step, type(e).__name__, e), flush=True)
            retired.append(group)
            group = group.shrink()
            events.append({"step": replica.step, "event": "shrunk", "size": group.size(), "culprit": e.culprit})
            print("step %d: quorum shrunk to %d replicas" % (replica.step, group.size()), flush=True)
            recover(group, replica)
            continue
        replica.apply(unflatten(flat / args.batch, replica.params))
        while retired:
            retired.pop().shutdown()
        if args.log_every and replica.step % args.log_every == 0:
            print("step %d of %d, %d replicas" % (replica.step, args.steps, group.size()), flush=True)

    with torch.no_grad():
        loss = float(((replica.net(x) - y) ** 2).mean())
    summary = {"rank": group.rank(), "size": group.size(), "steps": replica.step, "loss": loss,
               "params_sha256": replica.digest(), "events": events}
    print("quorum summary " + json.dumps(summary), flush=True)
    group.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
