"""The federated algorithms, one file each, by their config names (`settings/algorithms.py`'s catalogue).

Adding an algorithm: one file here with its `Strategy` and its frozen `Parameters` (docs/development.md
"Adding an algorithm"), its entry in STRATEGIES, and its entry in the catalogue. FedAvgM, FedAdam and
FedYogi need no file: they are FedAvg (`Sync`) whose config their name gives a server optimizer; FADAS
likewise is FedBuff with AMSGrad (and its delay-adaptive step, `delay_threshold`).
"""

from asyncfl.fl.algorithms.ace import ACE
from asyncfl.fl.algorithms.afl import AFL
from asyncfl.fl.algorithms.afl_as_coded import AFLAsCoded
from asyncfl.fl.algorithms.asofed import ASOFed
from asyncfl.fl.algorithms.asyncfeded import AsyncFedED
from asyncfl.fl.algorithms.ca2fl import CA2FL
from asyncfl.fl.algorithms.fedac import FedAC
from asyncfl.fl.algorithms.fedasync import FedAsync
from asyncfl.fl.algorithms.fedbuff import FedBuff
from asyncfl.fl.algorithms.fedcompass import FedCompass
from asyncfl.fl.algorithms.fedstaleweight import FedStaleWeight
from asyncfl.fl.algorithms.mifa import MIFA
from asyncfl.fl.algorithms.port import PORT
from asyncfl.fl.algorithms.sync import Sync
from asyncfl.fl.algorithms.sync_as_coded import SyncAsCoded
from asyncfl.fl.strategy import Strategy
from asyncfl.settings.config import TrainConfig
from asyncfl.settings.names import ALGORITHMS

STRATEGIES: dict[str, type[Strategy]] = {
    "afl": AFL,
    "sync": Sync,
    "fedasync": FedAsync,
    "fedbuff": FedBuff,
    "afl_as_coded": AFLAsCoded,
    "sync_as_coded": SyncAsCoded,
    "fedavgm": Sync,
    "fedadam": Sync,
    "fedyogi": Sync,
    "fadas": FedBuff,  # FedBuff's buffer, then the server's AMSGrad step (settings/algorithms.py)
    "ca2fl": CA2FL,
    "fedcompass": FedCompass,
    "fedstaleweight": FedStaleWeight,
    "asyncfeded": AsyncFedED,
    "mifa": MIFA,
    "ace": ACE,
    "port": PORT,
    "asofed": ASOFed,
    "fedac": FedAC,
}


def make_strategy(config: TrainConfig) -> Strategy:
    return STRATEGIES[config.algorithm](config)


def check_registry(strategies: dict[str, type[Strategy]]) -> None:
    """The catalogue (`names.ALGORITHMS`) and the registry list the same algorithms (checked at import)."""
    if set(strategies) != set(ALGORITHMS):
        raise ImportError(f"strategies {sorted(strategies)} do not match names.ALGORITHMS {sorted(ALGORITHMS)}")


check_registry(STRATEGIES)
