"""How gradwire's torch backend (gradwire/torch.py) takes torch's tensors
and reduce ops: the dtypes it reduces in place (a type gradwire has, or
its bits under gradwire's name), the bytes of any other type for calls
that only move data, and the errors that name what a tensor lacks."""

import torch
import torch.distributed as dist

# torch dtype -> the dtype override gradwire needs (None: the buffer's own).
_DTYPES = {
    torch.float32: None,
    torch.float64: None,
    torch.float16: None,
    torch.bfloat16: "bfloat16",
    torch.int64: None,
    torch.int32: None,
    torch.int8: None,
    torch.uint8: None,
}
# The dtypes newer torch versions have, passed as their bits with gradwire's
# name (torch 1.13 has none of them): the 8-bit floats as bytes, the
# unsigned integers as the signed integers of their size.
for _name, _gw, _view in (
    ("float8_e4m3fn", "float8_e4m3", torch.uint8),
    ("float8_e5m2", "float8_e5m2", torch.uint8),
    ("uint32", "uint32", torch.int32),
    ("uint64", "uint64", torch.int64),
):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _gw
# gradwire's dtype override -> the torch dtype whose numpy view carries the bits.
_BITS_VIEW = {"bfloat16": torch.int16, "float8_e4m3": torch.uint8, "float8_e5m2": torch.uint8,
              "uint32": torch.int32, "uint64": torch.int64}
_DTYPE_NAMES = "float32, float64, float16, bfloat16, int64, int32, int8, uint8 (and, where torch has them, float8_e4m3fn, float8_e5m2, uint32, uint64)"


def _op_name(op):
    """gradwire's name of a torch ReduceOp (ReduceOp objects compare with the enum values)."""
    R = dist.ReduceOp
    for name, value in (("sum", R.SUM), ("prod", R.PRODUCT), ("min", R.MIN), ("max", R.MAX)):
        if op == value:
            return name
    for name, attr in (("avg", "AVG"), ("band", "BAND"), ("bor", "BOR"), ("bxor", "BXOR")):
        if hasattr(R, attr) and op == getattr(R, attr):
            return name
    if hasattr(R, "PREMUL_SUM") and op == R.PREMUL_SUM:
        # torch keeps the factor of _make_nccl_premul_sum in C++, out of a
        # Python backend's reach; gradwire's own call takes it explicitly.
        raise ValueError(
            "gradwire backend: PREMUL_SUM's factor is not visible to a Python backend; scale the "
            "tensor by the factor and use SUM (the C API's gw_allreduce_premul takes the factor)"
        )
    raise ValueError(
        "gradwire backend: reduce op %s is not supported (gradwire has SUM, PRODUCT, MIN, MAX, AVG, "
        "BAND, BOR, BXOR)" % (op,)
    )


def _buffer(t, what):
    """(numpy view sharing t's memory, dtype override) for a tensor gradwire can use in place."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("gradwire backend: %s must be a tensor, not %s" % (what, type(t).__name__))
    _dense_cpu(t, what)
    if t.dtype not in _DTYPES:
        raise TypeError(
            "gradwire backend: %s has dtype %s, which gradwire does not have (it has %s)" % (what, t.dtype, _DTYPE_NAMES)
        )
    if not t.is_contiguous():
        raise ValueError("gradwire backend: %s must be contiguous (call .contiguous() first)" % what)
    t = t.detach()
    override = _DTYPES[t.dtype]
    if t.is_cuda:  # the tensor itself: gradwire takes its __cuda_array_interface__
        return (t.view(torch.int16) if override is not None else t), override
    if override is not None:
        return t.view(_BITS_VIEW[override]).numpy(), override
    return t.numpy(), None


def _first_cuda(tensors):
    """The first CUDA tensor in tensors (nested lists too), or None."""
    for t in tensors if isinstance(tensors, (list, tuple)) else [tensors]:
        if isinstance(t, (list, tuple)):
            found = _first_cuda(t)
            if found is not None:
                return found
        elif isinstance(t, torch.Tensor) and t.is_cuda:
            return t
    return None


def _host_only(t, what, calls):
    """Refuse a CUDA tensor where the backend still works on host copies."""
    if t.is_cuda:
        raise ValueError("gradwire backend: %s is on %s; %s take CPU tensors (use .cpu())" % (what, t.device, calls))


def _dense_cpu(t, what):
    if t.layout != torch.strided:
        raise TypeError(
            "gradwire backend: %s is a sparse tensor (layout %s); gradwire moves dense tensors only "
            "(call .to_dense() first)" % (what, t.layout)
        )
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError("gradwire backend: %s is on %s; gradwire moves CPU and CUDA tensors" % (what, t.device))


def _moved(t, what):
    """(numpy view sharing t's memory, dtype override, elements of the view per
    element of t) for calls that move data without reducing it (broadcast,
    gathers, scatters, all-to-all, messages): a type gradwire has is used as
    itself, any other (complex, bool, int16, ...) as its bytes, as gloo moves
    every type."""
    if isinstance(t, torch.Tensor) and t.dtype not in _DTYPES:
        _dense_cpu(t, what)
        if not t.is_contiguous():
            raise ValueError("gradwire backend: %s must be contiguous (call .contiguous() first)" % what)
        size = t.element_size()
        raw = t.detach().reshape(-1).view(torch.uint8)
        return (raw if raw.is_cuda else raw.numpy()), None, size
    buf, dt = _buffer(t, what)
    return buf, dt, 1


def _reducible(t, op):
    """t as gradwire reduces it: a complex tensor as its real and imaginary
    parts (torch allows only SUM and AVG on complex tensors, which act on
    each part alone)."""
    if t.is_complex():
        if op not in ("sum", "avg"):
            raise ValueError("gradwire backend: reduce op %s does not apply to complex tensors (SUM and AVG do)" % op)
        return torch.view_as_real(t)
    return t


def _one(tensors, what):
    if len(tensors) != 1:
        raise ValueError("gradwire backend: %s takes one tensor per process (got %d)" % (what, len(tensors)))
    return tensors[0]


def _same_kind(tensors, like, what):
    for t in tensors:
        if t.dtype != like.dtype or t.numel() != like.numel():
            raise ValueError(
                "gradwire backend: %s: every tensor must have %d elements of %s like the input (one has %d of %s)"
                % (what, like.numel(), like.dtype, t.numel(), t.dtype)
            )
