"""examples/charlm_model.h's character model written with torch.nn, under the same names
(transformer.wte, transformer.h.0.self_attn..., lm_head), for the PyTorch side of
bench/charlm_pytorch.py and bench/torch_gpu.py: token and position embeddings, pre-norm
TransformerEncoderLayers (GELU, 4x wide feed-forward, causal self-attention), a final
LayerNorm and an output projection tied to the token embedding; Linear and Embedding
weights N(0, 0.02), biases zero."""
import torch
import torch.nn as nn


class CharLM(nn.Module):
    def __init__(self, vocab, context=128, width=128, layers=4, heads=4, dropout=0.1):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, width), wpe=nn.Embedding(context, width), drop=nn.Dropout(dropout),
            h=nn.ModuleList([nn.TransformerEncoderLayer(width, heads, 4 * width, dropout, activation="gelu",
                                                        batch_first=True, norm_first=True) for _ in range(layers)]),
            ln_f=nn.LayerNorm(width)))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx):
        t = idx.size(1)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t, device=idx.device)))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool, device=idx.device), 1)
        causal = {"is_causal": True} if torch.__version__ >= "2" else {}  # 1.13 has no is_causal
        for block in self.transformer.h:
            x = block(x, src_mask=mask, **causal)
        return self.lm_head(self.transformer.ln_f(x))
