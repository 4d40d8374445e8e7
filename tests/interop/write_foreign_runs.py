"""Writes the foreign-run fixtures with the real libraries, and what the reader must find in them.

  write_foreign_runs.py events DIR      # torch.utils.tensorboard.SummaryWriter event file + expect.json
  write_foreign_runs.py trainer-state DIR  # transformers.TrainerState.save_to_json + expect.json
  write_foreign_runs.py load DIR        # tensorboard's EventAccumulator over DIR: JSON of tag -> [[step, value]]
"""
import json
import math
import os
import sys


def events(out):
    from torch.utils.tensorboard import SummaryWriter
    import numpy as np
    w = SummaryWriter(log_dir=out)
    expect = {}
    for step in range(0, 40):
        loss = 5.0 * math.exp(-step / 15.0) + 0.01 * step
        lr = 3e-4 * min(1.0, (step + 1) / 10)
        w.add_scalar("train/loss", loss, step)
        w.add_scalar("lr", lr, step)
        w.add_scalar("tps", 1000.0 + step, step)
        w.add_scalar("mfu(%)", 40.0 + step / 10, step, new_style=True)  # a one-element tensor
        if step % 10 == 0:
            w.add_histogram("weights", np.arange(10) * step, step)  # skipped
            w.add_text("note", f"step {step}", step)                # skipped
        for tag, v in (("train/loss", loss), ("lr", lr), ("tps", 1000.0 + step), ("mfu(%)", 40.0 + step / 10)):
            expect.setdefault(tag, []).append([step, float(np.float32(v))])
    w.close()
    files = [f for f in os.listdir(out) if f.startswith("events.out.tfevents")]
    json.dump({"file": files[0], "scalars": expect}, open(os.path.join(out, "expect.json"), "w"))


def trainer_state(out):
    from transformers import TrainerState
    history = []
    for step in range(10, 110, 10):
        history.append({"epoch": step / 100, "grad_norm": 1.0 / step, "learning_rate": 2e-5 * (1 - step / 200),
                        "loss": 3.0 - step / 100, "step": step})
        if step % 50 == 0:
            history.append({"epoch": step / 100, "eval_loss": 3.1 - step / 100, "eval_runtime": 1.5, "step": step})
    history.append({"epoch": 1.0, "step": 100, "total_flos": 12345.0, "train_loss": 2.5, "train_runtime": 60.2})
    state = TrainerState(global_step=100, max_steps=100, log_history=history)
    state.save_to_json(os.path.join(out, "trainer_state.json"))
    json.dump({"history": history}, open(os.path.join(out, "expect.json"), "w"))


def load(out):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(out, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    got = {}
    for tag in acc.Tags()["scalars"]:
        got[tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
    print(json.dumps(got))


if __name__ == "__main__":
    {"events": events, "trainer-state": trainer_state, "load": load}[sys.argv[1]](sys.argv[2])
