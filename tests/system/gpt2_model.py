"""Hugging Face GPT2LMHeadModel's math in float64 numpy (gelu_new, layer norms with biases, Conv1D
projections, learned positions, the head tied to the word embeddings), forward and backward,
written from the HF tensors the trainer exports (not from the trainer's layer code). Used by
llama_reference.py for a config.json whose model_type is gpt2, with the same batches, AdamW and
clipping as the Llama reference."""
import numpy as np

from reference_loss import cross_entropy

GELU_SCALE = np.sqrt(2.0 / np.pi)
GELU_CUBIC = 0.044715


def layer_norm_forward(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    r = 1.0 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mean) * r
    return w * xhat + b, (xhat, r)


def layer_norm_backward(dy, w, saved):
    xhat, r = saved
    C = xhat.shape[-1]
    dxhat = dy * w
    dw = (dy * xhat).reshape(-1, C).sum(0)
    db = dy.reshape(-1, C).sum(0)
    dx = r * (dxhat - dxhat.mean(-1, keepdims=True)
              - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, dw, db


def gelu_new(f):
    t = np.tanh(GELU_SCALE * (f + GELU_CUBIC * f ** 3))
    return 0.5 * f * (1.0 + t), t


def gelu_new_backward(dg, f, t):
    return dg * (0.5 * (1.0 + t)
                 + 0.5 * f * (1.0 - t * t) * GELU_SCALE * (1.0 + 3.0 * GELU_CUBIC * f * f))


class Gpt2:
    def __init__(self, tensors, config):
        if config.get("activation_function", "gelu_new") != "gelu_new":
            raise SystemExit("gpt2_model.py: only activation_function gelu_new")
        self.p = tensors
        self.H = config["n_head"]
        self.L = config["n_layer"]
        self.eps = config["layer_norm_epsilon"]

    def conv1d_backward(self, grads, name, x, dy):
        """y = x W + b (HF's Conv1D): adds W's and b's gradients, returns dx."""
        width = x.shape[-1]
        grads[name + ".weight"] += x.reshape(-1, width).T @ dy.reshape(-1, dy.shape[-1])
        grads[name + ".bias"] += dy.reshape(-1, dy.shape[-1]).sum(0)
        return dy @ self.p[name + ".weight"].T

    def norm_backward(self, grads, name, dy, saved):
        """The layer norm `name`'s backward: adds its weight's and bias's gradients, returns dx."""
        dx, dw, db = layer_norm_backward(dy, self.p[name + ".weight"], saved)
        grads[name + ".weight"] += dw
        grads[name + ".bias"] += db
        return dx

    def loss_and_grads(self, tokens, targets, document_end=None, positions=None):
        """Mean cross entropy over the targets that are not -100, and every tensor's gradient.
        document_end: an input eod at e hides keys <= e from every query > e of its sample.
        positions: (B, T) position ids (None: 0..T-1)."""
        p, B, T = self.p, tokens.shape[0], tokens.shape[1]
        C = p["transformer.wte.weight"].shape[1]
        H, D = self.H, C // self.H
        if positions is None:
            positions = np.tile(np.arange(T), (B, 1))
        mask = np.broadcast_to(np.triu(np.full((T, T), -np.inf), 1), (B, 1, T, T)).copy()
        if document_end is not None:
            for b, e in zip(*np.nonzero(tokens == document_end)):
                mask[b, 0, e + 1:, :e + 1] = -np.inf
        grads = {name: np.zeros_like(value) for name, value in p.items()}
        x = p["transformer.wte.weight"][tokens] + p["transformer.wpe.weight"][positions]
        saved = []
        for i in range(self.L):
            pre = f"transformer.h.{i}."
            h = x
            n1, ln1 = layer_norm_forward(h, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"], self.eps)
            qkv = n1 @ p[pre + "attn.c_attn.weight"] + p[pre + "attn.c_attn.bias"]
            q, k, v = (qkv[..., j * C:(j + 1) * C].reshape(B, T, H, D).transpose(0, 2, 1, 3)
                       for j in range(3))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(D) + mask
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
            x = h + ctx @ p[pre + "attn.c_proj.weight"] + p[pre + "attn.c_proj.bias"]
            h2 = x
            n2, ln2 = layer_norm_forward(h2, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"],
                                         self.eps)
            f = n2 @ p[pre + "mlp.c_fc.weight"] + p[pre + "mlp.c_fc.bias"]
            g, t = gelu_new(f)
            x = h2 + g @ p[pre + "mlp.c_proj.weight"] + p[pre + "mlp.c_proj.bias"]
            saved.append((n1, ln1, q, k, v, probs, ctx, n2, ln2, f, g, t))
        nf, lnf = layer_norm_forward(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"],
                                     self.eps)
        wte = p["transformer.wte.weight"]
        loss, dlogits = cross_entropy(nf @ wte.T, targets)  # (B, T, V) logits
        N = B * T
        grads["transformer.wte.weight"] += dlogits.reshape(N, -1).T @ nf.reshape(N, -1)
        dx = self.norm_backward(grads, "transformer.ln_f", dlogits @ wte, lnf)
        for i in reversed(range(self.L)):
            pre = f"transformer.h.{i}."
            n1, ln1, q, k, v, probs, ctx, n2, ln2, f, g, t = saved[i]
            # mlp: x = h2 + gelu(n2 W_fc + b_fc) W_proj + b_proj
            df = gelu_new_backward(self.conv1d_backward(grads, pre + "mlp.c_proj", g, dx), f, t)
            dn2 = self.conv1d_backward(grads, pre + "mlp.c_fc", n2, df)
            dx = dx + self.norm_backward(grads, pre + "ln_2", dn2, ln2)
            # attention: x = h + ctx W_proj + b_proj
            dctx = self.conv1d_backward(grads, pre + "attn.c_proj", ctx, dx)
            dctx = dctx.reshape(B, T, H, D).transpose(0, 2, 1, 3)
            dprobs = dctx @ v.transpose(0, 1, 3, 2)
            dv = probs.transpose(0, 1, 3, 2) @ dctx
            dscores = probs * (dprobs - (dprobs * probs).sum(-1, keepdims=True)) / np.sqrt(D)
            dq = dscores @ k
            dk = dscores.transpose(0, 1, 3, 2) @ q
            dqkv = np.concatenate([d.transpose(0, 2, 1, 3).reshape(B, T, C) for d in (dq, dk, dv)],
                                  -1)
            dn1 = self.conv1d_backward(grads, pre + "attn.c_attn", n1, dqkv)
            dx = dx + self.norm_backward(grads, pre + "ln_1", dn1, ln1)
        np.add.at(grads["transformer.wte.weight"], tokens, dx)
        np.add.at(grads["transformer.wpe.weight"], positions, dx)
        return loss, grads
