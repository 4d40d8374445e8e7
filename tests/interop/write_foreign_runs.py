"""Writes the foreign-run fixtures with the real libraries, and what the reader must find in them.

  write_foreign_runs.py events DIR      # torch.utils.tensorboard.SummaryWriter event file + expect.json
  write_foreign_runs.py trainer-state DIR  # transformers.TrainerState.save_to_json + expect.json
  write_foreign_runs.py load DIR        # tensorboard's EventAccumulator over DIR: JSON of tag -> [[step, value]]
  write_foreign_runs.py events-steps DIR FIRST END   # a (re)started tracker: a new event file, steps FIRST..END-1
  write_foreign_runs.py trainer-state-upto FILE LAST # trainer_state.json with log_history up to step LAST
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


def events_steps(out, first, end):
    # Each call is a new process, so a new SummaryWriter file (its name holds the pid): what a
    # tracker restarted from a checkpoint writes into the same log directory.
    from torch.utils.tensorboard import SummaryWriter
    w = SummaryWriter(log_dir=out)
    for step in range(int(first), int(end)):
        w.add_scalar("train/loss", 5.0 * math.exp(-step / 15.0) + 0.01 * step, step)
        w.add_scalar("lr", 3e-4 * min(1.0, (step + 1) / 10), step)
    w.close()


def trainer_state_upto(path, last):
    # What Trainer writes at each save: the whole log_history so far, every 10 steps a loss and
    # every 50 an eval_loss.
    from transformers import TrainerState
    history = []
    for step in range(10, int(last) + 1, 10):
        history.append({"epoch": step / 100, "learning_rate": 2e-5 * (1 - step / 200), "loss": 3.0 - step / 100,
                        "step": step})
        if step % 50 == 0:
            history.append({"epoch": step / 100, "eval_loss": 3.1 - step / 100, "step": step})
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    TrainerState(global_step=int(last), max_steps=100, log_history=history).save_to_json(path)


def load(out):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(out, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    got = {}
    for tag in acc.Tags()["scalars"]:
        got[tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
    print(json.dumps(got))


if __name__ == "__main__":
    {"events": events, "trainer-state": trainer_state, "load": load, "events-steps": events_steps,
     "trainer-state-upto": trainer_state_upto}[sys.argv[1]](*sys.argv[2:])
