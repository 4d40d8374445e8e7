"""Writes N scalars with torch.utils.tensorboard.SummaryWriter (4 tags x N/4 steps), or loads a
directory with TensorBoard's own EventAccumulator and prints the seconds and scalars it took."""
import sys
import time


def write(out, n):
    from torch.utils.tensorboard import SummaryWriter
    w = SummaryWriter(log_dir=out, max_queue=100000, flush_secs=3600)
    for step in range(n // 4):
        w.add_scalar("train/loss", 5.0 / (1 + step * 1e-4), step)
        w.add_scalar("lr", 3e-4, step)
        w.add_scalar("grad_norm", 1.0 + (step % 7) * 0.1, step)
        w.add_scalar("tps", 1000.0 + step % 13, step)
    w.close()


def load(out):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    t = time.perf_counter()
    acc = EventAccumulator(out, size_guidance={"scalars": 0})
    acc.Reload()
    n = sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])
    print(f"{time.perf_counter() - t:.3f} {n}")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        load(sys.argv[2])
