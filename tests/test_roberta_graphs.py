"""The CUDA-graph MLM step's CPU twin (baselines/roberta/graphs.py): bucket padding computes the eager step's loss and
gradients, and nothing in the captured forward/backward would sync the host on CUDA."""
from __future__ import annotations

import pytest
import torch

from baselines.roberta import graphs
from baselines.roberta.data import collate, mask_for_mlm, pack, padded_rows
from baselines.roberta.graphs import GraphedMlm, WeightedMlmLoss, host_syncs, to_bucket
from baselines.roberta.train import main as train_roberta
from baselines.roberta.train import mlm_token_losses
from test_roberta import N_PIECES, patterned_sentences, tiny_model


def _batch(special, layout: str, n: int = 11, seed: int = 3):
    ids, _ = collate(patterned_sentences(n, seed=seed), special, 64)
    inputs, labels = mask_for_mlm(ids, special, torch.Generator().manual_seed(seed), 0.3)
    rows = pack(inputs, labels, special, 30) if layout == "sentences" else padded_rows(inputs, labels, special)
    return rows, int((labels != -100).sum())


def _grads(model) -> torch.Tensor:
    return torch.cat([p.grad.flatten() if p.grad is not None else torch.zeros(p.numel()) for p in model.parameters()])


def test_bucket_shapes_and_weights():
    shape, _ = tiny_model()
    rows, n_predicted = _batch(shape.special, "sentences")
    batch = to_bucket(rows, shape.special.pad, n_predicted, 64)
    n_rows, width = rows.inputs.shape
    bucket_rows, bucket_width, bucket_predicted = batch.bucket
    assert bucket_rows % graphs.ROW_BUCKET == 0 and bucket_rows >= n_rows
    assert bucket_width % graphs.COLUMN_BUCKET == 0 and bucket_width >= width
    assert bucket_predicted % graphs.PREDICTED_BUCKET == 0 and bucket_predicted >= n_predicted
    assert torch.equal(batch.inputs[:n_rows, :width], rows.inputs)
    assert (batch.inputs[n_rows:] == shape.special.pad).all() and (batch.segments[:, width:] == -1).all()
    real = batch.weights > 0
    assert int(real.sum()) == n_predicted and torch.isclose(batch.weights.sum(), torch.tensor(1.0))
    # the predicted positions hold exactly the masked labels, in row-major order
    flat_labels = torch.full(batch.inputs.shape, -100, dtype=torch.long)
    flat_labels[:n_rows, :width] = rows.labels
    assert torch.equal(batch.targets[real], flat_labels.flatten()[batch.predicted[real]])
    assert torch.equal(batch.targets[real], rows.labels[rows.labels != -100])
    # never wider than a row may be
    assert to_bucket(rows, shape.special.pad, n_predicted, width).inputs.shape[1] == width


@pytest.mark.parametrize("layout", ["sentences", "none"])
def test_bucketed_loss_and_gradients_equal_the_eager_step(layout):
    shape, model = tiny_model()
    model.eval()  # dropout off: the two paths must compute the same function
    rows, n_predicted = _batch(shape.special, layout)
    model.zero_grad()
    eager = mlm_token_losses(model, rows)[0].sum() / n_predicted
    eager.backward()
    eager_grads = _grads(model)
    model.zero_grad()
    bucketed = WeightedMlmLoss(model, None)(*to_bucket(rows, shape.special.pad, n_predicted, 64).tensors(
        torch.device("cpu")))
    bucketed.backward()
    assert torch.allclose(eager, bucketed, atol=1e-6)
    assert torch.allclose(eager_grads, _grads(model), atol=1e-6)
    assert eager_grads.abs().max() > 1e-4  # gradients flowed: a vacuous comparison would be caught


def test_gradient_accumulated_chunks_weigh_against_the_whole_step():
    shape, model = tiny_model()
    model.eval()
    rows, n_predicted = _batch(shape.special, "sentences", n=14, seed=4)
    model.zero_grad()
    (mlm_token_losses(model, rows)[0].sum() / n_predicted).backward()
    whole = _grads(model)
    model.zero_grad()
    for chunk in rows.chunks(3):
        WeightedMlmLoss(model, None)(*to_bucket(chunk, shape.special.pad, n_predicted, 64).tensors(
            torch.device("cpu"))).backward()
    assert torch.allclose(whole, _grads(model), atol=1e-6)


def test_the_captured_step_has_no_host_syncs():
    shape, model = tiny_model()
    model.train()
    rows, n_predicted = _batch(shape.special, "sentences")
    tensors = to_bucket(rows, shape.special.pad, n_predicted, 64).tensors(torch.device("cpu"))
    loss_module = WeightedMlmLoss(model, None)
    assert host_syncs(lambda: loss_module(*tensors).backward()) == []
    # the check sees a sync where there is one (the eager step's predicted-position lookup uses nonzero)
    assert "nonzero" in host_syncs(lambda: rows.predicted_index())


def test_cuda_graphs_need_a_cuda_device(tmp_path):
    _, model = tiny_model()
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        GraphedMlm(model, torch.device("cpu"), "fp32")
    with pytest.raises(SystemExit, match="needs a CUDA device"):
        train_roberta(["--lang", "xx", "--seed", "0", "--out", str(tmp_path / "run"), "--device", "cpu",
                       "--cuda-graphs", "on"])
    assert not (tmp_path / "run").exists()  # refused before anything was written


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_graphed_step_matches_eager_on_cuda_without_dropout():
    shape, model = tiny_model()
    model = model.cuda().eval()
    device = torch.device("cuda")
    rows, n_predicted = _batch(shape.special, "sentences")
    model.zero_grad()
    (mlm_token_losses(model, rows.to(device))[0].sum() / n_predicted).backward()
    eager = _grads(model.cpu()).clone()
    model = model.cuda()
    model.zero_grad(set_to_none=True)
    graphed = GraphedMlm(model, device, "fp32")
    for _ in range(2):  # capture, then a replay
        model.zero_grad(set_to_none=True)
        graphed.loss(to_bucket(rows, shape.special.pad, n_predicted, 64)).backward()
    assert torch.allclose(eager, _grads(model.cpu()), atol=1e-5)
    assert N_PIECES  # the tiny vocabulary of test_roberta


def emulated_make_graphed(module, sample, allow_unused_input=False):
    """torch.cuda.make_graphed_callables' contract on a CPU: the returned callable's backward hands autograd the
    same static gradient buffers on every call (overwritten by each replay)."""
    parameters = tuple(module.parameters())
    static = [torch.zeros_like(p) for p in parameters]

    class Replay(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            with torch.enable_grad():
                loss = module(*inputs[:len(sample)])
                grads = torch.autograd.grad(loss, parameters, allow_unused=allow_unused_input)
            for buffer, grad in zip(static, grads):
                buffer.copy_(grad if grad is not None else torch.zeros_like(buffer))
            return loss.detach()

        @staticmethod
        def backward(ctx, grad_output):
            assert float(grad_output) == 1.0
            return (None,) * len(sample) + tuple(b.detach() for b in static)

    return lambda *inputs: Replay.apply(*inputs, *parameters)


def test_accumulating_one_bucket_twice_keeps_both_chunks_gradients():
    shape, model = tiny_model()
    model.eval()
    rows, n_predicted = _batch(shape.special, "sentences", n=16, seed=7)
    chunks = rows.chunks(2)
    batches = [to_bucket(chunk, shape.special.pad, n_predicted, 64) for chunk in chunks]
    assert batches[0].bucket == batches[1].bucket  # the case that would reuse one graph's buffers
    model.zero_grad()
    for chunk in chunks:
        (mlm_token_losses(model, chunk)[0].sum() / n_predicted).backward()
    eager = _grads(model)
    graphed = GraphedMlm(model, torch.device("cpu"), "fp32", make_graphed=emulated_make_graphed)
    for _ in range(2):  # two steps: the second replays the graph captured in the first
        model.zero_grad(set_to_none=True)
        for batch in batches:
            graphed.loss(batch).backward()
        assert torch.allclose(eager, _grads(model), atol=1e-6)
    assert len(graphed.graphs) == 1


def test_graphs_check_script_refuses_a_cpu_plainly(repo_root):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, str(repo_root / "benchmarks" / "roberta_graphs_check.py"), "--device",
                             "cpu", "--steps", "1", "--layers", "1", "--batch-size", "2", "--vocab", "50"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "needs a CUDA device" in result.stderr


def test_graphs_check_script_plumbing_on_cpu_with_emulated_graphs(repo_root, monkeypatch, capsys):
    """The GPU check script end to end (its three checks and its line), graphs emulated: what the box will run,
    minus CUDA."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("roberta_graphs_check",
                                                  repo_root / "benchmarks" / "roberta_graphs_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "MAKE_GRAPHED", emulated_make_graphed)
    script.main(["--device", "cpu", "--steps", "4", "--layers", "1", "--batch-size", "6", "--vocab", "60",
                 "--max-length", "64"])
    line = capsys.readouterr().out.strip()
    assert line.count("\n") == 0 and " ok |" in line, line
    assert "repeatable (dropout on): identical" in line and "resumed at step 2: identical" in line, line


def test_cuda_graphs_auto_follows_the_device():
    """The default: graphs on a CUDA device, none elsewhere — a CPU run trains eagerly and records both words."""
    from baselines.roberta.graphs import resolve_mode
    from baselines.roberta.train import build_parser

    assert resolve_mode("auto", torch.device("cuda")) == "on"
    assert resolve_mode("auto", torch.device("cpu")) == "off"
    assert resolve_mode("off", torch.device("cuda")) == "off"
    assert build_parser().parse_args(["--lang", "xx", "--seed", "0", "--out", "x"]).cuda_graphs == "auto"
