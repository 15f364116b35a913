"""host_to_device_many on a real GPU: 300 rounds of random arrays (dtypes, odd lengths, empty ones), each round's
device views compared after a sync; the host arrays are overwritten right after the call (the pinned staging copy
must not alias them)."""
import numpy as np, torch
from strae import runtime
dev = torch.device("cuda")
rng = np.random.default_rng(0)
dtypes = [np.int64, np.int32, np.int16, np.uint8, np.float32, np.float64, np.bool_]
bad = 0
kept = []
for r in range(300):
    arrays = []
    for _ in range(int(rng.integers(1, 12))):
        dt = dtypes[int(rng.integers(len(dtypes)))]
        n = int(rng.integers(0, 5000)) if rng.random() > 0.1 else 0
        shape = (n,) if rng.random() < 0.7 else (n // 3 + 1, 3)
        a = (rng.random(shape) * 1000).astype(dt) if dt not in (np.bool_,) else rng.random(shape) > 0.5
        arrays.append(a)
    expect = [a.copy() for a in arrays]
    out = runtime.host_to_device_many(arrays, dev)
    for a in arrays:
        a[...] = 0  # overwritten before the copy is known to be done
    kept.append((out, expect))
    if len(kept) > 20:
        torch.cuda.synchronize()
        for o, e in kept:
            for t, x in zip(o, e):
                if t.shape != x.shape or not np.array_equal(t.cpu().numpy(), x) or t.data_ptr() % 16:
                    bad += 1
        kept = []
torch.cuda.synchronize()
for o, e in kept:
    for t, x in zip(o, e):
        if t.shape != x.shape or not np.array_equal(t.cpu().numpy(), x) or t.data_ptr() % 16:
            bad += 1
print(f"h2d_check rounds=300 mismatches={bad}")
