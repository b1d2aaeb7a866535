"""PyTorch formulations of every normd op, evaluated in float64 on the (rounded) inputs:
torch.nn.functional where it has the op (layer_norm, batch_norm, group_norm,
instance_norm, normalize), the published formulas otherwise (RMSNorm and its variants).
Inputs are float64 tensors; outputs are float64, unrounded."""
import math

import torch
import torch.nn.functional as F

from harness import TORCH_DTYPE


def residual_sum(x, skip, alpha):
    """docs/semantics.md: h = alpha * skip + x in fp32 (alpha an fp32 scalar), rounded once."""
    a = float(torch.tensor(alpha, dtype=torch.float32))
    return (a * skip + x).float().double()


def layer_norm(x, k=1, weight=None, bias=None, eps=1e-5, add_to_std=False):
    shape = x.shape[-k:]
    if not add_to_std:
        return F.layer_norm(x, shape, weight, bias, eps)
    dims = tuple(range(-k, 0))
    mu = x.mean(dim=dims, keepdim=True)
    std = x.var(dim=dims, unbiased=False, keepdim=True).sqrt()
    y = (x - mu) / (std + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x, weight=None, eps=1e-6, offset=0.0, fraction=1.0, add_to_rms=False,
             cast_before_weight=False, input_dtype="F32"):
    d = x.shape[-1]
    m = d if fraction >= 1 else max(1, min(d, math.ceil(fraction * d)))
    ms = x[..., :m].pow(2).mean(dim=-1, keepdim=True)
    r = 1 / (ms.sqrt() + eps) if add_to_rms else torch.rsqrt(ms + eps)
    y = x * r
    if cast_before_weight:  # Hugging Face LlamaRMSNorm: hidden.to(input_dtype) * weight
        y = y.to(TORCH_DTYPE[input_dtype]).double()
    if weight is not None:
        y = y * (torch.tensor(offset, dtype=torch.float32) + weight.float()).double()
    return y


def l2_norm(x, eps=1e-12):
    return F.normalize(x, p=2.0, dim=-1, eps=eps)


def _to_channels_first(x):
    return x.movedim(-1, 1)


def _from_channels_first(y):
    return y.movedim(1, -1)


def batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps, channels_last):
    """(y, batch mean, biased batch var, running_mean', running_var')."""
    xc = _to_channels_first(x) if channels_last else x
    rm = running_mean.clone() if running_mean is not None else None
    rv = running_var.clone() if running_var is not None else None
    y = F.batch_norm(xc, rm, rv, weight, bias, training, momentum, eps)
    dims = [0] + list(range(2, xc.dim()))
    mean = xc.mean(dim=dims)
    var = xc.var(dim=dims, unbiased=False)
    return (_from_channels_first(y) if channels_last else y), mean, var, rm, rv


def group_norm(x, groups, weight, bias, eps, channels_last):
    xc = _to_channels_first(x) if channels_last else x
    y = F.group_norm(xc, groups, weight, bias, eps)
    return _from_channels_first(y) if channels_last else y


def instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, eps, channels_last):
    xc = _to_channels_first(x) if channels_last else x
    rm = running_mean.clone() if running_mean is not None else None
    rv = running_var.clone() if running_var is not None else None
    y = F.instance_norm(xc, rm, rv, weight, bias, use_input_stats, 0.1, eps)
    return _from_channels_first(y) if channels_last else y
