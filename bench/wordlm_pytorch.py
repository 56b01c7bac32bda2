# examples/wordlm's training run in PyTorch 1.13 (/usr/bin/python3), for the learning curve in
# bench/results: the same corpus split (every tenth fortune file held out), words, vocabulary,
# batchify layout, model (pytorch/examples' RNNModel), initialisation rule, truncated BPTT,
# clipping and SGD with the learning rate divided by 4 when validation stops improving.
# Initial weights and dropout masks come from PyTorch's generator, so the curves agree within
# noise, not bit for bit.
#   /usr/bin/python3 bench/wordlm_pytorch.py --epochs 1 --max-batches 300
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--model", default="LSTM")
p.add_argument("--emsize", type=int, default=200)
p.add_argument("--nhid", type=int, default=200)
p.add_argument("--nlayers", type=int, default=2)
p.add_argument("--vocab", type=int, default=10000)
p.add_argument("--dropout", type=float, default=0.2)
p.add_argument("--lr", type=float, default=20)
p.add_argument("--clip", type=float, default=0.25)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--max-batches", type=int, default=0)
p.add_argument("--batch-size", type=int, default=20)
p.add_argument("--bptt", type=int, default=35)
p.add_argument("--log-interval", type=int, default=200)
p.add_argument("--seed", type=int, default=1111)
p.add_argument("--data", default="/usr/share/games/fortunes")
args = p.parse_args()
torch.manual_seed(args.seed)
torch.set_num_threads(max(1, torch.get_num_threads()))


def read_cookies(path):  # src/data/fortunes.cpp's read_fortune_file
    text, cookie = b"", b""
    data = open(path, "rb").read()
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines = lines[:-1]
    for line in lines + [None]:
        if line is None or line == b"%":
            if cookie.strip(b" \t\r\n"):
                text += cookie + b"%\n"
            cookie = b""
        else:
            cookie += line + b"\n"
    return text


names = sorted(n for n in os.listdir(args.data) if not n.startswith(".") and not n.endswith((".dat", ".u8")) and
               os.path.isfile(os.path.join(args.data, n)) and not os.path.islink(os.path.join(args.data, n)))
paths = sorted(os.path.join(args.data, n) for n in names)
train_text = b"".join(read_cookies(q) for i, q in enumerate(paths) if i % 10 != 9)
valid_text = b"".join(read_cookies(q) for i, q in enumerate(paths) if i % 10 == 9)


def words_of(text):
    lines = text.split(b"\n")
    if text.endswith(b"\n"):
        lines = lines[:-1]
    out = []
    for line in lines:
        out += line.split() + [b"<eos>"]
    return out


train_words = words_of(train_text)
counts = {}
for w in train_words:
    counts[w] = counts.get(w, 0) + 1
ranked = sorted(sorted(counts.items()), key=lambda kv: -kv[1])[: args.vocab - 1]
index = {w: i for i, (w, _) in enumerate(ranked)}
unk = len(index)
ntokens = unk + 1


def batchify(words, bsz):
    ids = torch.tensor([index.get(w, unk) for w in words], dtype=torch.int64)
    steps = ids.numel() // bsz
    return ids[: steps * bsz].view(bsz, steps).t().contiguous()


train = batchify(train_words, args.batch_size)
valid = batchify(words_of(valid_text), 10)


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(args.dropout)
        self.encoder = nn.Embedding(ntokens, args.emsize)
        if args.model in ("LSTM", "GRU"):
            self.rnn = getattr(nn, args.model)(args.emsize, args.nhid, args.nlayers, dropout=args.dropout)
        else:
            self.rnn = nn.RNN(args.emsize, args.nhid, args.nlayers, nonlinearity=args.model[4:].lower(),
                              dropout=args.dropout)
        self.decoder = nn.Linear(args.nhid, ntokens)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)).view(-1, ntokens), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        h = weight.new_zeros(args.nlayers, bsz, args.nhid)
        return (h, weight.new_zeros(args.nlayers, bsz, args.nhid)) if args.model == "LSTM" else h


def repackage(h):
    return h.detach() if isinstance(h, torch.Tensor) else tuple(repackage(v) for v in h)


model = RNNModel()
print("wordlm (PyTorch %s): %s, %d words of training text, %d of validation, vocabulary %d" %
      (torch.__version__, args.model, train.numel(), valid.numel(), ntokens))


def evaluate(source):
    model.eval()
    total, count = 0.0, 0
    hidden = model.init_hidden(source.size(1))
    with torch.no_grad():
        for i in range(0, source.size(0) - 1, args.bptt):
            n = min(args.bptt, source.size(0) - 1 - i)
            out, hidden = model(source[i:i + n], hidden)
            total += n * F.cross_entropy(out, source[i + 1:i + 1 + n].reshape(-1)).item()
            count += n
    return total / count


lr, best = args.lr, None
batches = (train.size(0) - 1 + args.bptt - 1) // args.bptt
per_epoch = min(batches, args.max_batches) if args.max_batches > 0 else batches
for epoch in range(1, args.epochs + 1):
    model.train()
    start = log_start = time.time()
    hidden, log_loss = model.init_hidden(args.batch_size), 0.0
    for b in range(per_epoch):
        i = b * args.bptt
        n = min(args.bptt, train.size(0) - 1 - i)
        hidden = repackage(hidden)
        model.zero_grad()
        out, hidden = model(train[i:i + n], hidden)
        loss = F.cross_entropy(out, train[i + 1:i + 1 + n].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for q in model.parameters():
            q.data.add_(q.grad, alpha=-lr)
        log_loss += loss.item()
        if (b + 1) % args.log_interval == 0 or b + 1 == per_epoch:
            k = args.log_interval if (b + 1) % args.log_interval == 0 else (b + 1) % args.log_interval
            ms = 1000 * (time.time() - log_start) / k
            print("| epoch %3d | %5d/%5d batches | lr %.2f | ms/batch %7.2f | loss %5.2f | ppl %8.2f" %
                  (epoch, b + 1, per_epoch, lr, ms, log_loss / k, math.exp(log_loss / k)), flush=True)
            log_loss, log_start = 0.0, time.time()
    val = evaluate(valid)
    print("| end of epoch %3d | time: %6.1fs | valid loss %5.2f | valid ppl %8.2f" %
          (epoch, time.time() - start, val, math.exp(val)), flush=True)
    if best is None or val < best:
        best = val
    else:
        lr /= 4.0
