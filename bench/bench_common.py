"""What the benches that time meshtrain share (bench/shapes_bench.py, bench/trainer_bench.py)."""


def add_run_args(ap, micro_batch, steps):
    """The training run a bench times: model preset, sequence, batch sizes, steps and rounds."""
    ap.add_argument("--model", default="small")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=micro_batch)
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--rounds", type=int, default=2)
