"""An independent Llama reference: Hugging Face LlamaForCausalLM's math (and Qwen2ForCausalLM's,
whose q, k and v projections have biases, and Qwen3ForCausalLM's, whose q and k heads go through
RMSNorm before RoPE; and GPT2LMHeadModel's, gpt2_model.py, for a model_type gpt2) in float64
numpy, written from the HF tensors the trainer exports (not from the trainer's layer code),
trained with torch.optim.AdamW's update and clip_grad_norm_ on the same batches. Prints one JSON object per
step: {"step", "loss", "grad_norm"}.

usage: llama_reference.py MODEL_DIR DATA_PREFIX STEPS MICRO_BATCH LR WEIGHT_DECAY CLIP
                          [loss=EOD] [attention=EOD] [positions=EOD]
  MODEL_DIR: model.safetensors + config.json (the initial weights); DATA_PREFIX.bin: uint16
  tokens. Batch k of the run is samples [k*G, (k+1)*G), sample i = tokens[i*S : i*S + S + 1].
  loss=EOD: positions whose input is this id take no part in the loss (Megatron's
  --eod-mask-loss). attention=EOD: a position after an input EOD sees no key at or before it
  (Megatron's --reset-attention-mask: each packed document attends to itself only).
  positions=EOD: the positions (RoPE's, or GPT-2's learned ones) restart at 0 after each input
  EOD (Megatron's --reset-position-ids).
"""
import json
import struct
import sys

import numpy as np

from reference_loss import cross_entropy

from gpt2_model import Gpt2

DTYPES = {"F32": np.float32, "F16": np.float16, "U16": np.uint16}


def read_safetensors(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"]).astype(np.float64)
    return tensors


def rms_forward(x, w, eps):
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return w * (x * r), r


def rms_backward(dy, x, w, r):
    g = dy * w
    dw = (dy * x * r).reshape(-1, x.shape[-1]).sum(0)
    dx = r * g - x * r ** 3 * (g * x).mean(-1, keepdims=True)
    return dx, dw


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], -1)


def rotate_half_transposed(x):  # the transpose of rotate_half: [x2, -x1]
    half = x.shape[-1] // 2
    return np.concatenate([x[..., half:], -x[..., :half]], -1)


def yarn_scaled(inv_freq, scaling, dim, base):
    """YaRN (rope_type yarn), in float64: pair i's frequency is the plain one below the
    correction range [floor(d(beta_fast)), ceil(d(beta_slow))], d(r) = dim ln(original / (2 pi
    r)) / (2 ln base), the plain one / factor above it, a linear ramp between; cos and sin are
    multiplied by 0.1 ln(factor) + 1."""
    factor, original = scaling["factor"], scaling["original_max_position_embeddings"]
    fast, slow = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)
    d = lambda r: dim * np.log(original / (r * 2 * np.pi)) / (2 * np.log(base))
    low, high = max(np.floor(d(fast)), 0), min(np.ceil(d(slow)), dim - 1)
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0, 1)
    return inv_freq / factor * ramp + inv_freq * (1 - ramp), 0.1 * np.log(factor) + 1


def llama3_scaled(inv_freq, scaling):
    """Llama 3.1's frequency scaling (rope_scaling with rope_type llama3), in float64: frequencies
    of wavelength over original / low_freq_factor divided by factor, under original /
    high_freq_factor kept, between them a linear blend in original / wavelength."""
    if not scaling:
        return inv_freq
    assert scaling["rope_type"] == "llama3", scaling
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * np.pi / inv_freq
    blend = (original / wavelength - low) / (high - low)
    blended = (1 - blend) * inv_freq / factor + blend * inv_freq
    return np.where(wavelength > original / low, inv_freq / factor,
                    np.where(wavelength < original / high, inv_freq, blended))


class Llama:
    def __init__(self, tensors, config):
        self.p = tensors
        self.c = config
        self.H = config["num_attention_heads"]
        self.G = config["num_key_value_heads"]
        # head_dim: the head width where it is not hidden_size / heads (Mistral NeMo, Qwen3).
        self.D = config.get("head_dim") or config["hidden_size"] // self.H
        self.L = config["num_hidden_layers"]
        self.eps = config["rms_norm_eps"]
        inv_freq = 1.0 / (config["rope_theta"] ** (np.arange(0, self.D, 2, dtype=np.float64)
                                                   / self.D))
        scaling = config.get("rope_scaling")
        self.rope_factor = 1.0  # YaRN's attention factor on cos and sin
        if scaling and scaling["rope_type"] == "yarn":
            self.inv_freq, self.rope_factor = yarn_scaled(inv_freq, scaling, self.D,
                                                          config["rope_theta"])
        else:
            self.inv_freq = llama3_scaled(inv_freq, scaling)
        # MistralConfig's sliding_window (HF masks key j for query i where j <= i - window).
        self.window = config.get("sliding_window") if config.get("model_type") == "mistral" else None
        # tie_word_embeddings: the word embeddings are the head (no lm_head.weight).
        self.tied = config.get("tie_word_embeddings", False)

    def rope_tables(self, positions):  # (B, T) position_ids -> cos, sin (B, 1, T, D)
        angles = positions[..., None].astype(np.float64) * self.inv_freq
        emb = np.concatenate([angles, angles], -1)[:, None]
        return np.cos(emb) * self.rope_factor, np.sin(emb) * self.rope_factor

    def proj(self, x, name):  # x W^T, plus the bias where the model has one (Qwen2's q, k, v)
        y = x @ self.p[name + ".weight"].T
        return y + self.p[name + ".bias"] if name + ".bias" in self.p else y

    def loss_and_grads(self, tokens, targets, document_end, positions):
        p, B, T = self.p, tokens.shape[0], tokens.shape[1]
        H, G, D, r = self.H, self.G, self.D, self.H // self.G
        cos, sin = self.rope_tables(positions)
        mask = np.triu(np.full((T, T), -np.inf), 1)
        if self.window:  # key j hidden from query i where j <= i - window as well
            mask[np.tril_indices(T, -self.window)] = -np.inf
        mask = np.broadcast_to(mask, (B, 1, T, T)).copy()
        if document_end is not None:  # Megatron's loop: an eod at e hides keys <= e from i > e
            for b, e in zip(*np.nonzero(tokens == document_end)):
                mask[b, 0, e + 1:, :e + 1] = -np.inf
        grads = {name: np.zeros_like(value) for name, value in p.items()}
        x = p["model.embed_tokens.weight"][tokens]  # (B, T, C)
        saved = []
        for i in range(self.L):
            pre = f"model.layers.{i}."
            h = x
            n1, r1 = rms_forward(h, p[pre + "input_layernorm.weight"], self.eps)
            q = self.proj(n1, pre + "self_attn.q_proj").reshape(B, T, H, D).transpose(0, 2, 1, 3)
            k = self.proj(n1, pre + "self_attn.k_proj").reshape(B, T, G, D).transpose(0, 2, 1, 3)
            v = self.proj(n1, pre + "self_attn.v_proj").reshape(B, T, G, D).transpose(0, 2, 1, 3)
            qk = (q, k, None, None)  # Qwen3: each q and k head through RMSNorm before RoPE
            if pre + "self_attn.q_norm.weight" in p:
                q, rq = rms_forward(q, p[pre + "self_attn.q_norm.weight"], self.eps)
                k, rk = rms_forward(k, p[pre + "self_attn.k_norm.weight"], self.eps)
                qk = (qk[0], qk[1], rq, rk)
            qr = q * cos + rotate_half(q) * sin
            kr = k * cos + rotate_half(k) * sin
            kx, vx = np.repeat(kr, r, axis=1), np.repeat(v, r, axis=1)  # HF repeat_kv
            scores = qr @ kx.transpose(0, 1, 3, 2) / np.sqrt(D) + mask
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            ctx = (probs @ vx).transpose(0, 2, 1, 3).reshape(B, T, H * D)
            x = h + ctx @ p[pre + "self_attn.o_proj.weight"].T
            h2 = x
            n2, r2 = rms_forward(h2, p[pre + "post_attention_layernorm.weight"], self.eps)
            gate = n2 @ p[pre + "mlp.gate_proj.weight"].T
            up = n2 @ p[pre + "mlp.up_proj.weight"].T
            sig = 1.0 / (1.0 + np.exp(-gate))
            act = gate * sig * up
            x = h2 + act @ p[pre + "mlp.down_proj.weight"].T
            saved.append((h, n1, r1, qk, qr, kr, v, kx, vx, probs, ctx, h2, n2, r2, gate, up, sig,
                          act))
        nf, rf = rms_forward(x, p["model.norm.weight"], self.eps)
        head = "model.embed_tokens.weight" if self.tied else "lm_head.weight"
        loss, dlogits = cross_entropy(nf @ p[head].T, targets)  # (B, T, V) logits
        N = B * T
        grads[head] += dlogits.reshape(N, -1).T @ nf.reshape(N, -1)
        dnf = dlogits @ p[head]
        dx, dw = rms_backward(dnf, x, p["model.norm.weight"], rf)
        grads["model.norm.weight"] += dw
        for i in reversed(range(self.L)):
            pre = f"model.layers.{i}."
            (h, n1, r1, qk, qr, kr, v, kx, vx, probs, ctx, h2, n2, r2, gate, up, sig,
             act) = saved[i]
            # mlp
            grads[pre + "mlp.down_proj.weight"] += dx.reshape(N, -1).T @ act.reshape(N, -1)
            dact = dx @ p[pre + "mlp.down_proj.weight"]
            dgate = dact * up * (sig + gate * sig * (1.0 - sig))
            dup = dact * gate * sig
            grads[pre + "mlp.gate_proj.weight"] += dgate.reshape(N, -1).T @ n2.reshape(N, -1)
            grads[pre + "mlp.up_proj.weight"] += dup.reshape(N, -1).T @ n2.reshape(N, -1)
            dn2 = dgate @ p[pre + "mlp.gate_proj.weight"] + dup @ p[pre + "mlp.up_proj.weight"]
            dh2, dw = rms_backward(dn2, h2, p[pre + "post_attention_layernorm.weight"], r2)
            grads[pre + "post_attention_layernorm.weight"] += dw
            dx = dx + dh2
            # attention
            grads[pre + "self_attn.o_proj.weight"] += dx.reshape(N, -1).T @ ctx.reshape(N, -1)
            dctx = (dx @ p[pre + "self_attn.o_proj.weight"]).reshape(B, T, H, D).transpose(0, 2, 1, 3)
            dprobs = dctx @ vx.transpose(0, 1, 3, 2)
            dvx = probs.transpose(0, 1, 3, 2) @ dctx
            dscores = probs * (dprobs - (dprobs * probs).sum(-1, keepdims=True))
            dqr = dscores @ kx / np.sqrt(D)
            dkx = dscores.transpose(0, 1, 3, 2) @ qr / np.sqrt(D)
            r = H // G
            dkr = dkx.reshape(B, G, r, T, D).sum(2)
            dv = dvx.reshape(B, G, r, T, D).sum(2)
            dq = dqr * cos + rotate_half_transposed(dqr * sin)
            dk = dkr * cos + rotate_half_transposed(dkr * sin)
            if qk[2] is not None:  # Qwen3's q and k norms
                for name, pre_norm, rstd in (("q", qk[0], qk[2]), ("k", qk[1], qk[3])):
                    weight = pre + f"self_attn.{name}_norm.weight"
                    d, dw = rms_backward(dq if name == "q" else dk, pre_norm, p[weight], rstd)
                    grads[weight] += dw
                    if name == "q":
                        dq = d
                    else:
                        dk = d
            dq2 = dq.transpose(0, 2, 1, 3).reshape(N, H * D)
            dk2 = dk.transpose(0, 2, 1, 3).reshape(N, G * D)
            dv2 = dv.transpose(0, 2, 1, 3).reshape(N, G * D)
            n1f = n1.reshape(N, -1)
            grads[pre + "self_attn.q_proj.weight"] += dq2.T @ n1f
            grads[pre + "self_attn.k_proj.weight"] += dk2.T @ n1f
            grads[pre + "self_attn.v_proj.weight"] += dv2.T @ n1f
            for name, d in (("q", dq2), ("k", dk2), ("v", dv2)):  # Qwen2's biases
                if pre + f"self_attn.{name}_proj.bias" in grads:
                    grads[pre + f"self_attn.{name}_proj.bias"] += d.sum(0)
            dn1 = (dq2 @ p[pre + "self_attn.q_proj.weight"] + dk2 @ p[pre + "self_attn.k_proj.weight"]
                   + dv2 @ p[pre + "self_attn.v_proj.weight"]).reshape(B, T, -1)
            dh, dw = rms_backward(dn1, h, p[pre + "input_layernorm.weight"], r1)
            grads[pre + "input_layernorm.weight"] += dw
            dx = dx + dh
        np.add.at(grads["model.embed_tokens.weight"], tokens, dx)
        return loss, grads


def position_ids(tokens, position_end):
    """(B, T) positions: 0..T-1, or with position_end Megatron's --reset-position-ids loop (after
    an input eod at e the positions restart at 0)."""
    positions = np.tile(np.arange(tokens.shape[1]), (tokens.shape[0], 1))
    if position_end is not None:
        for b in range(tokens.shape[0]):
            previous = 0
            for e in np.nonzero(tokens[b] == position_end)[0]:
                positions[b, e + 1:] -= e + 1 - previous
                previous = e + 1
    return positions


def main():
    model_dir, data_prefix = sys.argv[1], sys.argv[2]
    steps, micro_batch = int(sys.argv[3]), int(sys.argv[4])
    lr, weight_decay, clip = float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7])
    options = dict(arg.split("=") for arg in sys.argv[8:])
    # Megatron's --eod-mask-loss: positions whose input is this id get label -100.
    masked_input = int(options["loss"]) if "loss" in options else None
    document_end = int(options["attention"]) if "attention" in options else None
    position_end = int(options["positions"]) if "positions" in options else None
    config = json.load(open(model_dir + "/config.json"))
    tensors = read_safetensors(model_dir + "/model.safetensors")
    if config.get("model_type") == "gpt2":
        model, S = Gpt2(tensors, config), config["n_positions"]
    else:
        model, S = Llama(tensors, config), config["max_position_embeddings"]
    tokens = np.fromfile(data_prefix + ".bin", dtype=np.uint16).astype(np.int64)
    beta1, beta2, eps = 0.9, 0.95, 1e-8
    m = {k: np.zeros_like(v) for k, v in tensors.items()}
    v2 = {k: np.zeros_like(v) for k, v in tensors.items()}
    for step in range(1, steps + 1):
        first = (step - 1) * micro_batch
        batch = np.stack([tokens[i * S:i * S + S + 1] for i in range(first, first + micro_batch)])
        labels = batch[:, 1:].copy()
        if masked_input is not None:
            labels[batch[:, :-1] == masked_input] = -100
        inputs = batch[:, :-1]
        loss, grads = model.loss_and_grads(inputs, labels, document_end,
                                           position_ids(inputs, position_end))
        norm = np.sqrt(sum((g * g).sum() for g in grads.values()))
        coef = clip / (norm + 1e-6)
        for name, value in tensors.items():
            g = grads[name] * (coef if coef < 1.0 else 1.0)
            if value.ndim >= 2:
                value *= 1.0 - lr * weight_decay
            m[name] = beta1 * m[name] + (1 - beta1) * g
            v2[name] = beta2 * v2[name] + (1 - beta2) * g * g
            denom = np.sqrt(v2[name]) / np.sqrt(1 - beta2 ** step) + eps
            value -= lr / (1 - beta1 ** step) * m[name] / denom
        print(json.dumps({"step": step, "loss": float(loss), "grad_norm": float(norm)}))


if __name__ == "__main__":
    main()
