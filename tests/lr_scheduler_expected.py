# Expected learning rates for tests/test_lr_scheduler.cpp, from PyTorch 1.13 (/usr/bin/python3).
import warnings, math, torch
warnings.filterwarnings("ignore")
from torch.optim import lr_scheduler as L

def sgd(momentum=0.9):
    p1 = torch.nn.Parameter(torch.ones(2)); p2 = torch.nn.Parameter(torch.ones(3))
    return torch.optim.SGD([{'params': [p1], 'lr': 0.1}, {'params': [p2], 'lr': 0.05}], lr=0.1, momentum=momentum)

def adam():
    p1 = torch.nn.Parameter(torch.ones(2)); p2 = torch.nn.Parameter(torch.ones(3))
    return torch.optim.Adam([{'params': [p1], 'lr': 0.1}, {'params': [p2], 'lr': 0.05}], lr=0.1, betas=(0.9, 0.99))

def run(opt, s, n, metrics=None, mom=None):
    out = [[g["lr"] for g in opt.param_groups]]  # 2.x: get_last_lr() at construction; 1.13 has none yet for ReduceLROnPlateau
    moms = [[g[mom] if mom == 'momentum' else g['betas'][0] for g in opt.param_groups]] if mom else None
    for i in range(n):
        opt.step()
        if metrics is None: s.step()
        else: s.step(metrics[i])
        out.append(list(s._last_lr))  # 1.13 ReduceLROnPlateau has _last_lr but no get_last_lr()
        if mom: moms.append([g[mom] if mom == 'momentum' else g['betas'][0] for g in opt.param_groups])
    return out, moms

def emit(name, rows):
    print("const std::vector<std::vector<double>> %s = {" % name)
    for r in rows: print("    {%s}," % ", ".join(repr(float(x)) for x in r))
    print("};")

o = sgd(); emit("kStepLR", run(o, L.StepLR(o, 3, 0.5), 25)[0])
o = sgd(); emit("kMultiStepLR", run(o, L.MultiStepLR(o, [3, 7, 7, 12], 0.3), 20)[0])
o = sgd(); emit("kExponentialLR", run(o, L.ExponentialLR(o, 0.9), 25)[0])
o = sgd(); emit("kLambdaLR", run(o, L.LambdaLR(o, [lambda e: 0.95 ** e, lambda e: 1 / (e + 1)]), 25)[0])
o = sgd(); emit("kCosineAnnealingLR", run(o, L.CosineAnnealingLR(o, 10, 0.001), 30)[0])
o = sgd(); emit("kLinearLR", run(o, L.LinearLR(o, 0.25, 1.0, 8), 20)[0])
o = sgd(); emit("kLinearLRDown", run(o, L.LinearLR(o, 1.0, 0.1, 10), 15)[0])
o = sgd(); lrs, moms = run(o, L.OneCycleLR(o, [0.4, 0.2], total_steps=25), 25, mom='momentum')
emit("kOneCycleLR", lrs); emit("kOneCycleMomentum", moms)
o = adam(); lrs, moms = run(o, L.OneCycleLR(o, 0.3, total_steps=20, pct_start=0.25, anneal_strategy='linear', three_phase=True, div_factor=10., final_div_factor=100., base_momentum=0.8, max_momentum=0.9), 20, mom='betas')
emit("kOneCycleLRThreePhase", lrs); emit("kOneCycleBeta1", moms)
o = sgd(); emit("kOneCycleLRNoMomentum", run(o, L.OneCycleLR(o, 0.4, total_steps=10, cycle_momentum=False), 10)[0])
print("// momentum after OneCycleLR(cycle_momentum=False):", [g['momentum'] for g in o.param_groups])
metrics = [1.0, 0.9, 0.95, 0.92, 0.91, 0.9, 0.89, 0.88, 0.5, 0.6, 0.55, 0.52, 0.51, 0.5, 0.5, 0.49, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]
print("const std::vector<double> kPlateauMetrics = {%s};" % ", ".join(repr(m) for m in metrics))
o = sgd(); emit("kReduceLROnPlateauMin", run(o, L.ReduceLROnPlateau(o, 'min', factor=0.5, patience=2, threshold=0.05, threshold_mode='abs', cooldown=1, min_lr=[0.01, 0.02]), 25, metrics)[0])
o = sgd(); emit("kReduceLROnPlateauMax", run(o, L.ReduceLROnPlateau(o, 'max', factor=0.3, patience=1, threshold=0.01, min_lr=0.001, eps=1e-3), 25, [-m for m in metrics])[0])
o = sgd(); emit("kSequentialLR", run(o, L.SequentialLR(o, [L.LinearLR(o, 0.1, 1.0, 4), L.ExponentialLR(o, 0.9)], [5]), 20)[0])
o = sgd(); emit("kSequentialLR3", run(o, L.SequentialLR(o, [L.LinearLR(o, 0.5, 1.0, 3), L.StepLR(o, 3, 0.5), L.CosineAnnealingLR(o, 6, 0.01)], [4, 10]), 24)[0])
