"""The plain trainer: one client after another with an ordinary model and optimizer, the reference
that `vectorised.VectorisedTrainer` and `graphed.GraphedTrainer` must agree with."""

from typing import cast

import torch
from torch import nn

from asyncfl.training.interface import (
    LocalResult,
    LocalTask,
    LocalTrainer,
    make_optimizer,
    merge_into,
    optimizer_step,
    run_epochs,
)


def proximal_term(model: nn.Module, anchor: list[torch.Tensor], mu: float) -> torch.Tensor:
    """FedProx's μ/2‖θ − θ_start‖² over the model's parameters (`anchor`: θ_start, in parameter order).
    Only the gradient sees it: the logged training loss stays the data loss."""
    return cast(
        torch.Tensor, mu / 2 * sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor, strict=True))
    )


class PlainTrainer(LocalTrainer):
    """One client at a time, minibatch Adam/SGD over data already on the device."""

    def train(self, tasks: list[LocalTask]) -> list[LocalResult]:
        return [self.train_one(task) for task in tasks]

    def train_one(self, task: LocalTask) -> LocalResult:
        model, settings = self.model, self.settings
        model.load_state_dict(task.start_model)
        model.train()
        optimizer = make_optimizer(settings.optimizer, model.parameters(), task.lrs[0])  # fresh state per dispatch
        anchor = [task.start_model[name] for name, _ in model.named_parameters()]
        steps = 0  # local steps so far: `task.merge` comes after its `after_steps`

        def penalty() -> torch.Tensor:
            return proximal_term(model, anchor, task.prox_mu)

        def epoch(index: int, lr: float, order: torch.Tensor) -> float:
            nonlocal optimizer, steps
            if task.optimizer_per_epoch and index:
                optimizer = make_optimizer(settings.optimizer, model.parameters(), lr)
            for group in optimizer.param_groups:
                group["lr"] = lr
            total = torch.zeros((), dtype=torch.float64, device=order.device)
            for batch in order.split(settings.batch_size):
                images, labels = self.images[batch], self.labels[batch]
                loss = optimizer_step(
                    model, optimizer, images, labels, settings.numerics, penalty if task.prox_mu else None
                )
                total += loss.double() * len(batch)
                steps += 1
                if task.merge is not None and steps == task.merge.after_steps:
                    merge_into(model.state_dict(), task.merge)
            return (total / len(order)).item()

        epoch_loss, epochs_run, mean_epoch_loss = run_epochs(task, settings.patience, epoch)
        state = {key: value.detach().clone() for key, value in model.state_dict().items()}
        return LocalResult(state, epoch_loss, epochs_run, mean_epoch_loss)
