"""Hugging Face GPT2LMHeadModel's math in float64 numpy (gelu_new, layer norms with biases, Conv1D
projections, learned positions, the head tied to the word embeddings), forward and backward,
written from the HF tensors the trainer exports (not from the trainer's layer code). Used by
llama_reference.py for a config.json whose model_type is gpt2, with the same batches, AdamW and
clipping as the Llama reference."""
import numpy as np

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
        logits = nf @ wte.T
        logits -= logits.max(-1, keepdims=True)
        e = np.exp(logits)
        softmax = e / e.sum(-1, keepdims=True)
        N = B * T
        counted = targets != -100
        safe = np.where(counted, targets, 0)
        picked = np.take_along_axis(softmax, safe[..., None], -1)[..., 0]
        loss = -np.log(picked)[counted].sum() / max(counted.sum(), 1)

        dlogits = softmax.copy()
        np.put_along_axis(dlogits, safe[..., None],
                          np.take_along_axis(dlogits, safe[..., None], -1) - 1.0, -1)
        dlogits *= counted[..., None] / max(counted.sum(), 1)
        grads["transformer.wte.weight"] += dlogits.reshape(N, -1).T @ nf.reshape(N, -1)
        dx, dw, db = layer_norm_backward(dlogits @ wte, p["transformer.ln_f.weight"], lnf)
        grads["transformer.ln_f.weight"] += dw
        grads["transformer.ln_f.bias"] += db
        for i in reversed(range(self.L)):
            pre = f"transformer.h.{i}."
            n1, ln1, q, k, v, probs, ctx, n2, ln2, f, g, t = saved[i]
            # mlp: x = h2 + gelu(n2 W_fc + b_fc) W_proj + b_proj
            grads[pre + "mlp.c_proj.weight"] += g.reshape(N, -1).T @ dx.reshape(N, -1)
            grads[pre + "mlp.c_proj.bias"] += dx.reshape(N, -1).sum(0)
            df = gelu_new_backward(dx @ p[pre + "mlp.c_proj.weight"].T, f, t)
            grads[pre + "mlp.c_fc.weight"] += n2.reshape(N, -1).T @ df.reshape(N, -1)
            grads[pre + "mlp.c_fc.bias"] += df.reshape(N, -1).sum(0)
            dh2, dw, db = layer_norm_backward(df @ p[pre + "mlp.c_fc.weight"].T,
                                              p[pre + "ln_2.weight"], ln2)
            grads[pre + "ln_2.weight"] += dw
            grads[pre + "ln_2.bias"] += db
            dx = dx + dh2
            # attention: x = h + ctx W_proj + b_proj
            grads[pre + "attn.c_proj.weight"] += ctx.reshape(N, -1).T @ dx.reshape(N, -1)
            grads[pre + "attn.c_proj.bias"] += dx.reshape(N, -1).sum(0)
            dctx = (dx @ p[pre + "attn.c_proj.weight"].T).reshape(B, T, H, D).transpose(0, 2, 1, 3)
            dprobs = dctx @ v.transpose(0, 1, 3, 2)
            dv = probs.transpose(0, 1, 3, 2) @ dctx
            dscores = probs * (dprobs - (dprobs * probs).sum(-1, keepdims=True)) / np.sqrt(D)
            dq = dscores @ k
            dk = dscores.transpose(0, 1, 3, 2) @ q
            dqkv = np.concatenate([d.transpose(0, 2, 1, 3).reshape(B, T, C) for d in (dq, dk, dv)],
                                  -1)
            grads[pre + "attn.c_attn.weight"] += n1.reshape(N, -1).T @ dqkv.reshape(N, -1)
            grads[pre + "attn.c_attn.bias"] += dqkv.reshape(N, -1).sum(0)
            dh, dw, db = layer_norm_backward(dqkv @ p[pre + "attn.c_attn.weight"].T,
                                             p[pre + "ln_1.weight"], ln1)
            grads[pre + "ln_1.weight"] += dw
            grads[pre + "ln_1.bias"] += db
            dx = dx + dh
        np.add.at(grads["transformer.wte.weight"], tokens, dx)
        np.add.at(grads["transformer.wpe.weight"], positions, dx)
        return loss, grads
