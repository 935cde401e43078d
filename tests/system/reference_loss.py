"""The float64 references' loss (llama_reference.py, gpt2_model.py): Hugging Face's mean cross
entropy over the targets that are not -100, and its gradient with respect to the logits."""
import numpy as np


def cross_entropy(logits, targets):
    """logits (B, T, V), targets (B, T): the loss and dloss/dlogits."""
    logits = logits - logits.max(-1, keepdims=True)
    e = np.exp(logits)
    softmax = e / e.sum(-1, keepdims=True)
    counted = targets != -100
    safe = np.where(counted, targets, 0)
    picked = np.take_along_axis(softmax, safe[..., None], -1)[..., 0]
    loss = -np.log(picked)[counted].sum() / max(counted.sum(), 1)
    dlogits = softmax.copy()
    np.put_along_axis(dlogits, safe[..., None],
                      np.take_along_axis(dlogits, safe[..., None], -1) - 1.0, -1)
    dlogits *= counted[..., None] / max(counted.sum(), 1)
    return loss, dlogits
