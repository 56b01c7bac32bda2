# examples/charlm's training run in PyTorch 1.13 (/usr/bin/python3), for the learning curve
# in bench/results: the same corpus split, vocabulary, model (torch.nn's modules under the
# names of examples/charlm_model.h), initialisation rule, AdamW parameter groups, gradient
# clipping, warmup + cosine schedule (LambdaLR) and data order (a DataLoader shuffled by a
# generator seeded as ember's, which draws the same windows in the same order). Initial
# weights and dropout masks come from PyTorch's generator, so the curves agree within noise,
# not bit for bit.
#   /usr/bin/python3 bench/charlm_pytorch.py --steps 300 --batch-size 16 --log-every 25
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from charlm_torch_model import CharLM

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=2000)
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--lr", type=float, default=2e-3)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--data", default="/usr/share/games/fortunes")
p.add_argument("--context", type=int, default=128)
p.add_argument("--width", type=int, default=128)
p.add_argument("--layers", type=int, default=4)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--dropout", type=float, default=0.1)
p.add_argument("--weight-decay", type=float, default=0.1)
p.add_argument("--warmup", type=int, default=100)
p.add_argument("--clip", type=float, default=1.0)
p.add_argument("--log-every", type=int, default=100)
p.add_argument("--eval-batches", type=int, default=20)
p.add_argument("--threads", type=int, default=0)
a = p.parse_args()
if a.threads:
    torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)

# -- Fortunes (src/data/fortunes.cpp): every tenth file in name order is for validation
def read_cookies(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines = lines[:-1]  # as std::getline: no empty line after the last newline
    text, cookie = b"", b""
    for line in lines:
        if line == b"%":
            if cookie.strip(b" \t\r\n"):
                text += cookie + b"%\n"
            cookie = b""
        else:
            cookie += line + b"\n"
    if cookie.strip(b" \t\r\n"):
        text += cookie + b"%\n"
    return text

names = sorted(n for n in os.listdir(a.data)
               if not n.startswith(".") and not n.endswith((".dat", ".u8"))
               and os.path.isfile(os.path.join(a.data, n)) and not os.path.islink(os.path.join(a.data, n)))
train_text, val_text = b"", b""
for i, n in enumerate(names):
    t = read_cookies(os.path.join(a.data, n))
    if i % 10 == 9:
        val_text += t
    else:
        train_text += t
chars = sorted(set(train_text + val_text))
token = {c: i for i, c in enumerate(chars)}
train_tokens = torch.tensor([token[c] for c in train_text], dtype=torch.long)
val_tokens = torch.tensor([token[c] for c in val_text], dtype=torch.long)

class Windows(torch.utils.data.Dataset):
    def __init__(self, tokens, context):
        self.tokens, self.context = tokens, context
    def __len__(self):
        return self.tokens.numel() - self.context
    def __getitem__(self, i):
        return self.tokens[i:i + self.context], self.tokens[i + 1:i + self.context + 1]

model = CharLM(len(chars), a.context, a.width, a.layers, a.heads, a.dropout)
decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=a.lr, betas=(0.9, 0.95))

def schedule(s):
    if s < a.warmup:
        return (s + 1) / a.warmup
    progress = min(1.0, (s - a.warmup) / max(1, a.steps - a.warmup))
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
val_loader = torch.utils.data.DataLoader(Windows(val_tokens, a.context), batch_size=a.batch_size, shuffle=True,
                                         generator=torch.Generator().manual_seed(a.seed + 1))
val_batches = []
for b in val_loader:
    if len(val_batches) >= a.eval_batches:
        break
    val_batches.append(b)
train_loader = torch.utils.data.DataLoader(Windows(train_tokens, a.context), batch_size=a.batch_size, shuffle=True,
                                           drop_last=True, generator=torch.Generator().manual_seed(a.seed))

def val_loss():
    model.eval()
    with torch.no_grad():
        total = sum(F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1)) for x, y in val_batches)
    model.train()
    return float(total) / len(val_batches)

print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads; {len(chars)} characters; "
      f"{sum(p.numel() for p in model.parameters())} parameters")
step, interval, n, start = 0, 0.0, 0, time.time()
while step < a.steps:
    for x, y in train_loader:
        if step >= a.steps:
            break
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
        loss.backward()
        if a.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        sched.step()
        interval += float(loss)
        n += 1
        step += 1
        if step % a.log_every == 0 or step == a.steps:
            seconds = time.time() - start
            print(f"step {step}/{a.steps}  loss {interval / n:.4f}  val {val_loss():.4f}  lr {opt.param_groups[0]['lr']:.4g}"
                  f"  {n * a.batch_size * a.context / seconds:.0f} tokens/s", flush=True)
            interval, n, start = 0.0, 0, time.time()
